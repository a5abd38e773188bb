"""The mcp backend's view of one external server, and its tools as catalogue specs.

A :class:`Connection` is everything the proxy knows of one ``[[mcp_servers]]`` entry: its
process or its URL client, the tools it listed, and the tasks that refresh them.
:func:`specs_of` turns the listed tools into :class:`~runtime.models.ToolSpec` s. The server
is hostile: its tool names, schemas and descriptions are attacker data, so names that do
not fit the catalogue's pattern and schemas that are huge are skipped (logged), the list
and each description are cut, and the server's hints are shown but never trusted.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import anyio
import mcp_types as types
from mcp.client.session import ClientSession

from runtime.backends._mcp_stdio import StdioPipes
from runtime.backends.base import Fingerprint
from runtime.mcp._client import RemoteBase
from runtime.mcp.external import SEPARATOR, ExternalServer, prefixed_name
from runtime.mcp.launch import Launch
from runtime.models import TOOL_NAME_RE, BackendKind, ToolHints, ToolSpec

__all__ = [
    "MAX_TOOLS",
    "Connection",
    "ProxySession",
    "describe",
    "list_all",
    "spec_for",
    "specs_of",
]

log = logging.getLogger("runtime.mcp.proxy")

#: Largest advertised schema (JSON bytes) we compile: a hostile server must not make the
#: broker compile megabytes of schema or pathological patterns at start-up.
_MAX_SCHEMA_BYTES = 65_536
_MAX_DESCRIPTION = 4096
#: Tools taken from one server at most.
MAX_TOOLS = 512


class ProxySession(ClientSession):
    """The SDK's client session without its own check of a call's result.

    ``ClientSession.call_tool`` checks ``structuredContent`` against the tool's output
    schema with the ``jsonschema`` package, synchronously on the event loop, with Python's
    backtracking ``re`` for ``pattern`` (and may list the tools again first). A hostile
    server's ``"pattern": "^(a+)+$"`` and a 40-character answer froze the whole broker.
    The broker checks every result against the catalogue's compiled validator anyway
    (``jsonschema_rs``: linear-time regular expressions), which the SDK's check only
    duplicated, so here it does nothing.
    """

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        return None


@dataclass(slots=True)
class Connection:
    server: ExternalServer
    launch: Launch | None = None
    session: ProxySession | None = None
    #: A started server's pipes (stdout cap, stderr log), while it runs.
    pipes: StdioPipes | None = None
    #: A url server's fingerprint, made once (``_mcp_calls.remote_fingerprint``).
    fingerprint: Fingerprint | None = None
    remote: RemoteBase | None = None
    #: A tools/list_changed arrived and is not yet handled; a refresh task is running.
    stale: bool = False
    refreshing: bool = False
    #: The refresh task's scope: the backend's close cancels it (a listing may take up to
    #: start_timeout_s, and the close must not wait for it).
    refresh_scope: anyio.CancelScope | None = None
    #: The url server was not reached at start-up for a reason that may pass (refused
    #: connections, no answer in time): a task tries again (``later_scope``, cancelled by
    #: the close like the refresh).
    retry_later: bool = False
    later_scope: anyio.CancelScope | None = None
    tools: list[types.Tool] = field(default_factory=list)
    error: str | None = None
    spawned: bool = False
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)


async def list_all(session: ProxySession) -> list[types.Tool]:
    """Every page of a started server's ``tools/list`` (at most 64 pages, MAX_TOOLS)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(64):  # a server that pages forever is cut off
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tools


def specs_of(conn: Connection) -> list[tuple[ToolSpec, str]]:
    """The catalogue specs of a server's listed tools, with their remote names."""
    wanted = set(conn.server.tools) if conn.server.tools is not None else None
    out: list[tuple[ToolSpec, str]] = []
    seen: set[str] = set()
    for tool in conn.tools[:MAX_TOOLS]:
        if wanted is not None and tool.name not in wanted:
            continue
        if tool.name in seen:
            # The first stays: a call routes by name, and one name cannot mean two schemas.
            log.warning(
                "mcp server %r: tool %r listed again; the first kept", conn.server.name, tool.name
            )
            continue
        seen.add(tool.name)
        spec = spec_for(conn.server, conn.server.tool_prefix, tool)
        if spec is not None:
            out.append((spec, tool.name))
    return out


def spec_for(server: ExternalServer, prefix: str, tool: types.Tool) -> ToolSpec | None:
    name = prefixed_name(prefix, tool.name)
    if SEPARATOR in tool.name:
        # <prefix>__<tool> splits at its first '__': "b__echo" of prefix "a" would be
        # "a__b__echo", a tool of the server whose prefix is "a__b".
        log.warning(
            "mcp server %r: tool name %r contains %r; skipped", server.name, tool.name, SEPARATOR
        )
        return None
    if not TOOL_NAME_RE.match(name):
        log.warning("mcp server %r: tool name %r does not fit; skipped", server.name, tool.name)
        return None
    schemas = [tool.input_schema, tool.output_schema]
    if any(len(json.dumps(s)) > _MAX_SCHEMA_BYTES for s in schemas if s is not None):
        log.warning("mcp server %r: schema of %r is too large; skipped", server.name, tool.name)
        return None
    ann = tool.annotations
    description = (tool.description or f"{tool.name} (MCP server {server.name})")[:_MAX_DESCRIPTION]
    return ToolSpec(
        name=name,
        description=f"[{server.name}] {description}",
        category="mcp",
        parameters=dict(tool.input_schema),
        result=dict(tool.output_schema) if tool.output_schema else None,
        backend=BackendKind.MCP,
        # The server's own hints are its claims, shown to clients; the policy decides on
        # names, never on these. External code is open-world whatever it says. Unsaid
        # hints take MCP's defaults (destructive unless read-only, which excludes it).
        hints=ToolHints(
            read_only=bool(ann and ann.read_only_hint),
            destructive=not (ann and ann.read_only_hint)
            and bool(ann is None or ann.destructive_hint is not False),
            idempotent=bool(ann and ann.idempotent_hint),
            open_world=True,
        ),
    )


def describe(exc: BaseException) -> str:
    """One line naming what went wrong. The SDK's stdio client raises exception groups (its
    anyio task groups): their own text, "unhandled errors in a TaskGroup (1 sub-exception)",
    names nothing, so the leaves are described instead."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(describe(e) for e in exc.exceptions))
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
