"""The broker's two kinds of socket to the sandbox, each a small handle class.

:class:`ControlChannel` is the zygote's SOCK_SEQPACKET control socket (one frame a packet,
call sockets passed with SCM_RIGHTS); :class:`CallChannel` is the broker's end of one call's
socketpair, read with the frame size capped while reading. Both are non-blocking and awaited
with anyio; both map OS errors to :mod:`runtime.errors` or to ``FrameError`` at this boundary.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio

from runtime.errors import SandboxError
from runtime.frames import HEADER, FrameDecoder, FrameError, decode_body, encode_frame

__all__ = ["CallChannel", "ControlChannel"]

_READ_CHUNK = 65536


def _lock() -> anyio.Lock:
    """A lock that, uncontended, does not yield to the event loop on acquire (anyio >= 4.5):
    every sandboxed call takes both of the control channel's once, and each yield is a
    full loop iteration of the broker's CPU. (The awaits around it are checkpoints.)"""
    try:
        return anyio.Lock(fast_acquire=True)
    except TypeError:  # anyio < 4.5
        return anyio.Lock()


class ControlChannel:
    """The broker's end of the zygote's SOCK_SEQPACKET control socket (one frame a packet).

    Hazard: ``anyio.wait_readable`` allows one waiter per socket, so receiving is done by
    whichever caller holds ``read_lock`` and it files every message for its addressee.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.read_lock = _lock()
        self.send_lock = _lock()
        self.inbox: dict[int, dict[str, Any]] = {}
        self.closed = False

    async def send(self, message: dict[str, Any], fd: int | None = None) -> None:
        data = encode_frame(message)
        async with self.send_lock:
            while True:
                try:
                    if fd is None:
                        self.sock.send(data)
                    else:
                        socket.send_fds(self.sock, [data], [fd])
                    return
                except BlockingIOError:
                    await anyio.wait_writable(self.sock)
                except OSError as exc:
                    self.closed = True
                    raise SandboxError("the sandbox fork-server is gone") from exc

    async def receive(self) -> dict[str, Any]:
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            except OSError as exc:
                self.closed = True
                raise SandboxError("the sandbox fork-server is gone") from exc
            if not data:
                self.closed = True
                raise SandboxError("the sandbox fork-server exited")
            try:
                (size,) = HEADER.unpack_from(data)
                return decode_body(data[HEADER.size : HEADER.size + size])
            except (FrameError, ValueError) as exc:
                raise SandboxError("the fork-server sent a malformed message") from exc

    async def wait_for(self, call_id: int) -> dict[str, Any]:
        while call_id not in self.inbox:
            async with self.read_lock:
                if call_id in self.inbox:
                    break
                msg = await self.receive()
                if isinstance(msg.get("id"), int):
                    self.inbox[msg["id"]] = msg
        return self.inbox.pop(call_id)

    def close(self) -> None:
        self.closed = True
        self.sock.close()


class CallChannel:
    """The broker's end of one call's socketpair. fd is -1 after close."""

    def __init__(self, sock: socket.socket, max_frame: int) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.decoder = FrameDecoder(max_size=max_frame)
        self.eof = False

    async def send(self, message: dict[str, Any]) -> bool:
        """Send a frame; False if the child is gone (it may have failed set-up)."""
        view = memoryview(encode_frame(message, max_size=1 << 31))
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
            except OSError:
                return False
        return True

    async def receive(self) -> dict[str, Any] | None:
        """One frame, or None at a clean EOF. FrameError for garbage, truncation, size."""
        pending: list[dict[str, Any]] = []
        while not pending:
            if self.eof:
                return None
            try:
                data = self.sock.recv(_READ_CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.sock)
                continue
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self.decoder.eof()
                return None
            pending = self.decoder.feed(data)
        if len(pending) > 1:
            raise FrameError("the child sent frames after its result")
        return pending[0]

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.sock.close()
