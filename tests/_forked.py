"""``in_a_forked_child``: run a test's body in a child made by ``os.fork()``, bounded; and
``held_by_another_thread``: a lock held by a thread that the fork will not copy.

The child reports through a pipe and leaves with ``os._exit`` (no pytest teardown, no atexit
of the parent's copy); a child still running after the bound is killed and reported as such,
so a hang fails its test instead of hanging the suite."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager


def in_a_forked_child(body: Callable[[], str], timeout_s: float = 30.0) -> str:
    """``body()`` in a child made by ``os.fork()``: what it returned (or the exception it
    raised), read from a pipe. A child still running after ``timeout_s`` is killed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            try:
                report = body()
            except BaseException as exc:
                report = f"raised {type(exc).__name__}: {exc}"
            os.write(w, report.encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        deadline = time.monotonic() + timeout_s
        while not os.waitpid(pid, os.WNOHANG)[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return f"still running after {timeout_s} s"
            time.sleep(0.01)
        return os.read(r, 4096).decode()
    finally:
        os.close(r)


@contextmanager
def held_by_another_thread(lock: AbstractContextManager[object]) -> Iterator[None]:
    """``lock`` held, for the ``with`` block, by a thread of this process: a child forked
    inside the block has a copy of the lock as held, and no thread that will release it."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        thread.join()
