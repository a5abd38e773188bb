"""An incremental ``text/event-stream`` parser with a cap on each event.

The stream comes from an untrusted server, piece by piece, so nothing here waits for the end
of the stream (a GET stream never ends, and a server may ask something mid-answer and wait
for the reply). Hazard: a server that never ends a line or an event would grow the buffer
without bound; past ``max_event_bytes`` the parser raises :class:`EventTooLarge` instead.
Comments (``:`` lines, the usual keep-alives) carry nothing and are skipped.

``id`` and ``retry`` are kept for resuming a stream (``Last-Event-ID``, MCP's
resumability): :attr:`SseParser.last_event_id` is the id as of the last dispatched event
(the SSE standard: an event without ``id`` keeps the one before; an empty ``id`` clears
it), :attr:`SseParser.retry_ms` the server's last ``retry``. Hazard: the id goes back to
the server in a header, so an id that is not printable ASCII or longer than
:data:`MAX_EVENT_ID` is ignored, as the standard ignores one holding NUL.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_EVENT_ID", "EventTooLarge", "SseEvent", "SseParser", "SseSyntaxError"]

#: Longest event id kept, characters.
MAX_EVENT_ID = 1024


class EventTooLarge(ValueError):
    """One event (or one unterminated line) is larger than the parser's cap."""


class SseSyntaxError(ValueError):
    """A line that is not UTF-8."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str


class SseParser:
    """``feed(chunk)`` returns the events the chunk completed; ``close()`` the last one
    (a stream may end without the blank line after its last event)."""

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._id: str | None = None
        #: The id of the last dispatched event (None: no id seen yet on this stream).
        self.last_event_id: str | None = None
        #: The server's reconnection time, milliseconds (None: it named none).
        self.retry_ms: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        start = 0
        buf = self._buffer
        while True:
            cut = _line_end(buf, start)
            if cut is None:
                break
            end, after = cut
            line = bytes(buf[start:end])
            start = after
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buf[:start]
        if len(buf) + self._size > self._max:
            raise EventTooLarge(f"an event larger than {self._max} bytes")
        return events

    def close(self) -> SseEvent | None:
        if self._buffer:
            line, self._buffer = bytes(self._buffer), bytearray()
            event = self._line(line)
            if event is not None:
                return event
        return self._dispatch()

    def _line(self, raw: bytes) -> SseEvent | None:
        if not raw:
            return self._dispatch()
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SseSyntaxError(f"a line that is not UTF-8 ({exc.reason})") from exc
        name, colon, value = line.partition(":")
        if not name and colon:
            return None  # a comment
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(raw) + 1
            if self._size > self._max:
                raise EventTooLarge(f"an event larger than {self._max} bytes")
            self._data.append(value)
        elif name == "event":
            self._event = value[:256]
        elif name == "id":
            if len(value) <= MAX_EVENT_ID and all(" " <= c <= "~" for c in value):
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value) <= 9:
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        if self._id is not None:
            # Even an event without data moves the id on: a server's "priming" event
            # (an id and empty data) is there to give the client an id to resume from.
            self.last_event_id = self._id
        event, data, self._event, self._data, self._size = self._event, self._data, "", [], 0
        if not data:
            return None  # an event without data is not dispatched (the SSE spec)
        return SseEvent(event or "message", "\n".join(data))


def _line_end(buf: bytearray, start: int) -> tuple[int, int] | None:
    """(end of the line, start of the next) for the first CRLF, LF or CR from ``start``.
    A CR that ends the buffer waits for the next chunk: it may be half of a CRLF."""
    lf = buf.find(b"\n", start)
    cr = buf.find(b"\r", start, lf if lf >= 0 else len(buf))
    if cr >= 0:
        if cr + 1 == len(buf):
            return None
        return cr, cr + (2 if buf[cr + 1] == 0x0A else 1)
    if lf >= 0:
        return lf, lf + 1
    return None
