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

Queueing: while every broker slot (``[limits] max_concurrent``) is taken, a call waits in
its MCP session's queue (the Streamable HTTP session the SDK serves it in; a stdio
connection is one session; requests outside any session, the stateless 2026-era ones over
HTTP, wait in their peer address's queue: :meth:`McpToolServer.queue_key`); queues
are served in turn, and a session's call past ``[limits] max_queued`` waiting ones (or past
``max_queued_total`` waiting in all sessions) fails at once as ``resource_limit`` (audited)
instead of queueing without limit (``runtime.broker.limiter``). A client's disconnecting does
not cancel its calls: the MCP spec says so (it may resume the stream, or cancel with
``notifications/cancelled``); a session ended by DELETE does, its running and queued calls
alike.

Approvals: an ``ask`` decision, and the ``ask_user`` hook, elicit the calling client when it
declared the elicitation capability, in the connection's era (a server-to-client request, or
an ``InputRequiredResult`` answered in a retry); otherwise the call ends as
``approval_required`` (``runtime.mcp._approval``, which holds that side).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError

import runtime
from runtime._depth import RESULT_MAX_DEPTH, nests_deeper
from runtime.broker.limiter import queue_scope
from runtime.catalogue import export_tool
from runtime.errors import ErrorType, ToolNotFound
from runtime.mcp._announce import AnnouncingServer, ToolsChanged
from runtime.mcp._approval import STATE_TTL_S, Approvals
from runtime.mcp._http_guard import SessionVersions
from runtime.mcp._icon import SERVER_ICONS
from runtime.mcp._lifecycle import LifecycleGate
from runtime.mcp._progress import HEARTBEAT_S, heartbeat
from runtime.mcp.external import SEPARATOR
from runtime.models import ErrorInfo, ToolResult

if TYPE_CHECKING:
    from runtime.broker import Broker

__all__ = ["SERVER_NAME", "McpToolServer", "call_result", "tool_definitions", "visible"]

log = logging.getLogger("runtime.mcp")

SERVER_NAME = "runtime"


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
    """MCP tool definitions of every tool the policy lets ``profile`` see, annotated by
    the catalogue's one rule (``runtime.catalogue.export``) with what this host's sandbox
    gives a program: its network is walled off in strict mode (which requires the
    namespaces and seccomp that do), and in best_effort when the host has either."""
    tools: list[types.Tool] = []
    walled: bool | None = None
    for spec in broker.catalogue.list():
        if not visible(broker, spec.name, profile):
            continue
        if walled is None and spec.sandbox.exec:  # probed only when it matters
            walled = broker.sandbox_mode == "strict" or _host_walls_network()
        definition = export_tool(spec, "mcp", network_walled=walled is not False)
        tools.append(types.Tool.model_validate(definition))
    return tools


@functools.cache
def _host_walls_network() -> bool:
    """Whether the sandbox on this host keeps a program off the network: a network
    namespace (part of the user-namespace probe) or the seccomp filter, which allows
    AF_UNIX sockets only. Probed once (a forked child tries the namespaces)."""
    from runtime.backends.sandbox.probe import probe_host

    caps = probe_host()
    return caps.arch_supported and (caps.user_namespaces or caps.seccomp_filter)


def call_result(result: ToolResult) -> types.CallToolResult:
    """A ToolResult as an MCP ``CallToolResult``.

    Hazard: the SDK serialises what this returns after the handler returned, and a failure
    there (a result nested past pydantic's 255 levels) reached the client as a JSON-RPC
    error with code 0, the call audited as a success. The broker refuses results nested
    deeper than ``RESULT_MAX_DEPTH``; one that still is, or whose JSON cannot be written,
    is answered here as an ``internal_error`` result (``isError``)."""
    if result.success:
        value = result.result
        structured = value if isinstance(value, dict) else {"result": value}
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
            # more brackets than the limit (inside strings too) before any walk
            if text.count("[") + text.count("{") > RESULT_MAX_DEPTH and nests_deeper(
                value, RESULT_MAX_DEPTH
            ):
                raise ValueError(f"nested deeper than {RESULT_MAX_DEPTH} levels")
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=text)],
                structured_content=structured,
                is_error=False,
            )
        except (ValueError, TypeError, RecursionError) as exc:
            log.error("result of %s not sent: %s", result.call_id, exc)
            message = f"{result.tool}: the result could not be sent as JSON ({str(exc)[:200]})"
            result = result.model_copy(
                update={
                    "success": False,
                    "result": None,
                    "error": ErrorInfo(type=ErrorType.INTERNAL_ERROR, message=message),
                }
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


class McpToolServer:
    """Serves one broker's catalogue over MCP. ``profile`` scopes listing and policy."""

    def __init__(
        self,
        broker: Broker,
        *,
        profile: str | None = None,
        ask_timeout_s: float = 300.0,
        not_started: Mapping[str, str] | None = None,
        progress_interval_s: float = HEARTBEAT_S,
    ) -> None:
        self.broker = broker
        self.profile = profile
        #: Seconds between progress notifications of a long call that asked for them.
        self.progress_interval_s = progress_interval_s
        #: Tool prefix of each external MCP server that did not start -> why: a call to one
        #: of its tools says so, instead of the bare "Unknown tool" of a name never seen.
        self.not_started = dict(not_started or {})
        #: Calls of one MCP session (of one peer, for stateless requests: queue_key) that
        #: may wait for a broker slot; one more fails at once with resource_limit (policy
        #: ``[limits] max_queued``). Waiting sessions are served
        #: in turn (runtime.broker.limiter): a session's queue never delays another's call
        #: by more than one call per turn.
        self.max_queued: int | None = broker.policy.max_queued
        #: Calls of all sessions together that may wait (``[limits] max_queued_total``): a
        #: client opening session after session meets this bound instead of none.
        self.max_queued_total: int | None = broker.policy.max_queued_total
        #: The broker's approver and ask_user: they elicit the calling client (_approval).
        self.approvals = Approvals(ask_timeout_s, roles=self._arg_roles)
        # The audit session of each connection without an Mcp-Session-Id (session_id).
        # Weak keys: a connection's entry goes with it.
        self._connections: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._connection_count = 0
        # A finalizer per connection that forgets its session's environment (_end_with).
        self._ending: weakref.WeakKeyDictionary[Any, weakref.finalize[Any, Any]] = (
            weakref.WeakKeyDictionary()
        )
        # Clients hear when the tools this profile sees change (_announce).
        self.tools_changed = ToolsChanged(
            broker.catalogue,
            lambda: [t.model_dump() for t in tool_definitions(broker, self.profile)],
        )
        self.server: Server[Any] = AnnouncingServer(
            SERVER_NAME,
            version=runtime.__version__,
            icons=SERVER_ICONS,
            instructions="Tools run through a policy broker: calls are validated, checked "
            "against the policy, sandboxed and audited. Errors come back as isError results "
            "whose structuredContent.error.type says what happened.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=self.tools_changed.listen,
            lifespan=self.tools_changed.lifespan,
        )
        # First, outermost: a repeated initialize, or a request before the first one, is
        # refused before any other middleware sees it (runtime.mcp._lifecycle).
        self.server.middleware.append(LifecycleGate(self.server))
        self.server.middleware.append(self.tools_changed.track)
        # The version each HTTP session negotiated, for its MCP-Protocol-Version check.
        self.session_versions = SessionVersions()
        self.server.middleware.append(self.session_versions.track)
        # Seals requestState and binds it to (method, tool, arguments) with an expiry; the key
        # lives in this process only, so a restart invalidates pending approvals (fail closed).
        self.server.middleware.append(
            RequestStateBoundary(
                RequestStateSecurity.ephemeral(ttl=STATE_TTL_S), default_audience=SERVER_NAME
            )
        )
        # The broker asks us for approvals and user answers; both elicit the calling client.
        self.approve = broker.approver = self.approvals.approve
        self.ask_user = broker.ask_user = self.approvals.ask_user

    def _arg_roles(self, tool: str) -> Mapping[str, str]:
        """The arguments of ``tool`` that decide what it touches (its manifest's
        arg_roles), which an approval shows first and whole."""
        try:
            return dict(self.broker.catalogue.get(tool).arg_roles)
        except ToolNotFound:  # a tool gone since the call began: show every argument alike
            return {}

    @property
    def ask_timeout_s(self) -> float:
        """How long an approval or a question waits for the client's answer, seconds."""
        return self.approvals.ask_timeout_s

    @ask_timeout_s.setter
    def ask_timeout_s(self, value: float) -> None:
        self.approvals.ask_timeout_s = value

    # -- handlers -----------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if params is not None and params.cursor is not None:
            # Every tool comes in one page, so no cursor was ever issued: the spec's answer
            # to an invalid cursor is -32602, not the first page again (a paginating client
            # would list every tool twice, or loop).
            raise MCPError(
                types.INVALID_PARAMS,
                "Invalid cursor: this server lists every tool in one page (no nextCursor)",
                {"cursor": params.cursor[:200]},
            )
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
        session = self.session_id(ctx)
        self._end_with(ctx, session)
        with (
            self.approvals.serving(ctx, params) as current,
            queue_scope(self.queue_key(ctx, session), self.max_queued, self.max_queued_total),
        ):
            async with heartbeat(ctx, name, self.progress_interval_s) as on_run:
                result = await self.broker.call(
                    call, profile=self.profile, audit_session=session, on_run=on_run
                )
        if current.need is not None:
            # This leg is audited as refused (approval_required / tool_error); the retry
            # carries the answer and runs the call again from the start.
            key, state, request = current.need
            return types.InputRequiredResult(input_requests={key: request}, request_state=state)
        return call_result(result)

    def session_id(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The MCP session a call came in, as the audit records name it: the Streamable
        HTTP session the SDK serves it in (handshake era), as ``mcp:<first 16 hex digits
        of its id's sha256>``, else one id per connection (``mcp-conn:<n>``: a stdio
        server has one connection; a stateless HTTP request, 2026-07-28 era included, is
        its own).

        Why not the ``Mcp-Session-Id`` header: the SDK checks it against a live session
        only for the handshake era; a 2026-era request may carry any value, and it chose
        the call's audit session and limiter queue (another client's, or a new one per
        call to get round ``max_queued``). The id taken here is the one of the session
        the SDK routed the request to.

        Hazard: the session id is the key to a live HTTP session (whoever presents it talks
        in it), and the audit log is read and exported by others: only its digest is
        recorded, the same for every call of the session (a client that logs the raw id can
        match it by hashing).
        """
        conn = getattr(ctx.session, "_connection", ctx.session)
        served = getattr(conn, "session_id", None)
        if isinstance(served, str) and served:
            digest = hashlib.sha256(served.encode("utf-8", "surrogatepass")).hexdigest()
            return f"mcp:{digest[:16]}"
        name = self._connections.get(conn)
        if name is None:
            self._connection_count += 1
            name = self._connections[conn] = f"mcp-conn:{self._connection_count}"
        return name

    @staticmethod
    def queue_key(ctx: ServerRequestContext[Any, Any], session: str) -> str:
        """The limiter queue a call waits in (``max_queued`` is per queue; queues are
        served in turn): its MCP session's (``session``, :meth:`session_id`), or, for an
        HTTP request outside any session (2026-07-28 era: stateless), its peer's
        (``mcp-peer:<address>``).

        Why: each stateless request is a connection of its own, so keyed by its session
        it had a queue of its own, and one client sending many filled ``max_queued_total``
        alone. Keyed by peer, it meets ``max_queued`` as a session does.

        Hazard: the address is the socket's (``runtime.mcp.transport`` turns uvicorn's
        X-Forwarded-For handling off, so a header cannot pick a fresh queue per request);
        clients behind one proxy, or all local clients, are one peer. The endpoint
        authenticates no one, so there is no client identity to key by instead.
        """
        if not session.startswith("mcp-conn:"):
            return session  # a Streamable HTTP session
        client = getattr(getattr(ctx, "request", None), "client", None)
        host = getattr(client, "host", None)
        if not isinstance(host, str) or not host:
            return session  # stdio: one connection, one session
        return f"mcp-peer:{host}"

    def _end_with(self, ctx: ServerRequestContext[Any, Any], session: str) -> None:
        """The broker forgets ``session``'s environment (``audit_session`` scopes it) once
        its connection is gone: the HTTP session ended (DELETE, idle) or the stdio client
        left. Once per connection."""
        conn = getattr(ctx.session, "_connection", ctx.session)
        try:
            if conn in self._ending:
                return
            self._ending[conn] = weakref.finalize(conn, self.broker.end_session, session)
        except TypeError:  # not weakly referable: its environment lives with the broker
            return

    # -- running ------------------------------------------------------------------------------
    def initialization_options(self) -> Any:
        return self.server.create_initialization_options()
