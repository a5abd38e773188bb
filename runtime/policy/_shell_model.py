"""What the shell analysis finds: the simple commands that would run, the hazards, and the
limits that bound the walk. Shared by the walker's parts (``_shell_*``) and
:mod:`runtime.policy.shell`, which re-exports the public names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runtime.policy.argv import Word

__all__ = [
    "CACHED_COMMAND_CHARS",
    "MAX_COMMANDS",
    "MAX_COMMAND_CHARS",
    "MAX_DEPTH",
    "MAX_READINGS",
    "Analysis",
    "Hazard",
    "HazardKind",
    "SimpleCommand",
]

HazardKind = Literal["dynamic", "interpreter", "unparseable", "fork_bomb"]

MAX_COMMAND_CHARS = 65_536
MAX_DEPTH = 8
MAX_COMMANDS = 512
MAX_READINGS = 16

#: Commands longer than this are analysed every time: caching attacker-sized strings would
#: let a caller pin 4096 x 64 KiB of memory.
CACHED_COMMAND_CHARS = 4096


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    program: str  # base name of the program after wrappers ('' for assignments only)
    args: tuple[Word, ...] = ()
    assigns: tuple[str, ...] = ()  # variable names set for it (VAR=x cmd, env VAR=x)
    redirects: tuple[Word, ...] = ()  # output redirection targets
    feeds: tuple[str, ...] = ()  # programs whose output reaches its input or code
    wrappers: tuple[str, ...] = ()  # wrappers seen through, outermost first
    # One of the other readings of a wrapper's options (see WrappersMixin.simple): deny and ask
    # rules apply to it, an allowlist does not (it may name a word that never runs).
    speculative: bool = False
    # A guess that a program no table knows runs this ('pkexec sh -c CMD'): a deny rule
    # that matches it asks, never denies on its own (see CodeMixin.guess_shells).
    guess: bool = False
    # The directory relative paths are taken from when an earlier 'cd' (or 'env -C') left
    # the starting directory for somewhere outside it ('cd / && rm -rf etc'); None when no
    # such 'cd' ran. A dynamic Word: the directory is only known at run time.
    cwd: Word | None = None
    # Every directory other than the start that the command may be in when it runs: each
    # one a 'cd'/'pushd' before it may have reached (a 'cd' can fail and the line go on),
    # relative to the start or absolute; a dynamic Word: one only known at run time.
    dirs: tuple[Word, ...] = ()
    # Files it writes that its arguments do not show: what a program read from its input or
    # from a file this command writes says to write ('sed -f - <<< "w F"'), judged with
    # the ones its arguments name (runtime.policy._writes.written_operands).
    writes: tuple[Word, ...] = ()


@dataclass(frozen=True, slots=True)
class Hazard:
    kind: HazardKind
    detail: str
    feeds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Analysis:
    commands: tuple[SimpleCommand, ...]
    hazards: tuple[Hazard, ...]
