"""Word expansion for the shell walker: a word's value with its quoting removed, whether it is
only known at run time (parameters, substitutions, brace expansion), the substitutions inside
it, and ``cd`` followed lexically for the relative paths of later commands. See
:mod:`runtime.policy.shell`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from runtime.policy._ansi_c import ansi_c_word
from runtime.policy._globreach import is_glob
from runtime.policy._shell_state import WalkerState
from runtime.policy._word_shape import word_shape
from runtime.policy.argv import Word, unquote

__all__ = ["WordsMixin"]

_BRACE_RE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_ROTATE_RE = re.compile(r"^[+-][0-9]+$")  # pushd/popd +N, -N: a place in the stack
_MAX_DIRS = 16  # directories a command may be in, tracked (then: only known at run time)
# What starts a command inside a ``${...}`` expansion's text: bashlex keeps that text as
# the parameter's value and never parses it ('${x:-$(rm -rf /)}', '${a[`id`]}').
_SUBST_MARKS = ("$(", "`", "<(", ">(")


def _outside_single_quotes(raw: str) -> str:
    """``raw`` with the text of its single-quoted spans replaced by ``q``: what the shell may
    still expand. Between single quotes nothing is expanded (no ``$``, backquote or brace
    expansion, no escape), so ``bash -c 'echo "$x"'`` hands its inner shell a fixed text,
    which the walker parses and judges as it does a command line; the inner shell's own
    expansions are the inner parse's run-time words. ``$'...'`` (ANSI-C) keeps its ``$``
    outside, so it stays a run-time word. A backslash-escaped character is literal outside
    single quotes too (``\\$``, ``\\```, ``\\{``): it becomes ``qq``. An unterminated quote:
    ``raw`` as it is."""
    out: list[str] = []
    quote = ""  # "'" or '"' while inside one
    i = 0
    while i < len(raw):
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote = ""
            i += 1
            continue
        if c == "\\":
            out.append("qq")
            i += 2
            continue
        if c == '"':
            quote = "" if quote else '"'
        elif c == "'" and not quote:
            quote = "'"
            out.append("q")
        out.append(c)
        i += 1
    return raw if quote == "'" else "".join(out)


class WordsMixin(WalkerState):
    """Words and the working directory (a part of the walker)."""

    def word(self, n: Any, text: str, depth: int) -> tuple[Word, tuple[str, ...]]:
        """The word, and the programs of the substitutions inside it (walked as commands)."""
        dynamic = False
        inner: list[str] = []
        for part in getattr(n, "parts", None) or []:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                dynamic = True
                before = len(self.commands)
                self.node(part.command, text, depth, ())
                inner.extend(c.program for c in self.commands[before:] if c.program)
            elif part.kind == "parameter":
                dynamic = True
                self._parameter_substitutions(str(getattr(part, "value", "")), depth)
        raw = text[n.pos[0] : n.pos[1]] if hasattr(n, "pos") else n.word
        expanded = _outside_single_quotes(raw)
        if "$" in expanded or "`" in expanded or _BRACE_RE.search(expanded):
            dynamic = True
        if dynamic and not inner and n.kind == "word":
            # "$'\x2egit'": ANSI-C quoting is literal text (bashlex reads its '$' as a
            # parameter); a word with nothing else known only at run time is that text.
            decoded = ansi_c_word(raw)
            if decoded is not None:
                return Word(decoded), ()
        value = n.word
        if not dynamic and n.kind == "word":
            # bashlex's own quote removal is wrong for mixed quoting ('a'"'"'b'); redo it.
            try:
                value = unquote(raw)
            except ValueError:
                dynamic = True
        if dynamic:
            single, prefix = word_shape(raw)
            return Word(value, dynamic, single=single, prefix=prefix), tuple(inner)
        return Word(value, dynamic), tuple(inner)

    def _parameter_substitutions(self, value: str, depth: int) -> None:
        """Commands inside a ``${...}`` expansion (its default, pattern, replacement, offset
        or subscript: ``${x:-$(cmd)}``, ``${a[$(cmd)]}``) run when it is expanded, but bashlex
        leaves that text unparsed. Whether quotes in it quote depends on the context (inside
        double quotes ``"${x:-'$(cmd)'}"`` runs cmd; unquoted it does not), so any mark of a
        substitution asks as code built at run time; the text from the first mark on is
        also walked, so that a command a rule denies is still denied."""
        marks = [k for k in (value.find(m) for m in _SUBST_MARKS) if k >= 0]
        if not marks:
            return
        self.hazard("dynamic", "a substitution inside ${...} runs at run time")
        self.parse(": " + value[min(marks) :], depth + 1)

    def change_directory(self, target: Word) -> None:
        """Follow 'cd TARGET' lexically, for the relative paths of later commands.

        The directory is tracked from the start ('cd build; cd ..' is back at the start);
        later commands see it (SimpleCommand.cwd) only while it may lie outside the
        starting directory (absolute, '~', above the start, run-time values, globs, 'cd
        -'): inside it, relative paths keep meaning what the rules already judge ('cd
        build && rm -rf *' stays as it was). Every directory it may have reached is kept
        too (SimpleCommand.dirs: a 'cd' can fail and the line go on after ';'). Scope is
        the whole command string, subshells included: over-approximation only makes more
        paths look like they leave.
        """
        if self.speculating:
            return
        self._reach(target)
        self.directory = self._resolve(self.directory, target)
        self._set_cwd()

    def directory_builtin(self, name: str, words: list[Word]) -> None:
        """'cd'/'chdir', 'pushd [-n] [DIR | +N | -N]', 'popd [-n] [+N | -N]': pushd saves
        the directory it leaves, popd returns to the last one saved ('pushd build && make
        && popd && rm -rf dist' is back at the start)."""
        if self.speculating:
            return
        options: list[str] = []
        operands: list[Word] = []
        for k, w in enumerate(words[1:], 1):
            if w.value == "--":
                operands.extend(words[k + 1 :])
                break
            if w.value.startswith("-") and w.value != "-" and not _ROTATE_RE.match(w.value):
                options.append(w.value)
            else:
                operands.append(w)
        if name in ("cd", "chdir"):
            self.change_directory(operands[0] if operands else Word("~"))
            return
        rotate = bool(operands) and _ROTATE_RE.match(operands[0].value) is not None
        keep = any("n" in o for o in options)  # '-n': the stack changes, the directory not
        if name == "pushd" and operands and not rotate:
            if keep:
                self._reach(operands[0])  # a later popd goes there
                self.dir_stack.append(self._resolve(self.directory, operands[0]))
                return
            self.dir_stack.append(self.directory)
            self.change_directory(operands[0])
            return
        if rotate or keep:
            if rotate and not keep:
                self.directory = Word("", dynamic=True)  # one of the saved: which, unknown
            elif self.dir_stack:
                self.dir_stack.pop()
        elif name == "pushd":  # exchange the two top directories
            if self.dir_stack:
                self.dir_stack[-1], self.directory = self.directory, self.dir_stack[-1]
        elif self.dir_stack:  # popd
            self.directory = self.dir_stack.pop()
        self._set_cwd()

    def _resolve(self, base: Word | None, target: Word) -> Word:
        """Where 'cd TARGET' from ``base`` (None: the start) goes."""
        v = target.value
        if self._unknown(target) or (base is not None and base.dynamic):
            return Word(v, dynamic=True)
        if v.startswith(("/", "~")) or base is None:
            return Word(_lexical(v))
        return Word(_lexical(base.value.rstrip("/") + "/" + v))

    def _unknown(self, target: Word) -> bool:
        """Whether where 'cd TARGET' goes is only known at run time: a parameter or a
        substitution, 'cd -', a glob (it may even match '..': 'cd .?'), or a relative
        target while this command sets CDPATH."""
        v = target.value
        return (
            target.dynamic
            or v == "-"
            or is_glob(v)
            or (self.cdpath and not v.startswith(("/", "~", "./", "../")) and v not in (".", ".."))
        )

    def _reach(self, target: Word) -> None:
        """Add where 'cd TARGET' may go, from the start or any directory reached before,
        to :attr:`dirs`; past :data:`_MAX_DIRS` of them, one only known at run time."""
        v = target.value
        if self._unknown(target):
            new = [Word("", dynamic=True)]
        elif v.startswith(("/", "~")):
            new = [Word(_lexical(v))]
        else:
            new = [Word(_lexical(v))] + [
                self._resolve(d, target) for d in self.dirs if not d.dynamic
            ]
        for w in new:
            if w not in self.dirs and (w.dynamic or w.value != "."):
                self.dirs.append(w)
        if len(self.dirs) > _MAX_DIRS:
            self.dirs = [Word("", dynamic=True)]

    def _set_cwd(self) -> None:
        d = self.directory
        if d is None:
            self.cwd = None
            return
        outside = d.dynamic or d.value.startswith(("/", "~")) or _climbs(d.value)
        self.cwd = d if outside else None


def _lexical(path: str) -> str:
    """Lexical normal form of a 'cd' target: 'a/../..' -> '..', '/x/..' -> '/', '~/x/..'
    -> '~'; a climb out of '~' is taken to reach '/' (assume the worst)."""
    if path.startswith("~"):
        head, _, tail = path.partition("/")
        rest = posixpath.normpath("x/" + tail) if tail else "x"
        if rest == "." or rest.startswith(".."):
            return "/"
        return head + rest[1:]
    return posixpath.normpath(path) if path else "."


def _climbs(path: str) -> bool:
    """Whether a relative path climbs above its start ('..', 'a/../..')."""
    depth = 0
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        depth += -1 if seg == ".." else 1
        if depth < 0:
            return True
    return False
