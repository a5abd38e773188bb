"""Set-up primitives shared by the child's phases: named phases, small file and mount helpers."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from runtime.backends.sandbox import _linux

__all__ = ["Phase", "SetupFailed", "bind", "exit_code", "forward", "touch", "write"]


class SetupFailed(Exception):
    """A set-up step failed: which phase, with the kernel's errno."""

    def __init__(self, phase: str, exc: OSError) -> None:
        super().__init__(phase)
        self.phase = phase
        self.errno = exc.errno or 0
        self.message = str(exc)


class Phase:
    """``with Phase("name"):`` turns an OSError in the block into a named set-up failure."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: object, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, OSError):
            raise SetupFailed(self.name, exc) from exc


def write(path: str, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def bind(src: str, dst: str, attrs: int) -> None:
    """Bind ``src`` at ``dst`` with mount attributes (read-only, nosuid...) set before attach."""
    fd = _linux.open_tree(src, _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC)
    try:
        if attrs:
            _linux.mount_setattr(fd, attrs)
        _linux.move_mount(fd, dst)
    finally:
        os.close(fd)


def touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))


def exit_code(status: int) -> int:
    """A wait status as data: the exit code, or ``128 + n`` for death by signal ``n``."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 127


def forward(pid: int, sig: int) -> Callable[[int, Any], None]:
    """A signal handler passing ``sig`` on to ``pid``.

    Hazard: Python runs a handler after the syscall it interrupted, so a kill can be handled
    just after ``waitpid`` reaped the target (or, in pid 1, when no process is left): ESRCH
    then. Raised, it would unwind out of the set-up code into whatever called it (in a forked
    zygote copy, the zygote's own loop, which holds its table of other calls).
    """

    def handler(_signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)

    return handler
