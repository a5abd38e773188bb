"""One call's channel back to the broker: what a running tool may ask the broker for.

A sandboxed tool reaches the network or the session's user only through requests over its
frame pipe (``ctx.ask_broker(op, payload)``), answered here. The tool's code is untrusted
(a custom tool, or a built-in one turned by its input), so what it may ask is decided by
the broker from what the call was granted, never from what the tool asks:

- ``http`` and ``search_endpoint`` (the egress gateway): only when the tool's manifest
  declares ``sandbox.egress`` *and* the policy's decision for this call grants network
  (``decision.network["allowed"]``). A tool that declares no egress was never judged as a
  network tool by the policy (no ``[network]`` check of its arguments, no network category
  rule), so the gateway's own host checks alone must not let it out.
- ``ask_user``: only when the manifest declares ``sandbox.ask_user``.

Anything else is refused as ``policy_denied`` naming what the manifest did not declare.
The refusal is raised to the backend, which keeps the last one (without its traceback) as
the call's error if the tool then fails, and counts them: past a bound it ends the call
(``runtime.backends.sandbox.backend.MAX_REFUSED_REQUESTS``). Nothing of a request outlives
its answer here either (see ``_http``).

Every ``http`` request (web_search's to the search endpoint too: asking for the endpoint's
URL is no request), granted or refused, is kept in the call's egress log
(:meth:`CallChannel.usage`), which the broker puts in the completion record's ``usage`` as
``egress`` (and so in the ``ToolResult``'s usage): a tool that succeeds after a refused
request (a web_fetch batch with one page redirected to the metadata address) shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from runtime._egress_log import EGRESS_LOG_MAX, log_request, new_log
from runtime.errors import PolicyDenied, RuntimeToolError, ToolFailed
from runtime.models import Decision, ToolSpec

__all__ = ["EGRESS_LOG_MAX", "CallChannel"]

_EGRESS_OPS = frozenset({"http", "search_endpoint"})


class CallChannel:
    """The broker requests of one call (``ExecRequest.broker_requests``). ``gateway()``
    returns the broker's egress gateway (made on first use); ``ask_user()`` the session's
    hook or None."""

    __slots__ = ("_ask_user", "_egress", "_gateway", "_log", "_redact", "_spec")

    def __init__(
        self,
        spec: ToolSpec,
        decision: Decision,
        gateway: Callable[[], Any],
        ask_user: Callable[[], Callable[[str, list[str] | None], str] | None],
        redact: Callable[[str], str] = str,
    ) -> None:
        self._spec = spec
        # Both, or no egress: the manifest says the tool needs it, the decision grants it.
        self._egress = bool(spec.sandbox.egress) and decision.network.get("allowed") is True
        self._gateway = gateway
        self._ask_user = ask_user
        self._redact = redact
        self._log = new_log()  # runtime._egress_log

    async def __call__(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if op == "http":
            return await self._http(payload)
        if op in _EGRESS_OPS:
            self._check_egress(op)
            reply: dict[str, Any] = await self._gateway().handle(op, payload)
            return reply
        if op == "ask_user":
            return await self._ask(payload)
        raise PolicyDenied(
            f"{self._spec.name}: unknown broker request {op!r:.60} (a tool may ask for 'http' "
            "and 'search_endpoint' with sandbox.egress, 'ask_user' with sandbox.ask_user)",
            rule="broker.request",
            op=op[:60] if isinstance(op, str) else None,
        )

    async def _http(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One gateway request, logged (:func:`runtime._egress_log.log_request`): URL
        (redacted, as arguments are in the audit log), method, addresses dialled, redirects
        followed, status, or the refusal's rule."""
        ok = isinstance(payload, dict)
        method = payload.get("method", "GET") if ok else None
        url = payload.get("url") if ok else None
        note: dict[str, Any] = {}
        error: RuntimeToolError | None = None
        try:
            self._check_egress("http")
            reply: dict[str, Any] = await self._gateway().handle("http", payload, note=note)
        except RuntimeToolError as exc:
            error = exc
            raise
        finally:
            log_request(self._log, method, url, self._redact, note=note, error=error)
            # The error's traceback holds this frame: kept in a local, it would make a
            # cycle (exception, traceback, frame, exception) holding the request's payload
            # until the garbage collector runs.
            error = None
        return reply

    def usage(self) -> dict[str, Any] | None:
        """The call's egress log for its usage (None when it made no HTTP request):
        ``requests`` the first :data:`EGRESS_LOG_MAX` entries, ``count`` all requests,
        ``refused`` how many were refused by the policy or the gateway."""
        log = self._log
        if not log["count"]:
            return None
        return {**log, "requests": list(log["requests"])}

    def _check_egress(self, op: str) -> None:
        spec = self._spec
        if not spec.sandbox.egress:
            raise PolicyDenied(
                f"{spec.name}: broker request {op!r} refused: the tool's manifest does not "
                "declare sandbox.egress, so it has no network",
                rule="broker.egress",
                op=op,
                undeclared="sandbox.egress",
            )
        if not self._egress:
            raise PolicyDenied(
                f"{spec.name}: broker request {op!r} refused: the policy's decision for this "
                "call grants no network",
                rule="broker.egress",
                op=op,
            )

    async def _ask(self, payload: dict[str, Any]) -> dict[str, Any]:
        spec = self._spec
        if not spec.sandbox.ask_user:
            raise PolicyDenied(
                f"{spec.name}: broker request 'ask_user' refused: the tool's manifest does not "
                "declare sandbox.ask_user",
                rule="broker.ask_user",
                op="ask_user",
                undeclared="sandbox.ask_user",
            )
        hook = self._ask_user()
        if hook is None:
            raise ToolFailed("no way to ask the user in this session", reason="no_user_channel")
        question = str(payload.get("question", ""))
        options = payload.get("options")
        # Abandoned when the call is cancelled: a question has no effect to wait for, and
        # a hook blocked at a terminal held the cancellation (Ctrl-C, SIGTERM) until answered.
        answer = await anyio.to_thread.run_sync(hook, question, options, abandon_on_cancel=True)
        return {"answer": answer}
