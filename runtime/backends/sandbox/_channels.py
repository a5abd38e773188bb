"""The broker's two kinds of socket to the sandbox, each a small handle class.

:class:`ControlChannel` is the zygote's SOCK_SEQPACKET control socket (one frame a packet,
call sockets passed with SCM_RIGHTS); :class:`CallChannel` is the broker's end of one call's
socketpair, read with the frame size capped while reading. Both are non-blocking and both are
used two ways: awaited with anyio on the event loop (``SandboxBackend.run``), and blocking in
the calling thread with ``poll(2)`` and a deadline (``SandboxBackend.run_sync``, the
``SyncBroker`` fast path: a thread woken by ``poll`` costs a tenth of the CPU of an event-loop
task woken by the same readiness, measured ~50 vs ~300 µs per wake-up here). Both map OS
errors to :mod:`runtime.errors` or to ``FrameError`` at this boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import mmap
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio

from runtime.errors import ResourceLimitExceeded, SandboxError
from runtime.frames import HEADER, FrameDecoder, FrameError, decode_body, encode_frame

__all__ = [
    "CallChannel",
    "ControlChannel",
    "DeadlinePassed",
    "Oversized",
    "Unsendable",
    "loop_waker",
    "wait_fd",
]

_READ_CHUNK = 65536
_CONTROL_PACKET = 1 << 20


class Unsendable(SandboxError):
    """A control message that cannot be encoded (text that is not UTF-8, a value msgpack
    does not know): nothing of it was sent."""


def _encoded(message: dict[str, Any]) -> bytes:
    try:
        return encode_frame(message)
    except (TypeError, ValueError, OverflowError) as exc:  # UnicodeEncodeError included
        raise Unsendable(
            f"a message to the sandbox fork-server could not be encoded: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


class Oversized(ResourceLimitExceeded):
    """A control message larger than the control socket takes in one packet (EMSGSIZE:
    SOCK_SEQPACKET sends a packet whole or not at all, bounded by the socket's send buffer,
    ``net.core.wmem_default``; ENOBUFS likewise): nothing of it was sent, and the fork-server
    is as alive as before. A refusal of this one message, never a closed channel."""

    def __init__(self, size: int, exc: OSError) -> None:
        super().__init__(
            f"a message of {size} bytes is more than the sandbox fork-server's control socket "
            f"takes in one packet ({exc.strerror or exc})",
            size=size,
        )
        self.size = size


#: Send errors that refuse one packet and say nothing of the peer.
_TOO_BIG = frozenset({errno.EMSGSIZE, errno.ENOBUFS})


class DeadlinePassed(Exception):
    """A blocking wait of the sync path reached its deadline (``time.monotonic`` seconds)."""


def wait_fd(fd: int, events: int, deadline: float) -> bool:
    """Block this thread until ``fd`` is ready for ``events`` (``select.POLLIN``…) or the
    deadline passes; True if ready (after the deadline: if ready now). A hang-up or error
    counts as ready: the next ``recv``/``send`` then reports it."""
    left = deadline - time.monotonic()
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(max(0, math.ceil(left * 1000))))


def loop_waker(token: Any) -> Callable[[Callable[[], object]], object]:
    """For an ``anyio.lowlevel.EventLoopToken``: a function that any thread may call to run
    a callback on that event loop soon, *without waiting for it* (anyio's own
    ``from_thread.run_sync`` blocks until the loop ran it: a reader thread must not wait for
    the loop to wake a task). The one place that touches the native loops (asyncio's
    ``call_soon_threadsafe``, trio's ``TrioToken.run_sync_soon``)."""
    native = token.native_token
    if isinstance(native, asyncio.AbstractEventLoop):
        return native.call_soon_threadsafe
    run_sync_soon = getattr(native, "run_sync_soon", None)
    if run_sync_soon is None:
        raise TypeError(f"no thread-safe wake-up for event loop token {native!r}")
    return run_sync_soon  # type: ignore[no-any-return]


def _lock() -> anyio.Lock:
    """A lock that, uncontended, does not yield to the event loop on acquire (anyio >= 4.5):
    every sandboxed call takes both of the control channel's once, and each yield is a
    full loop iteration of the broker's CPU. (The awaits around it are checkpoints.)"""
    try:
        return anyio.Lock(fast_acquire=True)
    except TypeError:  # anyio < 4.5
        return anyio.Lock()


class _Mailbox:
    """Exit reports filed by call id, and who reads the control socket now.

    Several callers wait for their own report on one socket, in two worlds: tasks on the
    event loop and threads of the sync path. Exactly one of them reads at a time (the
    leader; the others follow): the leader files every report it reads and wakes its
    addressee; when it has its own, it hands the reading over by waking one follower, who
    either finds its report or leads. ``wake`` callables never block (a thread's lock
    release, or a callback scheduled on the loop); they are called outside the mutex.
    """

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.inbox: dict[int, dict[str, Any]] = {}
        self.reading = False
        self.following: dict[int, Callable[[], object]] = {}

    def take_or_lead(
        self, call_id: int, wake: Callable[[], object] | None
    ) -> tuple[dict[str, Any] | None, bool]:
        """(report, False) if filed; (None, True) if the caller now leads; (None, False)
        after registering ``wake`` to follow (with ``wake`` None the caller does not follow:
        it may only lead or come back later)."""
        with self.mutex:
            report = self.inbox.pop(call_id, None)
            if report is not None:
                return report, False
            if not self.reading:
                self.reading = True
                return None, True
            if wake is not None:
                self.following[call_id] = wake
            return None, False

    def file(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if not isinstance(ident, int):
            return  # not a report (the zygote's ready message): nobody waits for it
        with self.mutex:
            self.inbox[ident] = message
            wake = self.following.pop(ident, None)
        if wake is not None:
            wake()

    def has(self, call_id: int) -> bool:
        with self.mutex:
            return call_id in self.inbox

    def stop_leading(self) -> None:
        """The leader is done (its report filed, or it gave up): wake one follower to read."""
        with self.mutex:
            self.reading = False
            wake = self.following.pop(next(iter(self.following)), None) if self.following else None
        if wake is not None:
            wake()

    def unfollow(self, call_id: int, wake: Callable[[], object]) -> None:
        """A follower leaves (cancelled, deadline). If it had been woken to lead, that turn
        passes on (in one step under the mutex: a new leader may have started since), so
        that the others are not left without a reader."""
        with self.mutex:
            if self.following.get(call_id) is wake:
                del self.following[call_id]
                return
            if self.reading or not self.following:
                return
            wake = self.following.pop(next(iter(self.following)))
        wake()

    def take(self, call_id: int) -> dict[str, Any] | None:
        with self.mutex:
            return self.inbox.pop(call_id, None)


class ControlChannel:
    """The broker's end of the zygote's SOCK_SEQPACKET control socket (one frame a packet).

    Hazards: ``anyio.wait_readable`` allows one waiter per socket, so on the event loop only
    the holder of ``read_lock`` takes part in the reading (see :class:`_Mailbox`); and a
    thread or a task may be waiting on the socket when the backend closes it, so
    :meth:`close` shuts the socket down (waking every waiter) and closes the descriptor only
    when nobody uses it any more (a closed number can be reused by the next socket; and a
    descriptor closed under a task's ``wait_readable`` leaves the event loop's epoll set
    without a word, so that task was never woken: a cancelled call's teardown waited its
    full 30 s for a report while the broker closed, and its completion came after the
    audit log had closed).
    """

    def __init__(
        self, sock: socket.socket, waker: Callable[[Callable[[], object]], object] | None = None
    ) -> None:
        """``waker``: :func:`loop_waker` of the event loop that awaits this channel, needed
        only when threads wait on it too (without one, a task is woken on its own loop)."""
        self.sock = sock
        self.sock.setblocking(False)
        self.read_lock = _lock()
        self.send_lock = _lock()
        self.mail = _Mailbox()
        self.closed = False
        self._users = 0
        self._waker = waker
        # Reports land here: ``recv`` of a 1 MiB packet bound allocates (mmaps) 1 MiB and
        # shrinks it for every ~200-byte report. One reader at a time in practice (the
        # mailbox's leader), the lock makes it a rule.
        self._packet = memoryview(mmap.mmap(-1, _CONTROL_PACKET))  # touched as filled
        self._packet_lock = threading.Lock()

    # -- the event loop -------------------------------------------------------------------

    async def send(self, message: dict[str, Any], fd: int | None = None) -> None:
        data = _encoded(message)
        async with self.send_lock:
            self._enter()
            try:
                while True:
                    try:
                        self._send_once(data, fd)
                        return
                    except BlockingIOError:
                        await anyio.wait_writable(self.sock)
            finally:
                self._leave()

    async def receive(self) -> dict[str, Any]:
        self._enter()
        try:
            while True:
                try:
                    return self._receive_once()
                except BlockingIOError:
                    await anyio.wait_readable(self.sock)
        finally:
            self._leave()

    async def wait_for(self, call_id: int) -> dict[str, Any]:
        self._enter()
        try:
            return await self._wait_for(call_id)
        finally:
            self._leave()

    async def _wait_for(self, call_id: int) -> dict[str, Any]:
        while True:
            report = self.mail.take(call_id)
            if report is not None:
                return report
            async with self.read_lock:
                event = anyio.Event()
                wake = self._async_wake(event)
                report, lead = self.mail.take_or_lead(call_id, wake)
                if report is not None:
                    return report
                if lead:
                    try:
                        while not self.mail.has(call_id):
                            if self.closed:  # its descriptor may be gone: nothing to wait on
                                raise SandboxError("the sandbox fork-server is gone")
                            # Waits first, as wait_for_sync does.
                            await anyio.wait_readable(self.sock)
                            with contextlib.suppress(BlockingIOError):
                                self.mail.file(self._receive_once())
                    finally:
                        self.mail.stop_leading()
                else:
                    try:
                        await event.wait()
                    finally:
                        self.mail.unfollow(call_id, wake)

    def _async_wake(self, event: anyio.Event) -> Callable[[], object]:
        loop_thread, waker = threading.get_ident(), self._waker

        def wake() -> None:
            if threading.get_ident() == loop_thread or waker is None:
                event.set()
                return
            # The loop may have ended (the broker closed): nobody is left to wake.
            with contextlib.suppress(Exception):
                waker(event.set)

        return wake

    # -- a blocking thread ----------------------------------------------------------------

    def send_sync(self, message: dict[str, Any], fd: int | None, deadline: float) -> None:
        """Send from this thread. SOCK_SEQPACKET sends whole packets, so threads and the
        loop need no lock between them. DeadlinePassed if the zygote never takes it;
        Unsendable (before anything is sent) if it cannot be encoded."""
        data = _encoded(message)
        self._enter()
        try:
            while True:
                try:
                    self._send_once(data, fd)
                    return
                except BlockingIOError:
                    if not wait_fd(self.sock.fileno(), select.POLLOUT, deadline):
                        raise DeadlinePassed("the sandbox fork-server takes no message") from None
        finally:
            self._leave()

    def wait_for_sync(self, call_id: int, deadline: float) -> dict[str, Any]:
        """This call's exit report, reading in this thread when nobody else does."""
        self._enter()
        try:
            while True:
                gate = threading.Lock()
                gate.acquire()
                report, lead = self.mail.take_or_lead(call_id, gate.release)
                if report is not None:
                    return report
                if lead:
                    try:
                        # Waits first: a report is never there yet when a call asks for it
                        # (a recv that fails costs more than the poll it saves).
                        while not self.mail.has(call_id):
                            if not wait_fd(self.sock.fileno(), select.POLLIN, deadline):
                                raise DeadlinePassed("no exit report in time")
                            with contextlib.suppress(BlockingIOError):
                                self.mail.file(self._receive_once())
                    finally:
                        self.mail.stop_leading()
                    continue
                left = deadline - time.monotonic()
                woken = left > 0 and gate.acquire(timeout=left)
                if not woken:
                    self.mail.unfollow(call_id, gate.release)
                    raise DeadlinePassed("no exit report in time")
        finally:
            self._leave()

    def _enter(self) -> None:
        """A thread or task starts using the socket (see :meth:`close`)."""
        with self.mail.mutex:
            if self.closed:
                raise SandboxError("the sandbox fork-server is gone")
            self._users += 1

    def _leave(self) -> None:
        with self.mail.mutex:
            self._users -= 1
            last = self.closed and self._users == 0
        if last:
            self.sock.close()

    # -- both -----------------------------------------------------------------------------

    def _send_once(self, data: bytes, fd: int | None) -> None:
        try:
            if fd is None:
                self.sock.send(data)
            else:
                socket.send_fds(self.sock, [data], [fd])
        except BlockingIOError:
            raise
        except OSError as exc:
            if exc.errno in _TOO_BIG:
                # This packet only: the socket and the zygote are fine (closing the channel
                # here left every later call of the broker failing, the zygote orphaned).
                raise Oversized(len(data), exc) from exc
            self.closed = True
            raise SandboxError("the sandbox fork-server is gone") from exc

    def _receive_once(self) -> dict[str, Any]:
        with self._packet_lock:
            try:
                size = self.sock.recv_into(self._packet)
            except BlockingIOError:
                raise
            except OSError as exc:
                self.closed = True
                raise SandboxError("the sandbox fork-server is gone") from exc
            if not size:
                self.closed = True
                raise SandboxError("the sandbox fork-server exited")
            try:
                (length,) = HEADER.unpack_from(self._packet)
                if HEADER.size + length > size:
                    raise FrameError("a control packet shorter than its header says")
                return decode_body(self._packet[HEADER.size : HEADER.size + length])
            except (FrameError, ValueError) as exc:
                raise SandboxError("the fork-server sent a malformed message") from exc

    def close(self) -> None:
        """EOF to the zygote (it then SIGKILLs every call and exits) and to every waiter."""
        with self.mail.mutex:
            self.closed = True
            busy = self._users > 0
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        if not busy:
            self.sock.close()


class CallChannel:
    """The broker's end of one call's socketpair. fd is -1 after close."""

    def __init__(self, sock: socket.socket, max_frame: int) -> None:
        self.sock = sock
        self.sock.setblocking(False)
        self.decoder = FrameDecoder(max_size=max_frame)
        self.eof = False
        self._unsent = memoryview(b"")

    def begin(self, message: dict[str, Any]) -> None:
        """Write the call's first frame now, as far as the socket buffer takes it, before
        the zygote hears of the call; :meth:`flush` or :meth:`flush_sync` sends the rest.
        Why: the spawn message wakes the zygote, which often takes this thread's CPU
        until it has activated the spare (~0.8 ms measured on 2 cores); the spare then
        finds its call frame waiting instead of waiting for this thread to come back."""
        view = memoryview(encode_frame(message, max_size=1 << 31))
        try:
            view = view[self.sock.send(view) :]
        except BlockingIOError:
            pass
        except OSError:
            view = view[len(view) :]  # the child's end is gone: as send's False
        self._unsent = view

    async def flush(self) -> bool:
        """The rest of :meth:`begin`'s frame; False if the child is gone."""
        view, self._unsent = self._unsent, memoryview(b"")
        return await self._drain(view)

    def flush_sync(self, deadline: float) -> bool:
        """:meth:`flush`, blocking this thread; DeadlinePassed if the child never reads."""
        view, self._unsent = self._unsent, memoryview(b"")
        return self._drain_sync(view, deadline)

    async def send(self, message: dict[str, Any]) -> bool:
        """Send a frame; False if the child is gone (it may have failed set-up)."""
        return await self._drain(memoryview(encode_frame(message, max_size=1 << 31)))

    def send_sync(self, message: dict[str, Any], deadline: float) -> bool:
        """:meth:`send`, blocking this thread; DeadlinePassed if the child never reads."""
        return self._drain_sync(memoryview(encode_frame(message, max_size=1 << 31)), deadline)

    async def _drain(self, view: memoryview) -> bool:
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                await anyio.wait_writable(self.sock)
            except OSError:
                return False
        return True

    def _drain_sync(self, view: memoryview, deadline: float) -> bool:
        while view:
            try:
                view = view[self.sock.send(view) :]
            except BlockingIOError:
                if not wait_fd(self.sock.fileno(), select.POLLOUT, deadline):
                    raise DeadlinePassed("the sandboxed tool takes no input") from None
            except OSError:
                return False
        return True

    async def receive(self) -> dict[str, Any] | None:
        """One frame, or None at a clean EOF. FrameError for garbage, truncation, size.
        Waits first (see :meth:`receive_sync`)."""
        while True:
            if not self.eof:
                await anyio.wait_readable(self.sock)
            with contextlib.suppress(BlockingIOError):
                return self._receive_once()

    def receive_sync(self, deadline: float) -> dict[str, Any] | None:
        """:meth:`receive`, blocking this thread; DeadlinePassed when the deadline passes.
        Waits first: the child has not answered yet when the broker starts listening."""
        while True:
            if not self.eof and not wait_fd(self.sock.fileno(), select.POLLIN, deadline):
                raise DeadlinePassed("no result in time")
            with contextlib.suppress(BlockingIOError):
                return self._receive_once()

    def _receive_once(self) -> dict[str, Any] | None:
        """Read what is there (without waiting) until a frame is complete; BlockingIOError
        when the socket runs dry first."""
        pending: list[dict[str, Any]] = []
        while not pending:
            if self.eof:
                return None
            try:
                data = self.sock.recv(_READ_CHUNK)
            except BlockingIOError:
                raise
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self.decoder.eof()
                return None
            pending = self.decoder.feed(data)
        if len(pending) > 1:
            # The child may send again only once its broker request is answered, and never
            # after its result (or error): it says which it broke.
            kind = pending[0].get("type")
            if kind == "request":
                raise FrameError("the child sent another frame before its request was answered")
            if kind in ("result", "error", "setup_error"):
                raise FrameError(f"the child sent frames after its {kind} frame, its last")
            raise FrameError(f"unexpected frame type {kind!r:.64} from the child")
        return pending[0]

    def received(self) -> dict[str, Any] | None:
        """A frame the socket holds complete already, read without waiting; None when there
        is none (nothing, part of one, EOF) or what is there is not a valid frame."""
        try:
            return self._receive_once()
        except (BlockingIOError, FrameError):
            return None

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self.sock.close()
