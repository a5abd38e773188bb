"""One long-lived thread per process that starts the sandbox's processes.

The fork-server (zygote, ``_prespawn``) and the launcher of a long-lived sandboxed program
(``process``) each arm a parent-death signal, so that they never outlive the broker: a
SIGKILL of the broker, where nothing of it runs any more, still ends them (and, down their
own parent-death signals, every call). Hazard: Linux sends that signal when the *thread*
that forked the child exits, not its process. A broker made, or first called, in a worker
thread (a ``concurrent.futures`` pool, an anyio worker that idles out after 10 s, a thread
of the caller's) would lose its zygote with that thread, and every later call would fail.

So every such process is forked by this module's thread, started on first use and never
ended: it exits only with the process, which is exactly when the signal must fire. A thread
that asks blocks for the answer (a fork+exec, ~1-5 ms, as before); the zygote's boot then
runs on another core as it did. After ``os.fork()`` the child has no such thread (only the
forking one survives, and a lock some other thread held stays held): the lock is a
``ForkSafeLock`` (unheld in the child) and ``register_at_fork`` leaves the child no thread,
so its first spawn starts its own.

Two waits that nothing would end fail at once with a :class:`SandboxError` instead
(``details["reason"]``), and no second spawner thread is ever started:

- ``"reentrant"``: a signal handler that spawns while its own thread, underneath it, is
  starting the spawner thread (it holds the lock the handler would wait for, and the thread
  it is starting is not there yet to run the handler's job);
- ``"shutdown"``: a spawn asked for once the interpreter is finalizing (a ``__del__`` run
  at exit): daemon threads, the spawner among them, never run Python again by then, so its
  job would never run. (``atexit`` handlers run before that, and spawn as usual.)
"""

from __future__ import annotations

import os
import queue
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from runtime._forksafe import ForkSafeLock
from runtime.errors import SandboxError

__all__ = ["spawn_in_owner_thread"]

T = TypeVar("T")

_Job = tuple[Callable[[], Any], Future[Any]]


class _State:
    """The spawner thread's queue and id (None: not started in this process)."""

    def __init__(self) -> None:
        self.lock = ForkSafeLock()
        self.jobs: queue.SimpleQueue[_Job] | None = None
        self.ident: int | None = None

    def forked_child(self) -> None:
        # Only the forking thread exists now: no spawner. Plain assignments, no locking
        # (safe in an after-fork hook); the lock is made unheld by its own hook.
        self.jobs = self.ident = None


_state = _State()
os.register_at_fork(after_in_child=_state.forked_child)
#: ``starting``: this thread is in _jobs' slow path (the lock taken or about to be).
_local = threading.local()


def _serve(jobs: queue.SimpleQueue[_Job]) -> None:
    while True:
        # A call per job, so that nothing of it (the callable, its future, the process
        # made) stays referenced from this frame while the thread idles.
        _run(*jobs.get())


def _run(fn: Callable[[], Any], future: Future[Any]) -> None:
    if not future.set_running_or_notify_cancel():
        return
    try:
        result = fn()
    except BaseException as exc:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _jobs() -> queue.SimpleQueue[_Job]:
    state = _state
    jobs = state.jobs
    if jobs is not None:  # set once, after its thread started
        return jobs
    # Marked before the lock is taken, so a signal handler that runs on this thread at any
    # point from here on sees it: a handler before the mark waits for nothing (the lock is
    # not this thread's yet) and starts the spawner itself, which the re-check below finds.
    if getattr(_local, "starting", False):
        raise SandboxError(
            "a sandbox process was asked for by a signal handler while its thread was "
            "starting the spawner thread; ask again once that has returned",
            reason="reentrant",
        )
    _local.starting = True
    try:
        with state.lock:
            if state.jobs is None:
                jobs = queue.SimpleQueue()
                # Daemon: it must not hold up the interpreter's exit, and it is never joined.
                thread = threading.Thread(
                    target=_serve, args=(jobs,), name="runtime-sandbox-spawner", daemon=True
                )
                thread.start()
                state.jobs, state.ident = jobs, thread.ident
            return state.jobs
    finally:
        _local.starting = False


def spawn_in_owner_thread(spawn: Callable[[], T], discard: Callable[[T], object]) -> T:
    """``spawn()`` run on the spawner thread (see the module); its result or exception.

    ``discard`` ends what ``spawn`` made when the caller stops waiting for it (an
    exception, KeyboardInterrupt say, raised in the waiting thread): the spawn itself is
    not interrupted, and its process must not be left behind unowned."""
    if threading.get_ident() == _state.ident:
        return spawn()
    if sys.is_finalizing():
        # Only the finalizing thread runs Python now; the spawner would never take the job.
        raise SandboxError(
            "no sandbox process can be started while the interpreter shuts down",
            reason="shutdown",
        )
    future: Future[T] = Future()
    try:
        # The put inside the try: an exception raised just after it (a signal handler's,
        # run as the put returns) must still find the job to cancel or discard.
        _jobs().put((spawn, future))
        return future.result()
    except BaseException:
        # Not started yet: cancelled, nothing made. Otherwise (running, or done just now)
        # whatever it made is ended when it is done; a spawn that failed made nothing.
        if not future.cancel():
            future.add_done_callback(lambda done: _discard(done, discard))
        raise


def _discard(done: Future[T], discard: Callable[[T], object]) -> None:
    if not done.cancelled() and done.exception() is None:
        discard(done.result())
