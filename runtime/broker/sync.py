"""A blocking facade over :class:`Broker` for scripts and the CLI.

The async broker runs in an event loop on a private thread (an anyio blocking portal). A call
whose backend can run synchronously once started (wasm, host, and the sandbox: its
``run_sync`` blocks the calling thread in ``poll`` and hands the tool's broker requests to the
loop) runs in the calling thread through :meth:`Broker.call_sync` — the same pipeline steps,
no event-loop hop (a hop costs ~250 µs here, ~1 ms of CPU for a sandboxed call with its two
wake-ups on the loop); every other call (the first one of a backend, which starts it, or one
with an async approver: ``async def``, or an object whose ``__call__`` is) crosses to the loop
and waits. A synchronous approver that returns an awaitable has it awaited on the loop while
the calling thread waits (``Broker._await_verdict``). Closing the SyncBroker ends every
sandbox and the loop.

A SyncBroker that is never closed is closed at interpreter exit (``weakref.finalize``, which
runs as an atexit hook while the loop thread still runs) or when it is garbage-collected.
Without that, exit hung: finalising the portal's context-manager generator after the loop
thread was frozen waited forever for the loop to stop.

A SyncBroker does not survive ``os.fork()``: the child has no loop thread, and the broker's
fork-server and audit journal are the parent's. In the child its calls return internal_error
("a broker does not survive fork(): open a new one in the child") and record nothing, and
close (or the exit-time finalizer) only lets go of the child's copies; a SyncBroker opened in
the child works as usual (``runtime/_forksafe.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from types import FrameType, TracebackType
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from runtime import _forksafe
from runtime.broker.core import Broker, NeedsEventLoop
from runtime.models import ToolResult

__all__ = ["SyncBroker"]

log = logging.getLogger("runtime.broker")


def _shutdown(
    portal_cm: AbstractContextManager[BlockingPortal], portal: BlockingPortal, broker: Broker
) -> None:
    """Close a SyncBroker its owner forgot (finalizer: holds no reference to the SyncBroker)."""
    if threading.current_thread().name.startswith(("asyncio-portal", "trio-portal")):
        return  # collected on the loop thread itself: a portal call from there deadlocks
    try:
        portal.call(broker.aclose)
    except Exception:
        log.exception("closing a SyncBroker that was not closed failed")
    finally:
        portal_cm.__exit__(None, None, None)


#: Broker attributes a caller may set on a SyncBroker between calls.
_BROKER_HOOKS = frozenset({"approver", "ask_user"})
#: How long an interrupted call waits for its cancelled task to record it (the sandbox's
#: teardown: a SIGTERM, its grace, the reap).
_CANCEL_WAIT_S = 30.0


class _Raised:
    """A KeyboardInterrupt or SystemExit a call raised on the loop (a hook's), carried to
    the calling thread: raised out of the portal's task, it stopped the loop thread itself
    (asyncio re-raises them out of the loop), and every later use of the SyncBroker, its
    close included, failed with "This portal is not running"."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_T = TypeVar("_T")


async def _carried(awaitable: Awaitable[_T]) -> _T | _Raised:
    try:
        return await awaitable
    except (Exception, anyio.get_cancelled_exc_class()):
        raise
    except BaseException as exc:  # the broker recorded the call as cancelled
        return _Raised(exc)


def _cancel(scope: anyio.CancelScope) -> None:
    scope.cancel()


class _Cancelled:
    """The task of :func:`_wait_on_loop` ended by its cancelled scope (not an answer)."""


def _wait_on_loop(portal: BlockingPortal, make: Callable[[], Awaitable[_T]]) -> _T:
    """``await make()`` on the portal's loop, from the calling thread, and its result.

    Interrupted while waiting (Ctrl-C, or the CLI's SIGTERM, in the calling thread): the
    task on the loop would otherwise run on (a sandboxed command to its timeout, an approver
    waiting for an answer) with nobody to take its result. Its scope is cancelled and the
    task awaited (bounded), so the broker has recorded the call as cancelled when the
    interruption goes on; cancelling the future alone left the task to be torn down with the
    loop, its completion never recorded. The cancel is scheduled, not waited for: a loop held
    up (a hook blocking it) held this thread too, past the bounded wait below."""
    scopes: list[anyio.CancelScope] = []

    async def _run() -> _T | _Raised | _Cancelled:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            return await _carried(make())
        return _Cancelled()  # cancelled below, once this thread was interrupted

    future = portal.start_task_soon(_run)
    try:
        result = future.result()
    except BaseException:
        if scopes:
            with contextlib.suppress(Exception):
                portal.start_task_soon(_cancel, scopes[0])
            with contextlib.suppress(BaseException):
                future.result(timeout=_CANCEL_WAIT_S)
        else:
            future.cancel()
        raise
    assert not isinstance(result, _Cancelled)  # only this thread's interruption cancels
    if isinstance(result, _Raised):
        raise result.exc
    return result


def _awaiter(portal: BlockingPortal) -> Callable[[Awaitable[Any]], Any]:
    """The broker's ``_await_from_thread``: an approver's awaitable answer on SyncBroker's
    synchronous path, awaited on the loop (Broker._await_verdict). Holds the portal only,
    not the SyncBroker (whose finalizer holds the broker)."""

    def await_it(awaitable: Awaitable[Any]) -> Any:
        return _wait_on_loop(portal, lambda: awaitable)

    return await_it


class _HeldSignals:
    """Within ``with``: the signals whose Python handler would raise in the main thread
    (SIGINT, SIGTERM, SIGHUP with a handler that is a function) are recorded, not handled;
    :meth:`raise_held` then runs the handlers for them, at a point where what they raise
    can be cleaned up after. Only in the main thread (no handler runs in another); the
    kernel's signal mask is left alone (threads started meanwhile, and the processes they
    spawn, such as the sandbox's fork-server, would inherit a blocked mask)."""

    _SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._held: list[int] = []

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            for sig in self._SIGNALS:
                handler = signal.getsignal(sig)
                if callable(handler):
                    self._previous[sig] = handler
                    signal.signal(sig, self._hold)
        except BaseException:  # one handled before it was held
            self.__exit__()
            raise

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        self._held.append(signum)

    def raise_held(self) -> None:
        """Run the handler of each signal held, in order; what one raises propagates."""
        held, self._held = self._held, []
        for sig in held:
            self._previous[sig](sig, sys._getframe(1))


class SyncBroker:
    """``with SyncBroker(workspace="ws") as broker: broker.call({...})``.

    Takes the same arguments as :class:`Broker`.
    """

    def __init__(self, *args: Any, backend: str = "asyncio", **kwargs: Any) -> None:
        self._args = args
        self._kwargs = kwargs
        self._backend_name = backend
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        self.broker: Broker | None = None
        # In a child forked while open (see _forked_child).
        self._forked = False
        _forksafe.on_fork_in_child(self)

    def __enter__(self) -> SyncBroker:
        self.open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def open(self) -> None:
        """Start the loop thread and open the broker.

        A signal whose handler raises in this thread (Ctrl-C's KeyboardInterrupt, the CLI's
        SIGTERM and SIGHUP) is held while the loop thread starts and while it stops on a
        failure, then raised once the portal can be stopped: raised while anyio's
        ``start_blocking_portal`` waited for its thread, it left that thread's loop running
        and joined it forever (``runtime exec`` hung on a SIGTERM in its first second)."""
        if self._portal is not None:
            # A second broker would replace this one, whose backends (a fork-server) would
            # then run until the interpreter exits: close() ends only the current one.
            raise RuntimeError("SyncBroker is already open: close() it first")
        portal_cm = start_blocking_portal(self._backend_name)
        portal: BlockingPortal | None = None
        broker: Broker | None = None
        held = _HeldSignals()
        try:
            with held:
                portal = portal_cm.__enter__()
            held.raise_held()
            broker = Broker(*self._args, **self._kwargs)
            broker._await_from_thread = _awaiter(portal)
            self.broker = portal.call(broker.__aenter__)
        except BaseException:
            if portal is not None:
                cleanup = _HeldSignals()
                with cleanup:
                    if broker is not None:  # its audit log, a prespawned fork-server
                        with contextlib.suppress(Exception):
                            portal.call(broker.aclose)
                    portal_cm.__exit__(None, None, None)
                self.broker = None
                cleanup.raise_held()
            raise
        self._portal_cm, self._portal = portal_cm, portal
        self._finalizer = weakref.finalize(
            self, _shutdown, self._portal_cm, self._portal, self.broker
        )

    def _forked_child(self) -> None:
        """In a child of ``os.fork()``: the loop thread is the parent's and is not here, so
        nothing may cross the portal (it would wait for ever). The portal is marked not
        running (anyio's own state for that: its context manager's exit then skips the
        stop call and joins a thread the fork already marked stopped), the exit-time
        finalizer is dropped, and calls take the broker's refusal path (see call)."""
        if self._portal is None:
            return
        self._forked = True
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._portal._event_loop_thread_id = None

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._forked:
            # The parent's broker: its copy here is let go, nothing of it is ended.
            assert self._portal_cm is not None
            self._portal_cm.__exit__(None, None, None)
            self._portal = self._portal_cm = None
            self.broker = None
            self._forked = False
            return
        if self._portal is not None and self.broker is not None:
            try:
                self._portal.call(self.broker.aclose)
            finally:
                assert self._portal_cm is not None
                self._portal_cm.__exit__(None, None, None)
                self._portal = self._portal_cm = None
                self.broker = None

    def call(self, call: Any, **kwargs: Any) -> ToolResult:
        if self._portal is None or self.broker is None:
            raise RuntimeError("SyncBroker is not open: use 'with SyncBroker(...)'")
        broker = self.broker
        try:
            return broker.call_sync(call, **kwargs)
        except NeedsEventLoop:
            if self._forked:
                # No loop thread here: the forked broker refuses the call without awaiting
                # anything, on a loop of this thread's own.
                return asyncio.run(broker.call(call, **kwargs))

        return _wait_on_loop(self._portal, lambda: broker.call(call, **kwargs))

    def call_many(self, calls: Iterable[Any], **kwargs: Any) -> list[ToolResult]:
        """:meth:`Broker.call_many`: the calls run at once on the broker's loop."""
        if self._portal is None or self.broker is None:
            raise RuntimeError("SyncBroker is not open: use 'with SyncBroker(...)'")
        broker, batch = self.broker, list(calls)

        async def _run() -> list[ToolResult] | _Raised:
            return await _carried(broker.call_many(batch, **kwargs))

        results = asyncio.run(_run()) if self._forked else self._portal.call(_run)
        if isinstance(results, _Raised):
            raise results.exc
        return results

    def __getattr__(self, name: str) -> Any:
        # catalogue, policy, audit, workspace... are the async broker's.
        if name.startswith("_") or self.broker is None:
            raise AttributeError(name)
        return getattr(self.broker, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # The hooks a caller may change between calls are the broker's: ``sync.approver =
        # f`` set an attribute of this wrapper that nothing read (reads were forwarded,
        # writes were not), so the broker kept asking the old approver. They go to the open
        # broker and to the arguments of the next open().
        if name in _BROKER_HOOKS:
            self._kwargs[name] = value
            if self.broker is not None:
                setattr(self.broker, name, value)
            return
        object.__setattr__(self, name, value)
