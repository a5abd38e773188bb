"""The call sandbox's seccomp programs, as the broker compiles them (a binary tree of syscall
numbers where libseccomp offers one): the same verdicts as the allowlist says, checked in a
forked child that loads them."""

from __future__ import annotations

import errno
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.backends.sandbox import _linux, seccomp

pytestmark = pytest.mark.sandbox

_PTRACE = 101  # x86_64 syscall numbers
_UNSHARE = 272


def _raw(nr: int, *args: int) -> None:
    res = _linux.syscall(nr, *args)
    if res < 0:
        raise OSError(-res, os.strerror(-res))


def _under(program: bytes, body: Callable[[], list[int]]) -> list[int]:
    """``body()`` run in a forked child that has loaded ``program``: its list of ints."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            os.close(r)
            _linux.prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
            _linux.seccomp_load_bpf(program)
            os.write(w, ",".join(map(str, body())).encode())
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


def _verdicts(program: bytes) -> list[int]:
    """Errnos (0 = allowed) for a fixed list of probes, run in a child under ``program``."""

    def body() -> list[int]:
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
        return out

    return _under(program, body)


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


_MKNOD = 133  # x86_64: the old mknod(path, mode, dev), which mkfifo does not use


def _mknod_verdicts(program: bytes, where: str) -> list[int]:
    """Errnos (0 = made) of mknod and mknodat of each file type, run under ``program``."""

    def body() -> list[int]:
        out: list[int] = []
        for i, (mode, dev) in enumerate(_NODES):
            out.append(_errno(os.mknod, f"{where}/at{i}", mode, dev))  # glibc: mknodat
            path = f"{where}/old{i}".encode()
            out.append(-min(0, _linux.syscall(_MKNOD, path, mode, dev)))
        return out

    return _under(program, body)


def _errno(probe: Callable[..., object], *args: object) -> int:
    try:
        probe(*args)
    except OSError as exc:
        return exc.errno or -1
    return 0


#: (mode, dev) of each node the probe makes: a FIFO, a set-id FIFO, a character and a block
#: device, a regular file (type 0 means one), a socket.
_NODES = (
    (stat.S_IFIFO | 0o600, 0),
    (stat.S_IFIFO | stat.S_ISUID | 0o600, 0),
    (stat.S_IFIFO | stat.S_ISGID | 0o600, 0),
    (stat.S_IFCHR | 0o600, os.makedev(1, 3)),
    (stat.S_IFBLK | 0o600, os.makedev(7, 0)),
    (0o600, 0),
    (stat.S_IFSOCK | 0o600, 0),
)


def test_exec_programs_may_make_fifos_and_no_other_node(tmp_path: Path) -> None:
    """mkfifo (and valgrind's vgdb FIFOs) failed with "Function not implemented": exec'd
    programs may call mknod/mknodat for a FIFO without a set-id bit. A set-id bit is EPERM
    as with every mode-setting call; any other file type stays off the list (ENOSYS)."""
    got = _mknod_verdicts(seccomp.programs()[1], str(tmp_path))
    assert got == [
        0, 0,  # a FIFO
        errno.EPERM, errno.EPERM,  # set-user-ID FIFO
        errno.EPERM, errno.EPERM,  # set-group-ID FIFO
        errno.ENOSYS, errno.ENOSYS,  # character device
        errno.ENOSYS, errno.ENOSYS,  # block device
        errno.ENOSYS, errno.ENOSYS,  # regular file
        errno.ENOSYS, errno.ENOSYS,  # socket
    ]  # fmt: skip
    assert stat.S_ISFIFO(os.stat(tmp_path / "at0").st_mode)
    assert stat.S_ISFIFO(os.stat(tmp_path / "old0").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["at0", "old0"]


def test_the_python_tool_makes_no_node(tmp_path: Path) -> None:
    assert set(_mknod_verdicts(seccomp.programs()[0], str(tmp_path))) == {errno.ENOSYS}
