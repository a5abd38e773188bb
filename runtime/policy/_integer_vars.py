"""Integer variables: every value given to one is an arithmetic expression.

After ``declare -i n`` (``typeset``, ``local``, ``export``, ``readonly`` alike), ``n=V``
evaluates V as arithmetic: ``n=PATH=5`` assigns PATH, and so does ``n=$(cat cfg)`` or
``read n < cfg`` when the file holds ``PATH=5``. :mod:`runtime.policy._arith` reads the
literal text's names; this module finds the values known only at run time that reach a
declared integer variable, which name a variable no one knows here (the walker's
``dynamic`` hazard): an assignment whose value holds an expansion (``n=$x``, ``n+=$(cmd)``,
``a=($(cmd))``, ``declare -i n=$x``), what ``read``, ``mapfile``/``readarray`` and
``getopts`` read into it, ``printf -v`` with an expansion in its arguments, and ``for`` or
``select`` over a list that holds an expansion or a glob (a file's name). Read from the
text, as :mod:`._arith` reads it; text bash reads as literal (:mod:`._literal_spans`)
declares and assigns nothing.

A declaration spelled with quotes or backslashes in its words (``'declare' -i n``,
``declare "-i" n``) is not read for its names: every value in the text is then taken for a
run-time one (:func:`obscured_declaration`).

Not followed: a variable given the attribute at run time (``declare -$opt n``), and a
value that reaches the variable by a way not listed (``declare -n`` to it): the walker does
not track data flow.
"""

from __future__ import annotations

import re

from runtime.policy._literal_spans import LiteralSpans

__all__ = ["INTEGER_DECL_RE", "integer_variables", "obscured_declaration", "runtime_values"]

#: 'declare -i', 'local -r -ai', ...: the variable's later values are arithmetic expressions.
#: The keyword is a word of its own (not 'local' in '/usr/local'), and the 'i' is in one of
#: the option words right after it, before the first name ('export CFLAGS="-fpic"' and
#: 'find /usr/local -iname x' declare nothing).
INTEGER_DECL_RE = re.compile(
    r"(?<![A-Za-z0-9_./-])(declare|typeset|local|export|readonly)"
    r"(?:[ \t]+[-+][A-Za-z]+)*[ \t]+[-+][A-Za-z]*i[A-Za-z]*(?=[ \t;&|\n)]|$)"
)
#: The same spelled with quotes or backslashes in its words ('\\declare -i', 'declare "-i"',
#: "'local' -i"): bash removes them, so the declaration is made all the same.
_QUOTING = "[\"'\\\\]*"
_OBSCURED_DECL_RE = re.compile(
    r"(?<![A-Za-z0-9_./-])"
    + _QUOTING
    + "(?:"
    + "|".join(_QUOTING.join(w) for w in ("declare", "typeset", "local", "export", "readonly"))
    + ")"
    + _QUOTING
    + rf"(?:[ \t]+{_QUOTING}[-+][A-Za-z\"'\\]+)*[ \t]+{_QUOTING}[-+][A-Za-z\"'\\]*i"
)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Integer variables whose values are followed through the text, each by a scan of it.
_NAMES_FOLLOWED = 64
_RUNTIME = frozenset("$`")
_GLOB = frozenset("*?[")
# Where a simple command ends (approximately: enough to bound a builtin's words).
_COMMAND_END_RE = re.compile(r"[;&|\n)]")
# Builtins that assign what they read (or format) to the names among their words.
_READERS_RE = re.compile(r"(?<![A-Za-z0-9_.-])(read|mapfile|readarray|getopts|printf)\s")
# 'for NAME in LIST' / 'select NAME in LIST'; without 'in', the positional parameters.
_LOOP_RE = re.compile(r"(?<![A-Za-z0-9_.-])(?:for|select)\s+([A-Za-z_][A-Za-z0-9_]*)(\s+in\s)?")
_QUOTES_RE = re.compile(r"[\"'\\]")
# Where a loop's list ends.
_LIST_END_RE = re.compile(r"[;\n]|\bdo\b")


def _statement(text: str, start: int) -> str:
    m = _COMMAND_END_RE.search(text, start)
    return text[start : m.start() if m else len(text)]


def obscured_declaration(text: str, spans: LiteralSpans) -> bool:
    """Whether ``text`` declares an integer variable in a spelling :data:`INTEGER_DECL_RE`
    does not read (quotes or backslashes in its words) outside literal text: its names and
    their values are not followed, so the caller takes them for run-time ones."""
    plain = {m.start() for m in INTEGER_DECL_RE.finditer(text)}
    for m in _OBSCURED_DECL_RE.finditer(text):
        core = m.group().lstrip("\"'\\")
        start = m.end() - len(core)
        if start not in plain and not spans.holds(start, m.end()):
            return True
    return False


def integer_variables(text: str, spans: LiteralSpans) -> frozenset[str] | None:
    """The names ``text`` declares integer (None when one is only known at run time)."""
    names: set[str] = set()
    covered = 0  # a declaration inside the statement of one already read: read with it
    for m in INTEGER_DECL_RE.finditer(text):
        if m.start() < covered or spans.holds(m.start(), m.end()):
            continue
        statement = _statement(text, m.start())
        covered = m.start() + len(statement)
        for word in statement.split()[1:]:
            if word[:1] in ("-", "+"):
                continue
            target = _QUOTES_RE.sub("", word.split("=", 1)[0])
            if _RUNTIME.intersection(target):
                return None
            base = target.split("[", 1)[0].rstrip("+")
            if _NAME_RE.fullmatch(base):
                names.add(base)
    return frozenset(names)


def _value(text: str, i: int) -> str:
    """The word an assignment's value is, from ``i``: to the first blank or operator
    outside quotes and parentheses ('a=($(cmd) x)' is one value)."""
    quote = ""
    depth = 0
    j = i
    while j < len(text):
        c = text[j]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                j += 1
        elif c == "\\":
            j += 1
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c in " \t\n;&|<>)":
            break
        j += 1
    return text[i:j]


def _assigned(text: str, name: str, spans: LiteralSpans) -> bool:
    """Whether ``name=V``, ``name+=V`` or ``name[i]=V`` gives it a run-time value."""
    pattern = r"(?<![A-Za-z0-9_$/.-])" + name + r"(?:\[[^\]]*\])?\+?="
    for m in re.finditer(pattern, text):
        if not spans.holds(m.start(), m.end()) and _RUNTIME.intersection(_value(text, m.end())):
            return True
    return False


def _read_into(text: str, names: frozenset[str], spans: LiteralSpans) -> bool:
    """Whether read, mapfile, readarray, getopts or printf -v (with an expansion in its
    arguments) assigns one of ``names``."""
    covered = 0  # a reader's name inside the statement of one already read: its argument
    for m in _READERS_RE.finditer(text):
        if m.start() < covered or spans.holds(m.start(), m.end()):
            continue
        statement = _statement(text, m.end())
        covered = m.end() + len(statement)
        words = {_QUOTES_RE.sub("", w).split("[", 1)[0] for w in statement.split()}
        if not words & names:
            continue
        if m.group(1) != "printf" or _RUNTIME.intersection(statement):
            return True
    return False


def _looped(text: str, names: frozenset[str], spans: LiteralSpans) -> bool:
    """Whether 'for NAME' or 'select NAME' gives one of ``names`` a run-time value."""
    covered = 0  # a loop inside the list of one already read: that list held its words
    for m in _LOOP_RE.finditer(text):
        if m.start() < covered or m.group(1) not in names or spans.holds(m.start(), m.end()):
            continue
        if m.group(2) is None:
            return True  # the positional parameters
        stop = _LIST_END_RE.search(text, m.end())
        covered = stop.start() if stop else len(text)
        if (_RUNTIME | _GLOB).intersection(text[m.end() : covered]):
            return True
    return False


def runtime_values(text: str, names: frozenset[str], spans: LiteralSpans) -> bool:
    """Whether ``text`` gives one of the integer variables ``names`` a value known at run
    time only (see the module's docstring for the ways followed)."""
    if not names:
        return False
    if len(names) > _NAMES_FOLLOWED:
        return True  # each name is a scan of the text: past this many, not followed
    if any(_assigned(text, name, spans) for name in names):
        return True
    return _read_into(text, names, spans) or _looped(text, names, spans)
