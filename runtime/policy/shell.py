"""Shell command analysis: a bashlex parse turned into the simple commands that would run.

What an attacker controls is the whole command string. The analysis is conservative:

- every simple command is found, wherever it sits (lists, pipelines, ``$()``, backticks,
  process substitution, function bodies, loops, here-docs fed to a shell, ``sh -c`` strings,
  ``eval`` strings, alias values);
- wrappers are seen through (``env``, ``sudo``, ``timeout``, ``xargs``, ``find -exec``,
  ``busybox``, ``ssh HOST CMD``, the dynamic loader, ``uv run`` ...), the command lines tools
  carry are read as shell (``tmux new CMD``, ``nix-shell --run CMD``, ``parallel ::: CMD``;
  ``sh -c CMD`` among an unknown program's arguments, as a guess that asks at most), and
  the program is reduced to its base name
  (``/proc/self/root/usr/bin/rm`` -> ``rm``; bashlex has already removed quotes and ``\\``);
- anything decided only at run time is reported as a hazard, never guessed: a command name
  with ``$``, backticks, globs or braces, ``eval``, interpreters fed code, input the parser
  cannot read. The policy maps hazards to ask or deny, never to allow.

The result depends only on the string, so it is cached.
"""

from __future__ import annotations

import functools

from runtime.policy._shell_code import CodeMixin
from runtime.policy._shell_model import (
    CACHED_COMMAND_CHARS,
    Analysis,
    Hazard,
    HazardKind,
    SimpleCommand,
)
from runtime.policy._shell_parse import ParseMixin
from runtime.policy._shell_words import WordsMixin
from runtime.policy._shell_wrappers import WrappersMixin
from runtime.policy.argv import Word

__all__ = [
    "Analysis",
    "Hazard",
    "HazardKind",
    "SimpleCommand",
    "Word",
    "analyse",
]


class _Walker(ParseMixin, WordsMixin, WrappersMixin, CodeMixin):
    """The whole walker: parsing, words, wrapper see-through, code given as data
    (``runtime.policy._shell_*``)."""


def analyse(command: str) -> Analysis:
    """Every simple command ``command`` would run, and every hazard found. Cached for
    commands up to :data:`CACHED_COMMAND_CHARS`."""
    if len(command) <= CACHED_COMMAND_CHARS:
        return _analyse_cached(command)
    return _analyse(command)


def _analyse(command: str) -> Analysis:
    walker = _Walker()
    walker.parse(command, 0)
    walker.finish()
    return Analysis(tuple(walker.commands), tuple(walker.hazards))


_analyse_cached = functools.lru_cache(maxsize=2048)(_analyse)
