"""One call's egress log: what it asked of the network, granted or refused.

Kept in the call's usage as ``egress`` (the ``ToolResult``'s and the audit completion
record's): ``{"requests": [...], "count", "refused"}``, the first :data:`EGRESS_LOG_MAX`
requests, each with its URL (redacted: a query may carry a token), method, ``dialled``
addresses, ``redirects`` followed, ``status``, or ``error`` (the error type) and, for a
refusal, ``refused`` (the rule). Two writers: a sandboxed tool's broker channel
(``runtime.broker._channel``: its ``http`` requests, web_search's included) and the MCP
proxy's URL client (``runtime.mcp``: its requests to the server for a call).

The log is a plain JSON object mutated in place, so that a writer can hand it on before the
call ends (the MCP client's per-call ``trace`` is copied into a timed-out call's usage).
A module of its own outside ``runtime.egress``: the broker imports it for every sandboxed
call, and the gateway (httpx) is imported only when a call first needs the network.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.errors import PolicyDenied, RuntimeToolError

__all__ = ["EGRESS_LOG_MAX", "log_request", "new_log"]

#: Egress log entries kept per call; ``count`` says how many requests there were in all.
EGRESS_LOG_MAX = 32
#: Longest URL kept in an entry (after redaction), characters.
_URL_MAX = 1024


def new_log() -> dict[str, Any]:
    return {"requests": [], "count": 0, "refused": 0}


def log_request(
    log: dict[str, Any],
    method: Any,
    url: Any,
    redact: Callable[[str], str],
    *,
    note: dict[str, Any] | None = None,
    error: RuntimeToolError | None = None,
    refused: str | None = None,
) -> dict[str, Any]:
    """Add one request to ``log`` (from :func:`new_log`) and return its entry.

    ``method`` and ``url`` as asked (anything not text is shown as None); ``redact`` hides
    a URL's credentials (``Redactor.redact_url``); ``note`` what the gateway filled in as
    the request went (``dialled``, ``redirects``, ``status``); ``error`` how it failed: a
    ``PolicyDenied`` is a refusal by its rule. ``refused`` names the rule of a refusal that
    is not a ``PolicyDenied`` (the MCP client's refusal to follow a redirect)."""
    entry: dict[str, Any] = {
        "method": method.upper()[:16] if isinstance(method, str) else None,
        "url": _url(url, redact) if isinstance(url, str) else None,
    }
    if error is not None:
        entry["error"] = str(error.error_type)
        if isinstance(error, PolicyDenied):
            refused = str(error.details.get("rule") or "policy_denied")
    if refused is not None:
        entry["refused"] = refused
        log["refused"] += 1
    for key in ("dialled", "redirects", "status"):
        if note and note.get(key):
            value = note[key]
            entry[key] = [_url(u, redact) for u in value] if key == "redirects" else value
    log["count"] += 1
    if len(log["requests"]) < EGRESS_LOG_MAX:
        log["requests"].append(entry)
    return entry


def _url(url: str, redact: Callable[[str], str]) -> str:
    return redact(url[: _URL_MAX * 4])[:_URL_MAX]
