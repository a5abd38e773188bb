"""MCP: the broker as an MCP server, and external MCP servers as sandboxed tools.

* :class:`McpToolServer` — ``tools/list`` / ``tools/call`` over the broker (``server``);
* :func:`serve_stdio`, :func:`serve_http` — its transports (``transport``);
* :func:`serve` — what ``runtime serve --mcp`` runs (``app``);
* :class:`ExternalServer`, :func:`load_external_servers` — the policy's ``[[mcp_servers]]``
  (``external``), run by :class:`runtime.backends.mcp_proxy.McpProxyBackend`.

The MCP SDK is an optional dependency (the ``mcp`` extra). The names of this package are
imported on first use, so that ``runtime.mcp.external`` and ``runtime.mcp.launch`` — which
``runtime policy check`` and ``runtime doctor`` use, and which need no SDK — import
without it; only the server, its transports and the proxy need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
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

_HOME = {
    "ExternalServer": "external",
    "McpToolServer": "server",
    "call_result": "server",
    "load_external_servers": "external",
    "load_policy": "external",
    "parse_external_servers": "external",
    "serve": "app",
    "serve_http": "transport",
    "serve_stdio": "transport",
    "tool_definitions": "server",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _HOME)
