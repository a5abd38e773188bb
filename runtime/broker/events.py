"""Call events: ``requested``, ``completed``, ``failed``, ``denied``.

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

    def add_callback(self, callback: Callable[[Event], Any]) -> None:
        self._callbacks.append(callback)

    def remove_callback(self, callback: Callable[[Event], Any]) -> None:
        self._callbacks.remove(callback)

    @property
    def active(self) -> bool:
        """Whether anyone listens: the broker builds no Event when nobody does."""
        return bool(self._callbacks or self._streams)

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

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[Event]]:
        """``async with bus.subscribe() as events: async for ev in events: ...``"""
        send, receive = anyio.create_memory_object_stream[Event](self._buffer)
        self._streams.append(send)
        try:
            async with receive:
                yield receive
        finally:
            if send in self._streams:
                self._streams.remove(send)
            send.close()

    def close(self) -> None:
        for stream in self._streams:
            stream.close()
        self._streams.clear()
