"""One concurrency limiter for both broker paths (async calls and the synchronous fast path).

A plain ``threading`` semaphore shared by the event loop and the caller threads of
``SyncBroker``. The async side never blocks the loop: it tries without blocking and, when
every slot is taken, sleeps briefly and tries again. That polling is cancellation-safe (a
cancelled waiter holds nothing), which a blocking acquire in a worker thread would not be:
a cancelled ``to_thread`` acquire could succeed after its caller gave up and leak a slot.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio

__all__ = ["Slots"]

_POLL_S = 0.002


class Slots:
    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("max_concurrent must be at least 1")
        self.total = total
        self._sem = threading.BoundedSemaphore(total)
        self._lock = threading.Lock()
        self._in_use = 0

    @property
    def in_use(self) -> int:
        return self._in_use

    def _took(self) -> None:
        with self._lock:
            self._in_use += 1

    def _release(self) -> None:
        with self._lock:
            self._in_use -= 1
        self._sem.release()

    @asynccontextmanager
    async def acquire_async(self) -> AsyncIterator[None]:
        while not self._sem.acquire(blocking=False):  # noqa: ASYNC110 - see module docstring
            await anyio.sleep(_POLL_S)
        self._took()
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def acquire_sync(self) -> Iterator[None]:
        self._sem.acquire()
        self._took()
        try:
            yield
        finally:
            self._release()
