"""``cloner.c``: the cloner's loop in C (receive a request, clone, answer with the pid).

Run in a forked stand-in for the cloner (``_serve``), which reports every return of the
loop on a pipe; a clone it makes reports there too (the loop returns 2 in it) and exits.
Requests are ``zygote._REQUEST`` + any bytes; answers ``zygote._ANSWER``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import child, masks, pid1, zygote
from runtime.backends.sandbox.backend import DISABLE_NAMES
from runtime.frames import FrameDecoder, encode_frame
from tests.sandbox.helpers import bare_config

pytestmark = pytest.mark.sandbox

_CLONE_SIGHAND = 0x800  # without CLONE_VM: the kernel refuses the clone (EINVAL)


@pytest.fixture
def loop() -> Iterator[tuple[socket.socket, int]]:
    """(the zygote's end of the socket, the read end of the report pipe)."""
    serve = pid1.load_cloner(str(pid1.build()))
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the stand-in cloner
        try:
            ours.close()
            os.close(r)
            _serve(serve, theirs.fileno(), w)
        finally:
            os._exit(0)
    theirs.close()
    os.close(w)
    try:
        yield ours, r
    finally:
        ours.close()
        os.waitpid(pid, 0)
        os.close(r)


def _serve(serve: pid1.ClonerServe, sock: int, report: int) -> None:  # pragma: no cover
    buf = ctypes.create_string_buffer(4096)
    fds = (ctypes.c_int * 16)()
    got = (ctypes.c_long * 2)()
    while True:
        res = serve(sock, buf, 4096, fds, got)
        os.write(report, f"{res} {got[0]} {got[1]} {os.getpid()}\n".encode())
        if res != 1:
            return  # EOF, an error, or this is a new child (2)
        # Python's turn: hand it back with got unchanged, the loop clones it at once.
        if ctypes.string_at(buf, got[0]).endswith(b"drop"):
            for fd in fds[: got[1]]:
                os.close(fd)
            got[0] = got[1] = 0


def _request(seq: int, *, python: int = 0, flags: int = 0, tail: bytes = b"") -> bytes:
    return zygote._REQUEST.pack(seq, python, flags, -1, -1) + tail


def _answer(sock: socket.socket) -> tuple[int, int]:
    seq, pid = zygote._ANSWER.unpack(sock.recv(64))
    return seq, pid


def _reports(r: int, count: int) -> list[list[int]]:
    lines: list[str] = []
    data = b""
    while len(lines) < count:
        chunk = os.read(r, 4096)
        assert chunk, f"the loop reported {lines!r} only"
        data += chunk
        lines = data.decode().splitlines()
    return [[int(x) for x in line.split()] for line in lines]


def test_a_request_is_cloned_and_answered_with_the_pid(loop: tuple[socket.socket, int]) -> None:
    sock, r = loop
    request = _request(7, tail=b"frame")
    socket.send_fds(sock, [request], [0])
    seq, pid = _answer(sock)
    assert seq == 7 and pid > 0
    (child,) = _reports(r, 1)
    # In the clone the loop returned 2 with the request and its descriptor.
    assert child == [2, len(request), 1, pid]


def test_a_request_marked_for_python_returns_to_it_then_clones(
    loop: tuple[socket.socket, int],
) -> None:
    sock, r = loop
    request = _request(3, python=1)
    socket.send_fds(sock, [request], [0])
    seq, pid = _answer(sock)
    assert seq == 3 and pid > 0
    first, child = sorted(_reports(r, 2))
    assert first[:3] == [1, len(request), 1]
    assert child == [2, len(request), 1, pid]


def test_a_failed_clone_is_answered_with_its_errno(loop: tuple[socket.socket, int]) -> None:
    sock, _r = loop
    socket.send_fds(sock, [_request(5, flags=_CLONE_SIGHAND)], [0])
    assert _answer(sock) == (5, -errno.EINVAL)


def test_a_short_request_or_one_without_a_socket_is_refused(
    loop: tuple[socket.socket, int],
) -> None:
    sock, _r = loop
    socket.send_fds(sock, [b"\x09\x00\x00\x00"], [0])  # a seq, no header
    assert _answer(sock) == (9, -errno.EMSGSIZE)
    sock.send(_request(10))  # no descriptor
    assert _answer(sock) == (10, -errno.EMSGSIZE)
    # The loop goes on serving.
    socket.send_fds(sock, [_request(11, python=1, tail=b"drop")], [0])
    socket.send_fds(sock, [_request(12)], [0])
    seq, pid = _answer(sock)
    assert seq == 12 and pid > 0


def test_eof_ends_the_loop(loop: tuple[socket.socket, int]) -> None:
    sock, r = loop
    sock.shutdown(socket.SHUT_WR)
    (report,) = _reports(r, 1)
    assert report[:3] == [0, 0, 0]


# -- the whole cloner, both loops: a bare zygote with every namespace off (test-only) -----


def _echo(arguments: dict[str, Any], _ctx: Any) -> dict[str, Any]:
    return {"echo": arguments, "pid": os.getpid()}


_PLAN = {
    "call_id": "t1",
    "workspace": None,
    "access": "none",
    "exec": False,
    "limits": {},
    "env": {},
    "masks": {},
}


@pytest.fixture(params=["c", "python"])
def bare(request: pytest.FixtureRequest) -> Iterator[tuple[zygote.Zygote, zygote._Cloner]]:
    ctl, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    z = zygote.Zygote(ctl)
    z.cfg = bare_config(disable=DISABLE_NAMES)
    z.tools = {"echo": _echo}
    if request.param == "c":
        z.cloner_serve = pid1.load_cloner(str(pid1.build()))
    cloner = zygote._Cloner.start(z)
    try:
        yield z, cloner
    finally:
        cloner.close()
        ctl.close()
        other.close()


def _ask(z: zygote.Zygote, cloner: zygote._Cloner, tool: str, fd: int) -> dict[str, Any]:
    plan = child.CallPlan(**_PLAN)
    cloner.ask(z, _PLAN, plan, tool=tool, fd=fd, groups=[], profile="p")
    answer = cloner.answer()
    assert answer is not None
    return answer


def test_the_cloner_clones_a_call_that_runs_its_tool(
    bare: tuple[zygote.Zygote, zygote._Cloner],
) -> None:
    z, cloner = bare
    for _ in range(2):  # the first request goes through Python (a new profile), then not
        ours, theirs = socket.socketpair()
        try:
            answer = _ask(z, cloner, "echo", theirs.fileno())
            theirs.close()
            pid = answer["pid"]
            ours.sendall(encode_frame({"arguments": {"x": 1}}))
            decoder = FrameDecoder(max_size=1 << 20)
            frames: list[dict[str, Any]] = []
            while not frames:
                data = ours.recv(1 << 16)
                assert data
                frames = decoder.feed(data)
            assert frames[0] == {"type": "result", "value": {"echo": {"x": 1}, "pid": pid}}
            # CLONE_PARENT: the call is this process's child, as calls are the zygote's.
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        finally:
            ours.close()
            theirs.close()


def test_a_tool_the_cloner_cannot_load_is_a_failed_clone_with_the_reason(
    bare: tuple[zygote.Zygote, zygote._Cloner],
) -> None:
    z, cloner = bare
    z.tools["broken"] = _echo
    z.entries["broken"] = ("no_such_module_here:run", "/nonexistent", False)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        answer = _ask(z, cloner, "broken", theirs.fileno())
    assert "pid" not in answer
    assert "no_such_module_here" in answer["error"]


def test_the_cloner_runs_python_for_new_profiles_tools_and_a_changed_masked_tree(
    workspace: Path, later: None
) -> None:
    # ``later``: every directory made here is past the racy window, so its listing is kept.
    tmp_path = workspace
    ctl, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    z = zygote.Zygote(ctl)
    z.cfg = bare_config(disable=DISABLE_NAMES)
    cloner = zygote._Cloner(0, ours)
    (tmp_path / "sub").mkdir()
    masked = {**_PLAN, "workspace": str(tmp_path), "masks": {"hide": ["*.key"]}}
    spec = masks.MaskSpec.from_plan(masked["masks"])

    def python_flags(raw: dict[str, Any], profile: str, count: int) -> list[int]:
        flags = []
        for _ in range(count):
            plan = child.CallPlan(**raw)
            if plan.masks:  # the zygote's own look at the tree, as in ``spawn``
                with masks.signature(plan.workspace, spec):
                    pass
            cloner.ask(z, raw, plan, tool=None, fd=0, groups=[], profile=profile)
            data, fds, _f, _a = socket.recv_fds(theirs, 1 << 16, 4)
            for fd in fds:
                os.close(fd)
            flags.append(zygote._REQUEST.unpack_from(data)[1])
        return flags

    try:
        assert python_flags(_PLAN, "plain", 3) == [1, 0, 0]
        assert python_flags(masked, "masked", 3) == [1, 0, 0]
        # The tree changed: the zygote's walk lists a directory anew, the cloner refreshes.
        (tmp_path / "sub" / "new.txt").write_text("x")
        assert python_flags(masked, "masked", 2) == [1, 0]
        z.tools["new"] = _echo  # a tool the cloner has not loaded: Python loads it first
        z.entries["new"] = ("mod:run", "/base")
        assert python_flags(_PLAN, "plain", 2) == [1, 0]
    finally:
        for s in (ctl, other, ours, theirs):
            s.close()
