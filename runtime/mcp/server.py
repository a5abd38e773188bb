"""The broker as an MCP server: ``tools/list`` from the catalogue, ``tools/call`` through
``broker.call`` — the same path as the CLI (validation, policy, sandbox, audit).

Built on the SDK's low-level ``Server``, which does not validate arguments itself: that is the
point, the broker's validator is the one that counts, and its error must reach the client as a
typed ``invalid_arguments`` result rather than an SDK-specific protocol error.

Mapping (DESIGN §7 → MCP):

* success → ``structuredContent`` = the result (wrapped as ``{"result": value}`` when the
  result is not an object, which MCP requires) and one text block with its JSON;
* any error result (tool failure, invalid arguments, policy denial, ...) → ``isError: true``
  with ``{"error": {type, message, details}}`` in ``structuredContent`` and its JSON as text;
* an unknown or hidden tool → JSON-RPC error -32602 (the MCP spec's "unknown tool"). Hidden
  tools are indistinguishable from missing ones, so a profile cannot probe the catalogue.

The tool list is live: ``tools.listChanged`` is declared, and when what the profile sees
changes (a tool registered or removed, an external server's list refreshed, a url server
reached late) every connected client is told ``notifications/tools/list_changed``
(``runtime.mcp._announce``).

Approvals: an ``ask`` decision elicits the client when it declared the elicitation capability,
in the connection's era:

* handshake era (``initialize``, <= 2025-11-25): a server-to-client ``elicitation/create``
  request while the call waits;
* 2026-07-28 era (no server-to-client requests): the call ends with an ``InputRequiredResult``
  carrying the elicitation; the client retries with the answer and the ``requestState`` we
  minted. The SDK's ``RequestStateBoundary`` seals that state and binds it to this tool name and
  these exact arguments (and expires it), so an answer cannot be replayed onto another call.

Otherwise the call ends as ``approval_required``. The ``ask_user`` hook elicits the same way;
in the 2026 era the asking call is run again with the answer (a tool cannot be paused across
rounds), which is why tools must ask before they change anything.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import secrets
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import runtime
from runtime.errors import ApprovalRequired, ToolFailed
from runtime.mcp._announce import AnnouncingServer, ToolsChanged
from runtime.mcp.external import SEPARATOR
from runtime.models import Decision, ToolCall, ToolResult

if TYPE_CHECKING:
    from runtime.broker import Broker

__all__ = ["SERVER_NAME", "McpToolServer", "call_result", "tool_definitions", "visible"]

log = logging.getLogger("runtime.mcp")

SERVER_NAME = "runtime"

#: The input key and request state of an approval round (2026 era); the state is sealed and
#: bound to the tool and its arguments by the SDK, so it only needs to say what was asked,
#: plus a nonce that makes each answer good for one run (a sealed state and its "yes" must
#: not be replayable to run the call again and again within the state's lifetime).
_APPROVAL_KEY = "approve"
_APPROVAL_STATE = "runtime-approval:v1"
_ASK_KEY = "answer"
_ASK_STATE = "runtime-ask:v1"


#: The streamable HTTP header naming the MCP session (the SDK's MCP_SESSION_ID_HEADER).
_MCP_SESSION_ID_HEADER = "mcp-session-id"

#: Seconds a sealed request state stays valid, and so how long a used nonce is remembered.
_STATE_TTL_S = 600.0


class _Nonces:
    """Nonces of answered rounds, remembered for the state's lifetime."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}

    def consume(self, nonce: str) -> bool:
        """True the first time ``nonce`` is seen (within the TTL), False after."""
        now = time.monotonic()
        if len(self._used) > 1024:
            self._used = {n: t for n, t in self._used.items() if now - t < _STATE_TTL_S * 2}
        if nonce in self._used:
            return False
        self._used[nonce] = now
        return True


@dataclass(slots=True)
class _Round:
    """The MCP request being served, as the approver and ask_user see it."""

    ctx: ServerRequestContext[Any, Any]
    nonces: _Nonces
    answers: dict[str, Any] = field(default_factory=dict)
    state: str | None = None
    #: (input key, request state, question) when the answer must come in a later round.
    need: tuple[str, str, types.ElicitRequest] | None = None

    def answer(self, key: str, kind: str) -> tuple[str | None, dict[str, Any]] | None:
        """The client's answer to what an earlier round asked, if this round carries it
        and it was not used before."""
        if self.state is None or key not in self.answers:
            return None
        prefix, _, nonce = self.state.rpartition(":")
        if prefix != kind or not nonce or not self.nonces.consume(nonce):
            return None
        return _answer_fields(self.answers[key])

    def ask_later(self, key: str, kind: str, message: str, schema: dict[str, Any]) -> None:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        self.need = (key, f"{kind}:{secrets.token_hex(16)}", request)


#: A context variable, not an attribute: calls from several clients (HTTP) run concurrently.
_current_round: contextvars.ContextVar[_Round | None] = contextvars.ContextVar(
    "runtime_mcp_round", default=None
)

_APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call?",
            "description": "true runs the call once; false refuses it.",
        }
    },
    "required": ["approve"],
}


def visible(broker: Broker, name: str, profile: str | None) -> bool:
    """Whether the policy shows tool ``name`` to ``profile``; unknown tools are not shown."""
    if name not in broker.catalogue:
        return False
    # The manifest's category decides for tools the policy engine does not know by name
    # (external MCP tools, user folders), when the engine offers the spec-based check.
    by_spec = getattr(broker.policy, "tool_visible_spec", None)
    if by_spec is not None:
        return bool(by_spec(broker.catalogue.get(name), profile))
    return bool(broker.policy.tool_visible(name, profile))


def tool_definitions(broker: Broker, profile: str | None = None) -> list[types.Tool]:
    """MCP tool definitions of every tool the policy lets ``profile`` see."""
    tools: list[types.Tool] = []
    for definition in broker.catalogue.export("mcp"):
        if visible(broker, definition["name"], profile):
            tools.append(types.Tool.model_validate(definition))
    return tools


def call_result(result: ToolResult) -> types.CallToolResult:
    """A ToolResult as an MCP ``CallToolResult``."""
    if result.success:
        value = result.result
        structured = value if isinstance(value, dict) else {"result": value}
        text = json.dumps(value, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=False,
        )
    assert result.error is not None
    error = {
        "type": str(result.error.type),
        "message": result.error.message,
        "details": result.error.details,
    }
    payload = {"error": error, "call_id": result.call_id, "tool": result.tool}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=True,
    )


def _client_elicits(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _can_elicit(ctx: ServerRequestContext[Any, Any] | None) -> bool:
    """Whether we can ask the client now, with a server-to-client request."""
    return ctx is not None and ctx.session.can_send_request and _client_elicits(ctx)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _answer_fields(answer: Any) -> tuple[str | None, dict[str, Any]]:
    """(action, content) of an elicitation answer, whichever model the union parsed into."""
    if isinstance(answer, dict):
        action, content = answer.get("action"), answer.get("content")
    else:
        action, content = getattr(answer, "action", None), getattr(answer, "content", None)
    return (action if isinstance(action, str) else None), (
        content if isinstance(content, dict) else {}
    )


async def _elicit(
    ctx: ServerRequestContext[Any, Any], message: str, schema: dict[str, Any]
) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


class McpToolServer:
    """Serves one broker's catalogue over MCP. ``profile`` scopes listing and policy."""

    def __init__(
        self,
        broker: Broker,
        *,
        profile: str | None = None,
        ask_timeout_s: float = 300.0,
        not_started: Mapping[str, str] | None = None,
    ) -> None:
        self.broker = broker
        self.profile = profile
        #: Tool prefix of each external MCP server that did not start -> why: a call to one
        #: of its tools says so, instead of the bare "Unknown tool" of a name never seen.
        self.not_started = dict(not_started or {})
        #: How long an approval or a question waits for the client's answer, seconds: a
        #: client that never answers must not hold a call (and its limiter slot) forever.
        self.ask_timeout_s = ask_timeout_s
        self._nonces = _Nonces()
        # The audit session of each connection without an Mcp-Session-Id (session_id).
        # Weak keys: a connection's entry goes with it.
        self._connections: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._connection_count = 0
        # Clients hear when the tools this profile sees change (_announce).
        self.tools_changed = ToolsChanged(
            broker.catalogue,
            lambda: [t.model_dump() for t in tool_definitions(broker, self.profile)],
        )
        self.server: Server[Any] = AnnouncingServer(
            SERVER_NAME,
            version=runtime.__version__,
            instructions="Tools run through a policy broker: calls are validated, checked "
            "against the policy, sandboxed and audited. Errors come back as isError results "
            "whose structuredContent.error.type says what happened.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.tools_changed.listen,
            lifespan=self.tools_changed.lifespan,
        )
        self.server.middleware.append(self.tools_changed.track)
        # Seals requestState and binds it to (method, tool, arguments) with an expiry; the key
        # lives in this process only, so a restart invalidates pending approvals (fail closed).
        self.server.middleware.append(
            RequestStateBoundary(
                RequestStateSecurity.ephemeral(ttl=_STATE_TTL_S), default_audience=SERVER_NAME
            )
        )
        # The broker asks us for approvals and user answers; both elicit the calling client.
        broker.approver = self.approve
        broker.ask_user = self.ask_user

    # -- handlers -----------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_definitions(self.broker, self.profile))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        name = params.name
        if not visible(self.broker, name, self.profile):
            prefix, sep, _ = name.partition(SEPARATOR)
            reason = self.not_started.get(prefix) if sep else None
            why = f" (its MCP server did not start: {reason})" if reason else ""
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}{why}", {"tool": name})
        # No call_id from the request id: JSON-RPC ids restart at 1 on every connection, and
        # the audit log needs ids that are unique; the broker mints them.
        call: dict[str, Any] = {"tool": name, "arguments": params.arguments or {}}
        current = _Round(
            ctx=ctx,
            nonces=self._nonces,
            answers=dict(params.input_responses or {}),
            state=params.request_state,
        )
        token = _current_round.set(current)
        try:
            result = await self.broker.call(
                call, profile=self.profile, audit_session=self.session_id(ctx)
            )
        finally:
            _current_round.reset(token)
        if current.need is not None:
            # This leg is audited as refused (approval_required / tool_error); the retry
            # carries the answer and runs the call again from the start.
            key, state, request = current.need
            return types.InputRequiredResult(input_requests={key: request}, request_state=state)
        return call_result(result)

    def session_id(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The MCP session a call came in, as the audit records name it: streamable HTTP's
        ``Mcp-Session-Id`` as ``mcp:<first 16 hex digits of its sha256>``, else one id per
        connection (``mcp-conn:<n>``: a stdio server has one connection; a stateless HTTP
        request is its own).

        Hazard: the session id is the key to a live HTTP session (whoever presents it talks
        in it), and the audit log is read and exported by others: only its digest is
        recorded, the same for every call of the session (a client that logs the raw id can
        match it by hashing).
        """
        request = ctx.request
        headers = getattr(request, "headers", None)
        if headers is not None:
            value = headers.get(_MCP_SESSION_ID_HEADER)
            # The SDK checked it against the session it serves before the handler ran.
            if isinstance(value, str) and value:
                digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
                return f"mcp:{digest[:16]}"
        conn = getattr(ctx.session, "_connection", ctx.session)
        name = self._connections.get(conn)
        if name is None:
            self._connection_count += 1
            name = self._connections[conn] = f"mcp-conn:{self._connection_count}"
        return name

    # -- elicitation --------------------------------------------------------------------------
    async def approve(self, call: ToolCall, decision: Decision) -> bool:
        """The broker's approver: ask the MCP client's user, or refuse as approval_required."""
        current = _current_round.get()
        reasons = "; ".join(decision.reasons) or decision.rule
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        message = (
            f"The policy asks before running {call.tool} ({reasons}).\n"
            f"Arguments: {arguments[:2000]}"
        )
        if current is not None and _can_elicit(current.ctx):
            try:
                with anyio.fail_after(self.ask_timeout_s):
                    reply = await _elicit(current.ctx, message, _APPROVE_SCHEMA)
            except TimeoutError as exc:
                raise ApprovalRequired(
                    f"{call.tool}: no approval within {self.ask_timeout_s:g} s",
                    rule=decision.rule,
                ) from exc
            except MCPError as exc:
                raise ApprovalRequired(
                    f"{call.tool}: approval could not be asked: {exc.message}",
                    rule=decision.rule,
                ) from exc
            action, content = _answer_fields(reply)
            return action == "accept" and content.get("approve") is True
        if current is not None and _modern(current.ctx) and _client_elicits(current.ctx):
            earlier = current.answer(_APPROVAL_KEY, _APPROVAL_STATE)
            if earlier is not None:
                action, content = earlier
                return action == "accept" and content.get("approve") is True
            current.ask_later(_APPROVAL_KEY, _APPROVAL_STATE, message, _APPROVE_SCHEMA)
            raise ApprovalRequired(
                f"{call.tool}: waiting for the client's approval (input required)",
                rule=decision.rule,
                reasons=decision.reasons,
            )
        raise ApprovalRequired(
            f"{call.tool}: policy rule {decision.rule!r} asks for approval and the MCP "
            "client cannot be asked (no elicitation support on this connection)",
            rule=decision.rule,
            reasons=decision.reasons,
        )

    def ask_user(self, question: str, options: list[str] | None) -> str:
        """The broker's ask_user: runs in a worker thread; elicits on the event loop.

        In the 2026 era the question goes back to the client as an input request and the
        call is run again, from the start, with the answer: a tool that asks must ask before
        it changes anything (the built-in ask_user and request_confirmation do).
        """
        current = _current_round.get()
        answer_schema: dict[str, Any] = {"type": "string", "title": "Answer"}
        if options:
            answer_schema["enum"] = list(options)
        schema = {"type": "object", "properties": {"answer": answer_schema}, "required": ["answer"]}
        if current is not None and _can_elicit(current.ctx):
            try:
                reply = anyio.from_thread.run(self._elicit_bounded, current.ctx, question, schema)
            except TimeoutError as exc:
                raise ToolFailed(
                    f"the user did not answer within {self.ask_timeout_s:g} s"
                ) from exc
            except MCPError as exc:
                raise ToolFailed(f"asking the user failed: {exc.message}") from exc
            action, content = _answer_fields(reply)
        elif current is not None and _modern(current.ctx) and _client_elicits(current.ctx):
            answer = current.answer(_ASK_KEY, _ASK_STATE)
            if answer is None:
                current.ask_later(_ASK_KEY, _ASK_STATE, question, schema)
                raise ToolFailed("waiting for the user's answer (input required)")
            action, content = answer
        else:
            raise ToolFailed("the MCP client cannot be asked (no elicitation on this connection)")
        if action != "accept" or not isinstance(content.get("answer"), str):
            raise ToolFailed(f"the user did not answer ({action})")
        return str(content["answer"])

    async def _elicit_bounded(
        self, ctx: ServerRequestContext[Any, Any], message: str, schema: dict[str, Any]
    ) -> types.ElicitResult:
        with anyio.fail_after(self.ask_timeout_s):
            return await _elicit(ctx, message, schema)

    # -- running ------------------------------------------------------------------------------
    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()
