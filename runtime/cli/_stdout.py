"""Standard output of the CLI when its reader goes away (``runtime audit export | head -1``).

A reader that stops early is ordinary Unix use, not an error: the command ends quietly with
the status of a process stopped by SIGPIPE (:data:`EX_SIGPIPE`, what ``cat`` gives under
``set -o pipefail``). Python ignores SIGPIPE, so a write raises BrokenPipeError instead, and
typer turns that into exit 1 — for ``runtime exec``, "the tool ran and failed". While a
command runs, :func:`guarded` makes writes to ``sys.stdout`` raise :class:`StdoutClosed`
(not an OSError, so typer lets it through) for :func:`runtime.cli.main` to end with.

Hazard: dying by the signal itself would skip the interpreter's clean-up; nothing is lost
that way today (``exec`` prints only after its broker closed the audit log), but a normal
exit keeps it so.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from typing import Any, TextIO, cast

__all__ = ["EX_SIGPIPE", "StdoutClosed", "discard", "guarded"]

#: The shell's status of a process stopped by SIGPIPE.
EX_SIGPIPE = 128 + signal.SIGPIPE


class StdoutClosed(Exception):
    """Standard output's reader went away (EPIPE) while a command wrote to it."""


class _Guarded:
    """``sys.stdout`` while a command runs; everything but writing is the stream's own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError as exc:
            raise StdoutClosed from exc

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError as exc:
            raise StdoutClosed from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guarded(stream: TextIO) -> TextIO:
    return cast(TextIO, _Guarded(stream))


def discard(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null: what it still buffers goes nowhere at
    exit, instead of failing again in the interpreter's last flush ("Exception ignored …
    BrokenPipeError", exit 120)."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError):  # not a real file (a test's buffer): nothing to flush
        return
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
