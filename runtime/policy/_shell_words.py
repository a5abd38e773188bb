"""Word expansion for the shell walker: a word's value with its quoting removed, whether it is
only known at run time (parameters, substitutions, brace expansion), the substitutions inside
it, and ``cd`` followed lexically for the relative paths of later commands. See
:mod:`runtime.policy.shell`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from runtime.policy._shell_state import WalkerState
from runtime.policy.argv import Word, unquote

__all__ = ["WordsMixin"]

_BRACE_RE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


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
        raw = text[n.pos[0] : n.pos[1]] if hasattr(n, "pos") else n.word
        if "$" in raw or "`" in raw or _BRACE_RE.search(raw):
            dynamic = True
        value = n.word
        if not dynamic and n.kind == "word":
            # bashlex's own quote removal is wrong for mixed quoting ('a'"'"'b'); redo it.
            try:
                value = unquote(raw)
            except ValueError:
                dynamic = True
        return Word(value, dynamic), tuple(inner)

    def change_directory(self, target: Word) -> None:
        """Follow 'cd TARGET' lexically, for the relative paths of later commands.

        The directory is tracked from the start ('cd build; cd ..' is back at the start);
        later commands see it (SimpleCommand.cwd) only while it may lie outside the
        starting directory (absolute, '~', above the start, run-time values, 'cd -'):
        inside it, relative paths keep meaning what the rules already judge ('cd build &&
        rm -rf *' stays as it was). Scope is the whole command string, subshells included:
        over-approximation only makes more paths look like they leave.
        """
        if self.speculating:
            return
        v = target.value
        base = self.directory
        if target.dynamic or v == "-" or (base is not None and base.dynamic):
            self.directory = Word(v, dynamic=True)
        elif v.startswith(("/", "~")) or base is None:
            self.directory = Word(_lexical(v))
        else:
            self.directory = Word(_lexical(base.value + "/" + v))
        d = self.directory
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
