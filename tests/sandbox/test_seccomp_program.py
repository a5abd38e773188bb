"""The call sandbox's seccomp programs, as the broker compiles them (a binary tree of syscall
numbers where libseccomp offers one): the same verdicts as the allowlist says, checked in a
forked child that loads them."""

from __future__ import annotations

import errno
import os
import socket

import pytest

from runtime.backends.sandbox import _linux, seccomp

pytestmark = pytest.mark.sandbox

_PTRACE = 101  # x86_64 syscall numbers
_UNSHARE = 272


def _raw(nr: int, *args: int) -> None:
    res = _linux.syscall(nr, *args)
    if res < 0:
        raise OSError(-res, os.strerror(-res))


def _verdicts(program: bytes) -> list[int]:
    """Errnos (0 = allowed) for a fixed list of probes, run in a child under ``program``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(r)
            _linux.prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
            _linux.seccomp_load_bpf(program)
            out: list[int] = []
            for probe in (
                lambda: os.getpid(),
                lambda: _raw(_PTRACE, 0, 0, 0, 0),
                lambda: _raw(_UNSHARE, _linux.CLONE_NEWUSER),
                lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(),
                lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close(),
                lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close(),
            ):
                try:
                    probe()
                    out.append(0)
                except OSError as exc:
                    out.append(exc.errno or -1)
            child = os.fork()  # clone without namespace flags stays allowed
            if child == 0:
                os._exit(7)
            _, status = os.waitpid(child, 0)
            out.append(os.WEXITSTATUS(status))
            os.write(w, ",".join(map(str, out)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        data = os.read(r, 4096).decode()
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return [int(x) for x in data.split(",")]


def test_programs_are_built_once() -> None:
    python, exec_ = seccomp.programs()
    assert seccomp.programs()[0] is python
    assert python != exec_


@pytest.mark.parametrize("which", [0, 1])
def test_the_compiled_programs_keep_the_allowlist_verdicts(which: int) -> None:
    program = seccomp.programs()[which]
    assert _verdicts(program) == [
        0,  # getpid: allowed
        errno.ENOSYS,  # ptrace: not on the list
        errno.ENOSYS,  # unshare: not on the list
        0,  # AF_UNIX socket
        errno.EAFNOSUPPORT,  # AF_INET: no network in the call sandbox
        errno.EAFNOSUPPORT,  # netlink either
        7,  # fork (clone without namespace flags)
    ]
