"""Call events: ``requested``, ``completed``, ``failed``, ``denied``.

``data`` (seed 000's payloads): ``requested`` has the call's ``arguments`` as they arrived
(before validation: untrusted, and not redacted — events stay in the process that made the
call); the others have ``error_type`` and ``duration_ms``, plus ``result`` (completed) or
``error``, the message (failed, denied). Copies: a subscriber cannot change the call.

Delivered to callbacks (called inline; a callback that raises is reported, never allowed to
break the call) and to async iterators (bounded buffers; a subscriber that stops reading
loses events rather than growing the broker's memory — ``dropped`` counts them).

Callbacks are synchronous: an ``async def`` one (a function, a partial of one, an object
whose ``__call__`` is one) is refused when it is added (TypeError: use :meth:`subscribe`).
Called inline it only made a coroutine that nobody awaited (every event lost, "coroutine was
never awaited"); scheduling it instead would need the broker's loop from whichever thread
emits (SyncBroker's synchronous path emits in the caller's thread), and a bound of its own,
which is what the subscription already is. A synchronous callback that returns an awaitable
anyway has it closed and is reported as a callback that raised.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from runtime.broker._callables import close_awaitable, is_async_callable

__all__ = ["Event", "EventBus", "EventKind", "check_callback"]

log = logging.getLogger("runtime.events")

EventKind = Literal["requested", "completed", "failed", "denied"]


@dataclass(frozen=True, slots=True)
class Event:
    kind: EventKind
    call_id: str
    tool: str
    data: dict[str, Any] = field(default_factory=dict)


def check_callback(callback: object) -> None:
    """TypeError unless ``callback`` is a synchronous callable (module doc)."""
    if not callable(callback):
        raise TypeError(f"an event callback must be callable, not {type(callback).__name__}")
    if is_async_callable(callback):
        raise TypeError(
            f"event callback {callback!r} is async: callbacks are called inline and never "
            "awaited; for async code read the events from an async iterator: "
            "'async with broker.events.subscribe() as events: async for event in events'"
        )


class EventBus:
    def __init__(self, buffer: int = 1024) -> None:
        self._callbacks: list[Callable[[Event], Any]] = []
        self._streams: list[MemoryObjectSendStream[Event]] = []
        self._buffer = buffer
        self.dropped = 0
        #: Whether anyone listens: the broker builds no Event when nobody does. A plain
        #: attribute, kept by every change of the listeners (the broker reads it twice a
        #: call; a property was a Python call each time).
        self.active = False

    def _listeners_changed(self) -> None:
        self.active = bool(self._callbacks or self._streams)

    def add_callback(self, callback: Callable[[Event], Any]) -> None:
        """Call ``callback(event)`` inline for every event. Raises TypeError for an async
        callback (module doc), or a ``callback`` that cannot be called."""
        check_callback(callback)
        self._callbacks.append(callback)
        self._listeners_changed()

    def remove_callback(self, callback: Callable[[Event], Any]) -> None:
        self._callbacks.remove(callback)
        self._listeners_changed()

    def emit(self, event: Event) -> None:
        for cb in list(self._callbacks):
            try:
                returned = cb(event)
                if returned is not None and inspect.isawaitable(returned):
                    close_awaitable(returned)
                    raise TypeError(
                        f"event callback {cb!r} returned an awaitable, which is not awaited "
                        "(closed): use a synchronous callback, or events.subscribe()"
                    )
            except Exception:
                log.exception("event callback %r raised; event %s", cb, event.kind)
        for stream in list(self._streams):
            try:
                stream.send_nowait(event)
            except anyio.WouldBlock:
                self.dropped += 1
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._streams.remove(stream)
                self._listeners_changed()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[Event]]:
        """``async with bus.subscribe() as events: async for ev in events: ...``"""
        send, receive = anyio.create_memory_object_stream[Event](self._buffer)
        self._streams.append(send)
        self._listeners_changed()
        try:
            async with receive:
                yield receive
        finally:
            if send in self._streams:
                self._streams.remove(send)
                self._listeners_changed()
            send.close()

    def forked_child(self) -> None:
        """In a forked child: forget the subscribers' streams (their readers are tasks of
        the parent's event loop; closing them would wake the parent's copies' waiters in
        this process, on a loop that does not run here). Callbacks stay."""
        self._streams = []
        self._listeners_changed()

    def close(self) -> None:
        for stream in self._streams:
            stream.close()
        self._streams.clear()
        self._listeners_changed()
