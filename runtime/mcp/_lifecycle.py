"""The MCP lifecycle of a handshake-era connection (stdio, a Streamable HTTP session),
kept by server middleware in front of the SDK's own checks.

* ``initialize`` is the connection's first interaction, once. A second one in a live
  session was accepted and renegotiated it: over HTTP a 2025-06-18 session re-initialized
  at 2024-11-05 then refused its owner's requests (400, the MCP-Protocol-Version check),
  and on stdio a re-initialize without capabilities dropped the client's elicitation (its
  approvals became ``approval_required``). It is now Invalid Request (-32600), "already
  initialized", and nothing of the session changes (the SDK commits an ``initialize``
  only when the middleware chain succeeds).
* A request other than ``ping`` before ``initialize`` got the SDK's -32602 "Invalid
  request parameters", which blames parameters that may be right. It is now Invalid
  Request (-32600) saying the connection is not initialized. Why -32600: the request is
  not valid at this point of the protocol (what JSON-RPC's Invalid Request names);
  LSP's -32002 "server not initialized" is MCP's "resource not found", and -32602 says
  the parameters are wrong. A method the server does not serve stays the SDK's -32601,
  whatever the state (clients probe a server with it before the handshake).
* ``notifications/initialized`` counts only after an answered ``initialize``. The SDK
  takes a bare one as the whole handshake (its ``initialize_accepted``), which let a stdio
  client skip ``initialize``: its requests were served with nothing negotiated. Such a
  notification is now dropped, as the SDK drops other notifications that come too early,
  so the connection stays uninitialized (its requests get "not initialized", and it may
  still ``initialize``). Over HTTP a session is only opened by ``initialize``, so only
  stdio could reach this.

The 2026-07-28 era has no handshake: its connections are born ready, and the SDK refuses
``initialize`` on them itself, so nothing here applies to them.
"""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

__all__ = ["LifecycleGate"]

log = logging.getLogger("runtime.mcp")

#: What a client may send before ``initialize`` (MCP lifecycle: pings only).
_BEFORE_INITIALIZE = frozenset({"initialize", "ping"})


class LifecycleGate:
    """Server middleware: refuses a repeated ``initialize`` and a request that comes
    before the first one (module docstring). Install it first in ``server.middleware``
    so that no other middleware sees a refused message as served."""

    def __init__(self, server: Server[Any]) -> None:
        self._server = server

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        conn = getattr(ctx.session, "_connection", None)
        if conn is None:
            return await call_next(ctx)
        if ctx.request_id is None:  # a notification: the SDK's rules, but for one
            if ctx.method == "notifications/initialized" and _no_handshake(conn):
                log.debug("dropped notifications/initialized: no initialize was answered")
                return None
            return await call_next(ctx)
        if ctx.method == "initialize":
            # client_params is set when an initialize was accepted (committed by the SDK
            # after this chain succeeds).
            if getattr(conn, "client_params", None) is not None:
                raise MCPError(
                    code=types.INVALID_REQUEST,
                    message="already initialized: initialize is accepted once per "
                    "connection or session; open a new one to negotiate again",
                )
        elif (
            ctx.method not in _BEFORE_INITIALIZE
            and not getattr(conn, "initialize_accepted", True)
            and self._server.get_request_handler(ctx.method) is not None
        ):
            raise MCPError(
                code=types.INVALID_REQUEST,
                message=f"not initialized: {ctx.method} was sent before initialize; "
                "send initialize first (only ping may come before it)",
            )
        return await call_next(ctx)


def _no_handshake(conn: Any) -> bool:
    """Whether ``conn`` is a handshake-era connection that no ``initialize`` has opened:
    no client parameters negotiated and not initialized. A 2026-era connection is born
    initialized (``Connection.from_envelope``), with or without client parameters, so it
    never counts here."""
    initialized = getattr(conn, "initialized", None)
    born_ready = initialized is not None and initialized.is_set()
    return getattr(conn, "client_params", None) is None and not born_ready
