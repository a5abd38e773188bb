"""One concurrency limiter for both broker paths (async calls and the synchronous fast path).

A ``threading`` lock-guarded counter shared by the event loop and the caller threads of
``SyncBroker``. Taking a free slot is one lock round (:meth:`Slots.try_acquire`). When every
slot is taken the caller joins a queue and sleeps until a releaser hands it its slot: an
async waiter on an event (set on its loop, from any thread), a thread on a lock of its own.
Nobody polls: a queued call costs nothing until it is served (it used to poll every 2 ms,
and 300 queued calls took 77% of a core).

Order: waiters are queued per *queue key* (FIFO within a key) and the keys are served
round-robin, so one key's hundreds of queued calls do not delay another key's call by more
than one turn. The key and an optional bound on how many calls of that key may wait come
from :func:`queue_scope` (a context variable: the MCP server sets it per call to the calling
MCP session, ``[limits] max_queued`` and ``max_queued_total``); without one, every call shares
one unbounded queue (the library's own ``call_many`` batches wait, as they always did). A call
that would wait behind ``bound`` queued calls of its key, or behind ``total`` queued calls of
all keys together (a client that opens many sessions), fails at once with
:class:`ResourceLimitExceeded` (``resource_limit``; the broker records it like any refused
call) — unless its key's queue is shorter than the longest by two or more: then the newest
call of the longest queue is refused in its place, so that one client filling the total
bound does not lock every other session out.

A released slot goes straight to the next waiter (``in_use`` stays at ``total``), so a new
caller cannot overtake the queue through :meth:`try_acquire`: while anyone waits, every slot
is taken. Cancellation-safe: a cancelled waiter leaves the queue, and one cancelled after it
was handed a slot passes that slot on.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Hashable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.lowlevel

from runtime.errors import ResourceLimitExceeded

__all__ = ["Slots", "queue_scope"]

#: (queue key, bound on that key's waiting calls or None, bound on all waiting calls or
#: None) of the calls made in this context.
_SCOPE: ContextVar[tuple[Hashable, int | None, int | None] | None] = ContextVar(
    "runtime_limiter_scope", default=None
)


@contextmanager
def queue_scope(key: Hashable, bound: int | None, total: int | None = None) -> Iterator[None]:
    """Calls made inside wait for a slot in ``key``'s queue (served round-robin with the
    other keys'), and fail with ``resource_limit`` when ``bound`` calls of ``key`` already
    wait, or ``total`` calls of any key (None: no bound; 0: never wait)."""
    token = _SCOPE.set((key, bound, total))
    try:
        yield
    finally:
        _SCOPE.reset(token)


class _Waiter:
    """One queued caller. ``wake`` never blocks; it is called outside the lock."""

    __slots__ = ("granted", "key", "refused", "wake")

    def __init__(self, key: Hashable, wake: Callable[[], object]) -> None:
        self.key = key
        self.wake = wake
        self.granted = False
        #: Set (and the waiter woken) when a waiter of a shorter queue took its place.
        self.refused: ResourceLimitExceeded | None = None


def _async_wake(event: anyio.Event) -> Callable[[], object]:
    """A function any thread may call to set ``event`` (of the running loop) without
    waiting: directly on the loop's thread, else scheduled on the loop."""
    owner = threading.get_ident()
    native: Any = anyio.lowlevel.current_token().native_token
    if isinstance(native, asyncio.AbstractEventLoop):
        schedule: Callable[[Callable[[], object]], object] = native.call_soon_threadsafe
    else:  # trio's TrioToken
        schedule = native.run_sync_soon

    def wake() -> None:
        if threading.get_ident() == owner:
            event.set()
        else:
            schedule(event.set)

    return wake


def _wake(waiter: _Waiter) -> None:
    """Wake a displaced waiter (it raises its refusal); one whose loop has closed is gone."""
    with suppress(RuntimeError):
        waiter.wake()


class Slots:
    """``total`` slots; ``in_use`` of them taken; ``waiting`` callers queued for one."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.total = total
        self._lock = threading.Lock()
        self._in_use = 0
        # Queued callers (guarded by _lock): the queue of each key with any, and the keys in
        # serving order (a key is in _order exactly when its queue is not empty).
        self._waiting = 0
        self._queues: dict[Hashable, deque[_Waiter]] = {}
        self._order: deque[Hashable] = deque()

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def waiting(self) -> int:
        return self._waiting

    def try_acquire(self) -> bool:
        """Take a slot if one is free, without waiting; True if taken (then :meth:`release`
        it). The broker's async path uses this before :meth:`wait_async`: an async context
        manager costs ~15 µs per call here, the lock round ~0.3 µs. Never overtakes a
        waiter: while anyone waits, every slot is taken."""
        with self._lock:
            if self._in_use < self.total:
                self._in_use += 1
                return True
            return False

    def release(self) -> None:
        """Give a slot back: to the next waiter (round-robin over the keys), else free."""
        with self._lock:
            if not self._waiting:
                self._in_use -= 1
                return
            waiter = self._next()
        try:
            waiter.wake()
        except RuntimeError:  # its event loop is closed: nobody will take the slot there
            self.release()

    def _next(self) -> _Waiter:
        """Dequeue the next waiter and mark it granted (its slot stays counted). Under
        _lock, with ``_waiting`` > 0."""
        key = self._order.popleft()
        queue = self._queues[key]
        waiter = queue.popleft()
        if queue:
            self._order.append(key)  # its next call waits for the other keys' turns
        else:
            del self._queues[key]
        self._waiting -= 1
        waiter.granted = True
        return waiter

    def _enqueue(self, waiter: _Waiter, bound: int | None, total: int | None) -> _Waiter | None:
        """Queue ``waiter`` behind its key's waiters; under _lock, every slot taken. Returns
        the waiter it displaced, to be woken (refused) outside the lock, or None.

        Past ``total``, the newest waiter of the longest queue makes room for a key whose
        queue is shorter by two or more (it is refused as it would have been, had it come
        last): a client that filled the total bound alone does not lock every other
        session out. Among queues of one length the newcomer is refused."""
        queue = self._queues.get(waiter.key)
        queued = len(queue) if queue is not None else 0
        displaced = None
        if total is not None and self._waiting >= total:
            longest = max(self._queues, key=lambda k: len(self._queues[k]), default=None)
            if longest is None or len(self._queues[longest]) <= queued + 1:
                raise self._over_total(total)
            displaced = self._queues[longest].pop()
            if not self._queues[longest]:
                del self._queues[longest]
                self._order.remove(longest)
            self._waiting -= 1
            displaced.refused = self._over_total(total)
        if bound is not None and queued >= bound:
            raise ResourceLimitExceeded(
                f"busy: all {self.total} call slots are taken and {queued} calls of this "
                f"session already wait for one (limits.max_queued = {bound}); retry later",
                limit="max_queued",
                max_queued=bound,
                queued=queued,
                max_concurrent=self.total,
            )
        if queue is None:
            queue = self._queues[waiter.key] = deque()
            self._order.append(waiter.key)
        queue.append(waiter)
        self._waiting += 1
        return displaced

    def _over_total(self, total: int) -> ResourceLimitExceeded:
        return ResourceLimitExceeded(
            f"busy: all {self.total} call slots are taken and {self._waiting} calls "
            f"already wait for one (limits.max_queued_total = {total}); retry later",
            limit="max_queued_total",
            max_queued_total=total,
            queued=self._waiting,
            max_concurrent=self.total,
        )

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter gives up (cancelled, interrupted): out of the queue, or, when it was
        handed a slot already, the slot goes on to the next one."""
        with self._lock:
            granted = waiter.granted
            if waiter.refused is not None:  # displaced: already out of the queue
                return
            if not granted:
                queue = self._queues[waiter.key]
                queue.remove(waiter)
                self._waiting -= 1
                if not queue:
                    del self._queues[waiter.key]
                    self._order.remove(waiter.key)
        if granted:
            self.release()

    async def wait_async(self) -> None:
        """Take a slot, sleeping in the queue while every slot is taken (no polling;
        cancellation-safe: a cancelled waiter holds nothing). The caller releases it
        (:meth:`release`). Raises ResourceLimitExceeded when the queue scope's bound is
        reached (:func:`queue_scope`)."""
        scope = _SCOPE.get()
        key, bound, total = scope if scope is not None else (None, None, None)
        event = anyio.Event()
        waiter = _Waiter(key, _async_wake(event))
        with self._lock:
            if self._in_use < self.total:  # freed since try_acquire; nobody waits then
                self._in_use += 1
                return
            displaced = self._enqueue(waiter, bound, total)
        if displaced is not None:
            _wake(displaced)
        try:
            await event.wait()
        except BaseException:
            self._leave(waiter)
            raise
        if waiter.refused is not None:
            raise waiter.refused

    @asynccontextmanager
    async def acquire_async(self) -> AsyncIterator[None]:
        if not self.try_acquire():
            await self.wait_async()
        try:
            yield
        finally:
            self.release()

    def wait_sync(self) -> None:
        """Take a slot, blocking this thread until one is handed to it (same queue and
        scope as :meth:`wait_async`). The caller releases it."""
        scope = _SCOPE.get()
        key, bound, total = scope if scope is not None else (None, None, None)
        gate = threading.Lock()
        gate.acquire()
        waiter = _Waiter(key, gate.release)
        with self._lock:
            if self._in_use < self.total:
                self._in_use += 1
                return
            displaced = self._enqueue(waiter, bound, total)
        if displaced is not None:
            _wake(displaced)
        try:
            gate.acquire()
        except BaseException:  # KeyboardInterrupt in the main thread
            self._leave(waiter)
            raise
        if waiter.refused is not None:
            raise waiter.refused

    @contextmanager
    def acquire_sync(self) -> Iterator[None]:
        if not self.try_acquire():
            self.wait_sync()
        try:
            yield
        finally:
            self.release()
