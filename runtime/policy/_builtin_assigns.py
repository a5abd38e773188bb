"""Shell builtins that assign variables without ``NAME=VALUE`` syntax.

``printf -v NAME FORMAT``, ``read NAME``, ``mapfile NAME``, ``getopts OPTS NAME``, ``let
EXPR...`` (each an arithmetic expression: ``let N=1 "M+=2" K++``) and a nameref (``declare
-n REF=NAME``, then ``REF=VALUE``) set a variable as ``NAME=VALUE`` does; with ``set -a``,
or when the name is already exported (``LD_PRELOAD``, ``PATH``), the value reaches every
later program. The walker judges them as that plain assignment
(:meth:`runtime.policy._shell_code.CodeMixin.environment`): by the rules on assigned names
and by what the value stands for. A value only known at run time (what ``read`` reads, a
``printf`` format it cannot expand here, an arithmetic result) is a run-time value.
"""

from __future__ import annotations

import re

from runtime.policy._arith import RUNTIME_TEXT, arith_targets
from runtime.policy.argv import Word, short_cluster

__all__ = ["DECLARERS", "Assignments", "builtin_assignments", "declared_names"]

# Per builtin: its options that take a value (bash's internal_getopt: attached or the next
# word), and the option whose value is the name assigned.
_READ_VALUED = frozenset("adinNptu")
_MAPFILE_VALUED = frozenset("dnOsuCc")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[.*\])?")

#: Builtins whose operands are NAME=VALUE assignments (or bare names).
DECLARERS = frozenset({"export", "declare", "typeset", "readonly", "local"})


def declared_names(name: str, args: list[Word]) -> list[Word]:
    """The literal ``NAME=VALUE`` operands of ``export``/``declare``/``typeset``/
    ``readonly``/``local`` ``args`` (``NAME+=V`` and ``a[0]=V`` as ``NAME=``, ``a=``), and
    the bare names that ``export NAME`` or ``declare -x NAME`` put in the environment of
    later programs: what a rule on assigned names judges, as it does ``NAME=VALUE cmd``.
    Words known only at run time are the walker's (it records their names already)."""
    exports = name == "export"
    out: list[Word] = []
    options_done = False
    for w in args:
        if w.dynamic:
            continue
        if not options_done and w.value[:1] in ("-", "+") and "=" not in w.value:
            if w.value == "--":
                options_done = True
            else:
                cluster = w.value[1:]
                if w.value[0] == "-" and "x" in cluster:
                    exports = True
                if "f" in cluster or "F" in cluster:
                    return []  # 'declare -f NAME': functions, no variable
            continue
        options_done = True
        var, eq, _ = w.value.partition("=")
        var = var.split("[", 1)[0].rstrip("+")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            continue  # no identifier: bash refuses it
        if eq or exports:
            out.append(Word(f"{var}="))
    return out


class Assignments:
    """What a builtin assigns: ``NAME=VALUE`` words (a run-time value is a dynamic word),
    whether a name is only known at run time, and shell code it runs (``mapfile -C``)."""

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.unknown_name = False
        self.code: list[Word] = []

    def assign(self, name: Word, value: str | None) -> None:
        # An array element ('a[0]') is the array's variable; a name the shell would expand
        # or that is no identifier (bash then refuses it) is not known here.
        base = name.value.split("[", 1)[0]
        if name.dynamic or not _NAME_RE.fullmatch(name.value):
            self.unknown_name = True
        elif value is None:
            self.words.append(Word(f"{base}=", dynamic=True))
        else:
            self.words.append(Word(f"{base}={value}"))

    def arithmetic(self, expr: Word) -> None:
        """The variables an arithmetic expression assigns (:func:`._arith.arith_targets`),
        to values known at run time only; a target built at run time ('x$i=1') is a name
        not known here, and so is every name an expression built at run time assigns
        ('let "$x"', 'let "i=$n"': the expansion is read as part of the expression)."""
        names, runtime = arith_targets(expr.value)
        if runtime or expr.dynamic or RUNTIME_TEXT.intersection(expr.value):
            self.unknown_name = True
        for name in names:
            self.words.append(Word(f"{name}=", dynamic=True))


def _options(
    words: list[Word], valued: frozenset[str]
) -> tuple[dict[str, Word], list[Word]] | None:
    """Read a builtin's short options as bash's internal_getopt does: (each option letter
    -> its value or '', the operands). None when an option's value is missing."""
    opts: dict[str, Word] = {}
    i = 1
    while i < len(words):
        w = words[i]
        cluster = short_cluster(w.value)
        if w.value == "--":
            i += 1
            break
        if cluster is None or w.operand:
            break
        for k, letter in enumerate(cluster):
            if letter not in valued:
                opts[letter] = Word("")
                continue
            if k + 1 < len(cluster):
                opts[letter] = Word(cluster[k + 1 :], w.dynamic)
            elif i + 1 < len(words):
                i += 1
                opts[letter] = words[i]
            else:
                return None
            break
        i += 1
    return opts, words[i:]


def _printf_value(operands: list[Word]) -> str | None:
    """What 'printf FORMAT ARGS' prints, for a format of literal text, '%s' and '%%'
    (bash reuses the format while arguments remain); None when only known at run time."""
    if not operands or any(w.dynamic for w in operands):
        return None
    fmt, args = operands[0].value, [w.value for w in operands[1:]]
    # Formats expanded here: '%s' and '%%' only; other directives and escapes are left
    # to run time.
    rest = fmt.replace("%%", "").replace("%s", "")
    if "%" in rest or "\\" in rest:
        return None
    if "%s" not in fmt:
        return fmt.replace("%%", "%")
    out: list[str] = []
    while True:
        parts = fmt.split("%%")
        pieces: list[str] = []
        for part in parts:
            chunks = part.split("%s")
            text = chunks[0]
            for chunk in chunks[1:]:
                text += (args.pop(0) if args else "") + chunk
            pieces.append(text)
        out.append("%".join(pieces))
        if not args:
            return "".join(out)


def _read_value(names: int, stdin_text: str | None, raw: bool) -> list[str] | None:
    """The fields 'read' assigns from a literal here-string or here-document (default
    IFS: blank-separated, the last name takes the rest); None when only known at run
    time."""
    if stdin_text is None or (not raw and "\\" in stdin_text):
        return None
    line = stdin_text.split("\n", 1)[0].strip(" \t")
    fields = line.split(None, names - 1) if line else []
    return fields + [""] * (names - len(fields))


def builtin_assignments(
    name: str, words: list[Word], stdin_text: str | None, ifs_set: bool
) -> Assignments | None:
    """What the builtin ``name`` run as ``words`` assigns (None when it is none of them).
    ``stdin_text``: a literal here-string or here-document on its input; ``ifs_set``:
    IFS is assigned on the same command (read's fields are then not known here)."""
    out = Assignments()
    if name == "printf":
        read = _options(words, frozenset("v"))
        if read is None or "v" not in read[0]:
            return None
        out.assign(read[0]["v"], _printf_value(read[1]))
    elif name == "read":
        read = _options(words, _READ_VALUED)
        if read is None:
            return None
        opts, names = read
        if "a" in opts:
            out.assign(opts["a"], None)
        values = None if ifs_set else _read_value(max(len(names), 1), stdin_text, "r" in opts)
        for k, w in enumerate(names):
            out.assign(w, None if values is None else values[k])
    elif name in ("mapfile", "readarray"):
        read = _options(words, _MAPFILE_VALUED)
        if read is None:
            return None
        opts, names = read
        if "C" in opts:  # the callback is evaluated as shell code for every C lines read
            out.code.append(opts["C"])
        for w in names[:1]:
            out.assign(w, None)
    elif name == "let":
        for w in words[1:]:
            out.arithmetic(w)
    elif name == "getopts":
        if len(words) > 2:
            out.assign(words[2], None)
    elif name in ("declare", "typeset", "local"):
        read = _options(words, frozenset())
        if read is None or "n" not in read[0]:
            return None
        # 'declare -n REF=NAME': assigning REF later sets NAME, to what is not known here.
        for w in read[1]:
            _ref, eq, target = w.value.partition("=")
            if eq:
                out.assign(Word(target, w.dynamic), None)
            else:
                out.unknown_name = True  # its target is set later
    else:
        return None
    return out
