"""MCP: the broker as an MCP server, and external MCP servers as sandboxed tools.

* :class:`McpToolServer` — ``tools/list`` / ``tools/call`` over the broker (``server``);
* :func:`serve_stdio`, :func:`serve_http` — its transports (``transport``);
* :func:`serve` — what ``runtime serve --mcp`` runs (``app``);
* :class:`ExternalServer`, :func:`load_external_servers` — the policy's ``[[mcp_servers]]``
  (``external``), run by :class:`runtime.backends.mcp_proxy.McpProxyBackend`.
"""

from __future__ import annotations

from runtime.mcp.app import serve
from runtime.mcp.external import (
    ExternalServer,
    load_external_servers,
    load_policy,
    parse_external_servers,
)
from runtime.mcp.server import McpToolServer, call_result, tool_definitions
from runtime.mcp.transport import serve_http, serve_stdio

__all__ = [
    "ExternalServer",
    "McpToolServer",
    "call_result",
    "load_external_servers",
    "load_policy",
    "parse_external_servers",
    "serve",
    "serve_http",
    "serve_stdio",
    "tool_definitions",
]
