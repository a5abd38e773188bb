"""The spare's gate: it reads its call frame ahead without consuming it, and runs the tool
only on the zygote's word (``child._peek_call``, ``child._await_go``, ``child._discard``)."""

from __future__ import annotations

import os
import socket

import pytest

from runtime.backends.sandbox import child
from runtime.frames import encode_frame

CALL = {"type": "call", "arguments": {"path": "a.txt"}, "broker": False, "options": {}}


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_a_whole_frame_is_decoded_and_left_in_the_socket() -> None:
    ours, theirs = _pair()
    with ours, theirs:
        frame = encode_frame(CALL)
        ours.sendall(frame + b"next")
        peeked = child._peek_call(theirs.fileno(), 1 << 20)
        assert peeked == (CALL, len(frame))
        # Nothing consumed: the call's next child would read the same bytes.
        assert theirs.recv(len(frame) + 16) == frame + b"next"


def test_discard_consumes_exactly_the_frame() -> None:
    ours, theirs = _pair()
    with ours, theirs:
        frame = encode_frame(CALL)
        ours.sendall(frame + b"next")
        _, length = child._peek_call(theirs.fileno(), 1 << 20) or ({}, 0)
        child._discard(theirs.fileno(), length)
        assert theirs.recv(16) == b"next"


@pytest.mark.parametrize("cut", ["partial", "longer_than_read_ahead", "too_large"])
def test_no_early_frame_when_it_is_not_all_there(cut: str) -> None:
    ours, theirs = _pair()
    with ours, theirs:
        ours.setblocking(False)
        if cut == "partial":
            data = encode_frame(CALL)[:-3]
        elif cut == "longer_than_read_ahead":
            data = encode_frame({"type": "call", "arguments": {"x": "y" * (child._PEEK * 2)}})
            data = data[: child._PEEK + 100]
        else:
            data = encode_frame({"type": "call", "arguments": {"x": "y" * 4096}})
        ours.send(data)
        max_size = 1024 if cut == "too_large" else 1 << 20
        assert child._peek_call(theirs.fileno(), max_size) is None
        # Still all there: the real read (after the zygote's word) starts at the beginning.
        assert theirs.recv(len(data) + 16, socket.MSG_PEEK)[:16] == data[:16]


@pytest.mark.parametrize(("word", "goes_on"), [(b"g", True), (b"s", False), (b"", False)])
def test_the_spare_goes_on_only_when_told(word: bytes, goes_on: bool) -> None:
    zygote, spare = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # the spare
        zygote.close()
        child._await_go(spare)
        os._exit(3)  # only past the gate
    spare.close()
    if word:
        zygote.send(word)
    zygote.close()  # EOF when nothing was sent: a zygote gone is no "go"
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == (3 if goes_on else 0)
