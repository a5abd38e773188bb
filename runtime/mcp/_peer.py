"""What the client of a URL server does with messages it did not ask for.

A server may send, on the SSE stream of an answer or on a GET stream: requests
(``ping``, ``roots/list``, ``sampling/createMessage``, ``elicitation/create``, anything),
notifications (``notifications/tools/list_changed``, progress, log messages) and responses
that answer nothing we sent. The rules, and why:

* ``ping`` is answered (an empty result): a server that pings before answering would
  otherwise hang until the call's timeout.
* Every other request is refused with JSON-RPC ``-32601`` (method not found) naming the
  reason: the broker declared no client capability, and never lets a remote server drive
  the user's model (sampling), prompt the user (elicitation) or read the user's files
  (roots) behind the policy's back. The answer is sent so the server does not wait.
* ``notifications/tools/list_changed`` calls the client's hook (the proxy lists the tools
  again through the same checks as at start-up); other notifications are logged, at most
  :data:`LOG_BUDGET` lines per client, then counted.
* A request whose ``id`` is neither an integer nor a string cannot be answered and is
  dropped; a response whose id is not one we are waiting for is dropped too. Hazard:
  ``True == 1`` in Python, so ids are compared with their type.
* A flood is cut off: :class:`Budget` bounds the messages and bytes one stream may spend on
  anything but the awaited answer; past it the stream is a ``SandboxError``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from runtime.errors import SandboxError

__all__ = [
    "LOG_BUDGET",
    "MAX_CHATTER_BYTES",
    "SESSION_WINDOW_S",
    "Budget",
    "Inbound",
    "answer_for",
    "classify",
    "same_id",
]

log = logging.getLogger("runtime.mcp.remote")

#: Log lines (notifications, refusals) per client before they are only counted.
LOG_BUDGET = 100
#: Server requests one stream may send us before it counts as a flood.
MAX_REQUESTS = 64
#: Messages other than the awaited answer one stream may send.
MAX_MESSAGES = 10_000
#: Bytes of those messages one stream may send.
MAX_CHATTER_BYTES = 4 * 1024 * 1024
_MAX_ID_CHARS = 256
#: The budget window of a stream held open for a session, seconds.
SESSION_WINDOW_S = 60.0

_REFUSED = {
    "sampling/createMessage": "the runtime does not let an MCP server drive the model (sampling)",
    "elicitation/create": "the runtime does not let an MCP server prompt the user (elicitation)",
    "roots/list": "the runtime does not show its roots to an MCP server",
}


def same_id(value: Any, request_id: int) -> bool:
    return type(value) is int and value == request_id


def _valid_id(value: Any) -> bool:
    return (type(value) is int) or (type(value) is str and len(value) <= _MAX_ID_CHARS)


def classify(message: Any) -> str:
    """``request``, ``notification``, ``response`` or ``junk`` (not a JSON-RPC message)."""
    if not isinstance(message, dict):
        return "junk"
    method = message.get("method")
    if isinstance(method, str):
        return "request" if "id" in message else "notification"
    if "id" in message and ("result" in message or "error" in message):
        return "response"
    return "junk"


def answer_for(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to a server's request, or None when its id cannot be answered."""
    request_id = message.get("id")
    if not _valid_id(request_id):
        return None
    method = str(message.get("method"))
    if method == "ping":
        return {"jsonrpc": "2.0", "id": request_id, "result": {}}
    reason = _REFUSED.get(method, "the runtime offers no such method to MCP servers")
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32601, "message": f"method not found: {method[:100]}: {reason}"},
    }


class Budget:
    """What one stream may spend besides the awaited answer. ``window_s`` (seconds) renews
    the budget for a stream held open for a whole session (a GET stream): its limits are
    then per window, so hours of progress notifications are not a flood, a burst is."""

    __slots__ = ("bytes", "messages", "requests", "server", "started", "window_s")

    def __init__(self, server: str, *, window_s: float | None = None) -> None:
        self.server = server
        self.window_s = window_s
        self.started = time.monotonic()
        self.messages = 0
        self.requests = 0
        self.bytes = 0

    def spend(self, kind: str, size: int) -> None:
        if self.window_s is not None and time.monotonic() - self.started > self.window_s:
            self.started = time.monotonic()
            self.messages = self.requests = self.bytes = 0
        self.messages += 1
        self.bytes += size
        if kind == "request":
            self.requests += 1
        if (
            self.messages > MAX_MESSAGES
            or self.bytes > MAX_CHATTER_BYTES
            or self.requests > MAX_REQUESTS
        ):
            raise SandboxError(
                f"MCP server {self.server!r} flooded the stream ({self.messages} messages, "
                f"{self.requests} requests, {self.bytes} bytes besides the answer)",
                server=self.server,
                reason="flood",
            )


class Inbound:
    """One client's handling of unsolicited messages; ``on_tools_changed`` is the hook the
    proxy sets (called at most once per notification, never awaited here)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.on_tools_changed: Callable[[], None] | None = None
        self.logged = 0
        self.dropped = 0

    def notification(self, message: dict[str, Any]) -> None:
        method = str(message.get("method"))
        if method == "notifications/tools/list_changed":
            hook = self.on_tools_changed
            if hook is not None:
                hook()
            return
        self.note("notification %s", method[:100])

    def request(self, message: dict[str, Any]) -> dict[str, Any] | None:
        answer = answer_for(message)
        if answer is None:
            self.dropped += 1
            self.note("request with an unusable id dropped (%s)", str(message.get("method"))[:100])
        elif "error" in answer:
            self.note("request %s refused", str(message.get("method"))[:100])
        return answer

    def note(self, fmt: str, *args: Any) -> None:
        """Log ``fmt % args`` while the budget lasts: a chatty server cannot fill the log."""
        self.logged += 1
        if self.logged <= LOG_BUDGET:
            log.info("mcp server %r: " + fmt, self.server, *args)
        elif self.logged == LOG_BUDGET + 1:
            log.info("mcp server %r: further messages are not logged", self.server)
