"""``runtime serve --mcp``: a broker, its external MCP servers, and one transport, wired up.

Order matters: the external servers are started (and their tools listed into the catalogue)
before the first ``tools/list`` can arrive, and they are stopped only after the broker has
closed, so no call is in flight on a session being torn down.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ConfigError
from runtime.mcp._connections import ConnectionLimits
from runtime.mcp._http_guard import check_allowed_host, check_allowed_origin
from runtime.mcp._progress import HEARTBEAT_S
from runtime.mcp.external import ExternalServer, load_policy
from runtime.mcp.server import McpToolServer
from runtime.mcp.transport import is_loopback, parse_host_port, serve_http, serve_stdio

if TYPE_CHECKING:
    from runtime.backends.mcp_proxy import McpProxyBackend

__all__ = ["serve"]


async def serve(
    *,
    workspace: str | Path = "workspace",
    policy: str | Path | None = None,
    audit: str | Path | None = None,
    profile: str | None = None,
    http: str | None = None,
    tool_folders: Iterable[str | Path] = (),
    sandbox_mode: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    ask_timeout_s: float = 300.0,
    allow_remote: bool = False,
    broker_options: dict[str, Any] | None = None,
    progress_interval_s: float = HEARTBEAT_S,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    http_limits: ConnectionLimits | None = None,
) -> None:
    """Serve the broker over MCP: stdio, or streamable HTTP when ``http`` is ``HOST:PORT``.

    ``broker_options`` are extra :class:`~runtime.broker.Broker` arguments (a catalogue, a
    policy object, backends); they win over the file-based ones. ``progress_interval_s``:
    seconds between progress notifications of a long call (tests shorten it).
    ``allowed_hosts`` / ``allowed_origins``: Host and Origin values served besides the
    defaults (HTTP only; ``runtime.mcp._http_guard``). ``http_limits``: bounds of the
    HTTP endpoint's connections (``runtime.mcp._connections``; tests lower them).
    """
    from runtime.broker import Broker

    address = parse_host_port(http) if http else None
    if address is not None and not allow_remote and not is_loopback(address[0]):
        # Refused before anything starts (the transport checks again).
        raise ConfigError(f"--http {http}: only loopback without --allow-remote", field="http")
    hosts = [check_allowed_host(v) for v in allowed_hosts]
    origins = [check_allowed_origin(v) for v in allowed_origins]
    if (hosts or origins) and address is None:
        raise ConfigError("--allowed-host and --allowed-origin need --http", field="http")
    servers: list[ExternalServer] = []
    policy_arg: Any = policy
    if isinstance(policy, (str, Path)):
        policy_arg, servers = load_policy(policy)
    async with contextlib.AsyncExitStack() as stack:
        proxy: McpProxyBackend | None = None
        if servers:
            # Imported here: the mcp backend imports runtime.mcp.external (a cycle at module
            # level), and only a policy with [[mcp_servers]] needs it (its HTTP client and
            # the egress gateway are ~0.1 s of a server's start before it can answer).
            from runtime.backends.mcp_proxy import McpProxyBackend

            proxy = McpProxyBackend(servers)
        options: dict[str, Any] = {
            "policy": policy_arg,
            "audit": audit,
            "tool_folders": tool_folders,
            "profile": profile,
            "sandbox_mode": sandbox_mode,
            **(broker_options or {}),
        }
        if proxy is not None:
            options["backends"] = {**options.get("backends", {}), "mcp": proxy}
        broker = Broker(workspace, **options)
        await stack.enter_async_context(broker)
        if proxy is not None:
            proxy.mode = "best_effort" if broker.sandbox_mode == "best_effort" else "strict"
            # Servers reached by url go through the gateway under the policy's [network].
            proxy.network = broker.policy.network
            proxy.redact_keys = tuple(broker.policy.redact_keys)
            await stack.enter_async_context(proxy)
            proxy.register(broker.catalogue)
        errors = proxy.errors if proxy is not None else {}
        not_started = {s.tool_prefix: errors[s.name] for s in servers if s.name in errors}
        tool_server = McpToolServer(
            broker,
            profile=profile,
            ask_timeout_s=ask_timeout_s,
            not_started=not_started,
            progress_interval_s=progress_interval_s,
        )
        if address is None:
            if on_ready is not None:
                on_ready("stdio")
            await serve_stdio(tool_server)
        else:
            await serve_http(
                tool_server,
                *address,
                on_ready=on_ready,
                allow_remote=allow_remote,
                allowed_hosts=hosts,
                allowed_origins=origins,
                limits=http_limits,
            )
