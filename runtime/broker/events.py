"""Call events: ``requested``, ``completed``, ``failed``, ``denied``.

``data`` (seed 000's payloads): ``requested`` has the call's ``arguments`` as they arrived
(before validation: untrusted, and not redacted — events stay in the process that made the
call); the others have ``error_type`` and ``duration_ms``, plus ``result`` (completed) or
``error``, the message (failed, denied). Copies: a subscriber cannot change the call.

Delivered to callbacks (called inline; a callback that raises is reported, never allowed to
break the call) and to async iterators (bounded buffers; a subscriber that stops reading
loses events rather than growing the broker's memory — ``dropped`` counts them).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["Event", "EventBus", "EventKind"]

log = logging.getLogger("runtime.events")

EventKind = Literal["requested", "completed", "failed", "denied"]


@dataclass(frozen=True, slots=True)
class Event:
    kind: EventKind
    call_id: str
    tool: str
    data: dict[str, Any] = field(default_factory=dict)


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
        self._callbacks.append(callback)
        self._listeners_changed()

    def remove_callback(self, callback: Callable[[Event], Any]) -> None:
        self._callbacks.remove(callback)
        self._listeners_changed()

    def emit(self, event: Event) -> None:
        for cb in list(self._callbacks):
            try:
                cb(event)
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
