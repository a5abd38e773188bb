"""The ``mcp`` backend: tools of external MCP servers, behind the broker's policy.

Usage (the CLI's ``serve`` does this)::

    async with McpProxyBackend(servers, mode="strict") as proxy:
        async with Broker(ws, policy, backends={"mcp": proxy}) as broker:
            proxy.register(broker.catalogue)       # <prefix>__<tool> specs, backend "mcp"
            ...

Every started (``command``) server runs inside the Linux sandbox (``runtime.mcp.launch``)
under its own connection task, which owns the stdio client and the MCP session from start to
end: anyio cancel scopes must be left in the task that entered them, and broker calls arrive
from many tasks. A call is a ``tools/call`` on the shared session; the session multiplexes
concurrent requests.

A server reached by ``url`` is a client in this process
(:class:`runtime.mcp.remote.RemoteClient` for Streamable HTTP,
:class:`runtime.mcp.remote_sse.LegacySseClient` for ``transport = "sse"``; ``"auto"`` picks
one at start-up): its handshake and tool listing run at start-up, side by side with the
started servers, under the entry's ``start_timeout_s`` (a server that cannot be reached
then, refused or silent, is tried again in the background with backoff and its tools enter
the catalogue when it answers; a refusal by the rules, an HTTP error status or a malformed
answer is final until the broker restarts); its listening task (a GET stream) runs in this
backend's task group. Each call is a ``tools/call`` through the egress gateway under the
policy's ``[network]`` rules (:attr:`network`), bounded by the call's ``timeout_s`` and
``output_bytes``; reconnects and renewed sessions on the way are counted into the call's
usage (``mcp_retries``, ``mcp_sessions``), which the audit record keeps.
``notifications/tools/list_changed`` lists the server's tools again and puts them in the
catalogue :meth:`register` filled, through the same checks as at start-up.

What the audit says: the record's top-level ``backend`` is the tool's declared kind,
``mcp``, for every MCP tool whatever its transport — DESIGN §2 dispatches "by the tool's
declared kind" and §7's result ``backend`` names that kind, which is also what
``runtime tools`` lists; a second value for the same kind would split every query on it.
The precise place is the fingerprint (§6: "backend + sandbox fingerprint"): ``mcp:<name>``
with mechanisms ``egress-gateway`` for a url server, the sandbox's own for a started one.

The server is hostile: its tool names, schemas, descriptions and results are attacker data.
Names that do not fit the catalogue's pattern and schemas that are huge or invalid are
skipped (logged); results pass the broker's size cap and the advertised output schema;
a server that dies or stalls turns into ``sandbox_error`` / ``timeout`` results, never a
broker crash.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.catalogue import Catalogue
from runtime.errors import (
    ExecutionError,
    ManifestError,
    PolicyDenied,
    RuntimeToolError,
    SandboxError,
    SandboxUnavailable,
    ToolFailed,
    ToolTimeout,
)
from runtime.mcp._client import RemoteBase
from runtime.mcp.external import ExternalServer, prefixed_name
from runtime.mcp.launch import Launch, isolation_available, launch_for
from runtime.mcp.remote_sse import connect_remote
from runtime.models import TOOL_NAME_RE, BackendKind, ToolHints, ToolSpec
from runtime.policy.network import NetworkRules

__all__ = ["McpProxyBackend"]

log = logging.getLogger("runtime.mcp.proxy")

#: Largest advertised schema (JSON bytes) we compile: a hostile server must not make the
#: broker compile megabytes of schema or pathological patterns at start-up.
_MAX_SCHEMA_BYTES = 65_536
_MAX_DESCRIPTION = 4096
_MAX_TOOLS = 512
#: Least time between two listings of one server after tools/list_changed, seconds.
_REFRESH_INTERVAL_S = 1.0
#: A url server not reached at start-up is tried again after this, seconds; doubled per
#: attempt up to _LATER_MAX_S.
_LATER_FIRST_S = 0.5
_LATER_MAX_S = 30.0
#: Reasons (``SandboxError.details["reason"]``) of failures that may pass.
_TRANSIENT = frozenset({"unreachable", "no_answer", "connection_lost", "stream_ended"})


@dataclass(slots=True)
class _Connection:
    server: ExternalServer
    launch: Launch | None = None
    session: ClientSession | None = None
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


class McpProxyBackend:
    """Runs calls on external MCP servers. Open with ``async with`` before handing it to a
    broker; the broker's ``start``/``aclose`` are then no-ops / idempotent."""

    name = "mcp"

    def __init__(
        self,
        servers: list[ExternalServer],
        *,
        mode: str = "strict",
        network: NetworkRules | None = None,
    ) -> None:
        # An entry with enabled = false is never started, however the list was built.
        self._connections = [_Connection(server=s) for s in servers if s.enabled]
        #: "strict" refuses to start a server it cannot isolate; set before opening.
        self.mode = mode
        #: The policy's [network] rules for servers reached by url; set before opening.
        #: None: the default rules (nothing allowed but each entry's own origin).
        self.network = network
        self._tools: dict[str, tuple[_Connection, str]] = {}
        self._specs: list[ToolSpec] = []
        self._tg: anyio.abc.TaskGroup | None = None
        #: Where register() put the tools: a tools/list_changed refresh updates it.
        self._catalogue: Catalogue | None = None
        self._opened = False
        self._closed = False

    # -- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> McpProxyBackend:
        if self._opened:
            raise SandboxError("an McpProxyBackend can be opened once")
        self._opened = True
        # Probed once per process; blocking, so off the event loop.
        started = [c for c in self._connections if c.server.url is None]
        problem = await anyio.to_thread.run_sync(isolation_available) if started else None
        if problem is not None and self.mode == "strict":
            raise SandboxUnavailable(
                f"cannot isolate external MCP servers: {problem}", unavailable=True
            )
        self._tg = tg = anyio.create_task_group()
        await tg.__aenter__()
        try:
            # Servers start side by side: start-up costs the slowest one, not the sum.
            async with anyio.create_task_group() as starting:
                for conn in self._connections:
                    if conn.server.url is None:
                        starting.start_soon(tg.start, self._serve, conn)
                    else:
                        starting.start_soon(self._reach, conn)
        except BaseException:
            await self._shutdown()
            await self._tg.__aexit__(None, None, None)
            raise
        for conn in self._connections:
            self._collect(conn)
            if conn.retry_later:
                tg.start_soon(self._reach_later, conn)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._shutdown()
        assert self._tg is not None
        await self._tg.__aexit__(exc_type, exc, tb)

    async def start(self) -> None:
        if not self._opened:
            raise SandboxError(
                "the mcp backend was not opened: use 'async with McpProxyBackend(...)' around "
                "the broker",
                backend="mcp",
            )

    async def aclose(self) -> None:
        await self._shutdown()

    async def _shutdown(self) -> None:
        self._closed = True
        for conn in self._connections:
            conn.stop.set()
            for scope in (conn.refresh_scope, conn.later_scope):
                if scope is not None:
                    scope.cancel()
        with anyio.CancelScope(shield=True):
            for conn in self._connections:
                if conn.spawned:
                    await conn.done.wait()
                remote, conn.remote = conn.remote, None
                if remote is not None:
                    await remote.aclose()

    # -- connections --------------------------------------------------------------------------
    async def _serve(self, conn: _Connection, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own one server's process and session until asked to stop."""
        started = False
        conn.spawned = True
        try:
            conn.launch = launch = launch_for(conn.server, mode=self.mode)
            params = StdioServerParameters(
                command=launch.argv[0], args=launch.argv[1:], env=launch.env, cwd=launch.cwd
            )
            async with (
                stdio_client(params, errlog=sys.stderr) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(conn.server.start_timeout_s):
                    await session.initialize()
                    conn.tools = await _list_all(session)
                conn.session = session
                task_status.started()
                started = True
                await conn.stop.wait()
                conn.session = None
        except Exception as exc:  # a server that fails must not take the broker down
            # Its own stderr (passed through to ours) usually says why it did not start.
            where = "" if started else "stopped before it was ready (see its stderr): "
            conn.error = where + _describe(exc)
            conn.session = None
            log.warning("mcp server %r failed: %s", conn.server.name, conn.error)
        finally:
            if conn.launch is not None:
                conn.launch.cleanup()  # the process has exited: stdio_client waited for it
            conn.done.set()
            if not started:
                task_status.started()

    async def _reach(self, conn: _Connection, *, again: bool = False) -> None:
        """Handshake with and list the tools of a server reached by url (its listening
        task, if its transport has one, runs in the proxy's task group)."""
        remote: RemoteBase | None = None
        try:
            with anyio.fail_after(conn.server.start_timeout_s):
                remote, conn.tools = await connect_remote(
                    conn.server, self.network or NetworkRules(), self._tg
                )
        except TimeoutError:
            conn.error = f"no answer within {conn.server.start_timeout_s:g} s (start_timeout_s)"
            conn.retry_later = True
        except PolicyDenied as exc:  # the gateway's refusal: say which rule
            rule = exc.details.get("rule", "?")
            conn.error = f"refused by the network rules (rule {rule}): {exc.message}"
        except RuntimeToolError as exc:
            conn.error = exc.message
            # Gone or silent may pass; a bad answer, an HTTP status, a bad URL will not.
            conn.retry_later = exc.details.get("reason") in _TRANSIENT
        except Exception as exc:  # a server that fails must not take the broker down
            conn.error = _describe(exc)
        if conn.error is not None or remote is None:
            # Said once loudly; the attempts after start-up only at debug level.
            (log.debug if again else log.warning)(
                "mcp server %r not reached: %s", conn.server.name, conn.error
            )
            return
        conn.remote = remote
        remote.inbound.on_tools_changed = lambda: self._tools_changed(conn)

    def _collect(self, conn: _Connection) -> None:
        for spec, remote_name in _specs_of(conn):
            self._tools[spec.name] = (conn, remote_name)
            self._specs.append(spec)

    async def _reach_later(self, conn: _Connection) -> None:
        """Try a url server that was not there at start-up again, with backoff (from
        :data:`_LATER_FIRST_S`, doubling to :data:`_LATER_MAX_S`) until it answers, the
        failure stops being one that may pass, or the backend closes. Its tools then enter
        the catalogue through the same checks as at start-up."""
        delay = _LATER_FIRST_S
        try:
            with anyio.CancelScope() as conn.later_scope:
                while conn.retry_later and not self._closed:
                    await anyio.sleep(delay)
                    delay = min(delay * 2, _LATER_MAX_S)
                    conn.error, conn.retry_later = None, False
                    await self._reach(conn, again=True)
                    if conn.remote is not None:
                        self._replace_tools(conn)
                        log.info("mcp server %r reached after start-up", conn.server.name)
        finally:
            conn.later_scope = None

    # -- tools/list_changed -------------------------------------------------------------------
    def _tools_changed(self, conn: _Connection) -> None:
        """The server's hook for ``notifications/tools/list_changed``: one refresh task per
        server at a time; notifications during it make it list once more, no more."""
        conn.stale = True
        if conn.refreshing or self._closed or self._tg is None:
            return
        conn.refreshing = True
        self._tg.start_soon(self._refresh, conn)

    async def _refresh(self, conn: _Connection) -> None:
        """List the server's tools again and put them in the catalogue through the same
        checks as at start-up (name pattern, schema size, the entry's ``tools``, the
        catalogue's own schema check). A listing that fails keeps the tools as they were."""
        try:
            with anyio.CancelScope() as conn.refresh_scope:
                if not self._closed:
                    await self._refresh_loop(conn)
        finally:
            conn.refreshing = False
            conn.refresh_scope = None

    async def _refresh_loop(self, conn: _Connection) -> None:
        while conn.stale and not self._closed:
            conn.stale = False
            remote = conn.remote
            if remote is None:
                return
            try:
                conn.tools = await remote.list_tools()
            except (RuntimeToolError, TimeoutError) as exc:
                text = exc.message if isinstance(exc, RuntimeToolError) else "timed out"
                log.warning("mcp server %r: tools not listed again: %s", conn.server.name, text)
                return
            except Exception as exc:  # a server that fails must not take the broker down
                log.warning(
                    "mcp server %r: tools not listed again: %s",
                    conn.server.name,
                    _describe(exc),
                )
                return
            self._replace_tools(conn)
            # At most one listing per second per server, however often it notifies.
            await anyio.sleep(_REFRESH_INTERVAL_S)

    def _replace_tools(self, conn: _Connection) -> None:
        fresh = _specs_of(conn)
        names = {spec.name for spec, _ in fresh}
        old = {name for name, (owner, _) in self._tools.items() if owner is conn}
        catalogue = self._catalogue
        for name in old - names:
            self._tools.pop(name, None)
            if catalogue is not None and name in catalogue:
                catalogue.unregister(name)
        self._specs = [s for s in self._specs if s.name not in old] + [s for s, _ in fresh]
        for spec, remote_name in fresh:
            if catalogue is not None:
                try:
                    # Replacing only our own earlier spec: a name the catalogue holds for
                    # another tool is refused as at start-up.
                    catalogue.register(spec, replace=spec.name in old)
                except ManifestError as exc:
                    log.warning("mcp tool %s skipped: %s", spec.name, exc.message)
                    self._specs = [s for s in self._specs if s.name != spec.name]
                    continue
            self._tools[spec.name] = (conn, remote_name)
        log.info("mcp server %r: tools listed again: %d", conn.server.name, len(fresh))

    # -- catalogue ----------------------------------------------------------------------------
    @property
    def specs(self) -> list[ToolSpec]:
        return list(self._specs)

    @property
    def transports(self) -> dict[str, str]:
        """The transport each connected url server speaks (``streamable-http`` or ``sse``:
        what ``auto`` settled on), by server name."""
        return {c.server.name: c.remote.transport for c in self._connections if c.remote}

    @property
    def errors(self) -> dict[str, str]:
        """Servers that could not be started, by name, with the reason."""
        return {c.server.name: c.error for c in self._connections if c.error is not None}

    def register(self, catalogue: Catalogue) -> list[str]:
        """Register every imported tool; returns the names. A schema the catalogue refuses
        is skipped with a warning (the server is untrusted; its mistakes are not ours)."""
        self._catalogue = catalogue
        names: list[str] = []
        for spec in self._specs:
            try:
                catalogue.register(spec)
            except ManifestError as exc:
                log.warning("mcp tool %s skipped: %s", spec.name, exc.message)
                self._tools.pop(spec.name, None)
                continue
            names.append(spec.name)
        return names

    # -- calls --------------------------------------------------------------------------------
    def fingerprint(self) -> Fingerprint:
        for conn in self._connections:
            if conn.launch is not None:
                return conn.launch.fingerprint
            if conn.remote is not None:
                return self._remote_fingerprint(conn)
        return Fingerprint(backend="mcp", mode=self.mode)

    def _remote_fingerprint(self, conn: _Connection) -> Fingerprint:
        # Nothing of the server runs here: the wall is the gateway (rules, pinning, caps).
        return Fingerprint(
            backend=f"mcp:{conn.server.name}", mechanisms=("egress-gateway",), mode=self.mode
        )

    async def run(self, request: ExecRequest) -> ExecOutcome:
        entry = self._tools.get(request.spec.name)
        if entry is None:
            raise SandboxError(f"{request.spec.name}: no MCP server provides this tool")
        conn, remote = entry
        if conn.server.url is not None:
            return await self._run_remote(conn, remote, request)
        session = conn.session
        if session is None or self._closed:
            raise SandboxError(
                f"{request.spec.name}: MCP server {conn.server.name!r} is not running"
                + (f" ({conn.error})" if conn.error else ""),
                server=conn.server.name,
            )
        t0 = anyio.current_time()
        try:
            with anyio.fail_after(request.limits.timeout_s):
                result = await session.call_tool(remote, dict(request.arguments))
        except TimeoutError as exc:
            raise ToolTimeout(
                f"{request.spec.name}: no answer within {request.limits.timeout_s:g} s",
                limit_s=request.limits.timeout_s,
            ) from exc
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                # The server died (or closed its stdout): later calls fail fast, clearly.
                conn.session = None
                conn.error = "the server process exited"
                raise SandboxError(
                    f"{request.spec.name}: MCP server {conn.server.name!r} exited",
                    server=conn.server.name,
                ) from exc
            raise ToolFailed(f"{request.spec.name}: {exc.message}", code=exc.code) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise SandboxError(
                f"{request.spec.name}: MCP server {conn.server.name!r} went away",
                server=conn.server.name,
            ) from exc
        except RuntimeError as exc:  # the SDK's output-schema check of the server's result
            raise ToolFailed(f"{request.spec.name}: {exc}") from exc
        if not isinstance(result, types.CallToolResult):
            raise ToolFailed(f"{request.spec.name}: the server asked for input mid-call")
        usage = {"wall_ms": (anyio.current_time() - t0) * 1000}
        if result.is_error:
            raise ToolFailed(f"{request.spec.name}: {_text_of(result) or 'tool error'}")
        fingerprint = conn.launch.fingerprint if conn.launch else None
        return ExecOutcome(result=_value_of(result), usage=usage, fingerprint=fingerprint)

    async def _run_remote(
        self, conn: _Connection, remote: str, request: ExecRequest
    ) -> ExecOutcome:
        client = conn.remote
        if client is None or self._closed:
            raise SandboxError(
                f"{request.spec.name}: MCP server {conn.server.name!r} is not connected"
                + (f" ({conn.error})" if conn.error else ""),
                server=conn.server.name,
            )
        t0 = anyio.current_time()
        # What happened on the way (requests sent again, sessions renewed) goes into the
        # call's usage, which the audit record keeps, whether the call succeeds or not.
        trace: dict[str, int] = {}
        try:
            result = await client.call_tool(
                remote,
                dict(request.arguments),
                timeout_s=request.limits.timeout_s,
                max_bytes=request.limits.output_bytes,
                trace=trace,
            )
        except TimeoutError as exc:
            raise ToolTimeout(
                f"{request.spec.name}: no answer within {request.limits.timeout_s:g} s",
                limit_s=request.limits.timeout_s,
                usage=dict(trace),
            ) from exc
        except ExecutionError as exc:
            exc.usage.update(trace)
            raise
        usage: dict[str, Any] = {"wall_ms": (anyio.current_time() - t0) * 1000, **trace}
        if result.is_error:
            text = client.scrub(_text_of(result)) or "tool error"
            raise ToolFailed(f"{request.spec.name}: {text}", usage=usage)
        return ExecOutcome(
            result=_value_of(result), usage=usage, fingerprint=self._remote_fingerprint(conn)
        )


async def _list_all(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(64):  # a server that pages forever is cut off
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= _MAX_TOOLS:
            break
    return tools


def _specs_of(conn: _Connection) -> list[tuple[ToolSpec, str]]:
    """The catalogue specs of a server's listed tools, with their remote names."""
    wanted = set(conn.server.tools) if conn.server.tools is not None else None
    out: list[tuple[ToolSpec, str]] = []
    for tool in conn.tools[:_MAX_TOOLS]:
        if wanted is not None and tool.name not in wanted:
            continue
        spec = _spec_for(conn.server, conn.server.tool_prefix, tool)
        if spec is not None:
            out.append((spec, tool.name))
    return out


def _spec_for(server: ExternalServer, prefix: str, tool: types.Tool) -> ToolSpec | None:
    name = prefixed_name(prefix, tool.name)
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
        # names, never on these. External code is open-world whatever it says.
        hints=ToolHints(
            read_only=bool(ann and ann.read_only_hint),
            destructive=bool(ann is None or ann.destructive_hint is not False),
            idempotent=bool(ann and ann.idempotent_hint),
            open_world=True,
        ),
    )


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))[:4096]


def _value_of(result: types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    return {
        "text": "\n".join(c.text for c in result.content if isinstance(c, types.TextContent)),
        "content": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content
        ],
    }


def _describe(exc: BaseException) -> str:
    """One line naming what went wrong. The SDK's stdio client raises exception groups (its
    anyio task groups): their own text, "unhandled errors in a TaskGroup (1 sub-exception)",
    names nothing, so the leaves are described instead."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_describe(e) for e in exc.exceptions))
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
