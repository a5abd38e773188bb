"""The ``mcp`` backend: tools of external MCP servers, behind the broker's policy.

Usage (the CLI's ``serve`` does this)::

    async with McpProxyBackend(servers, mode="strict") as proxy:
        async with Broker(ws, policy, backends={"mcp": proxy}) as broker:
            proxy.register(broker.catalogue)       # <prefix>__<tool> specs, backend "mcp"
            ...

Every started (``command``) server runs inside the Linux sandbox (``runtime.mcp.launch``)
under its own connection task, which owns its pipes (``_mcp_stdio``: stderr logged within a
budget, stdout lines capped; never the broker's own descriptors) and the MCP session from
start to end: anyio cancel scopes must be left in the task that entered them, and broker
calls arrive from many tasks. A call is a ``tools/call`` on the shared session; the session
multiplexes concurrent requests.

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
usage (``mcp_retries``, ``mcp_sessions``, and ``egress``, the requests made of a url server
for the call: runtime._egress_log), which the audit record keeps.
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
broker crash. Here: the servers' lifecycles and their tools in the catalogue;
``_mcp_tools``: a server's record and its tools as specs; ``_mcp_calls``: one call;
``_mcp_stdio``: a started server's pipes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from types import TracebackType

import anyio
import anyio.abc

from runtime.backends._mcp_calls import call_remote, call_started, remote_fingerprint
from runtime.backends._mcp_stdio import StdioPipes, open_stdio
from runtime.backends._mcp_tools import Connection, ProxySession, describe, list_all, specs_of
from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.catalogue import Catalogue
from runtime.errors import (
    ManifestError,
    PolicyDenied,
    RuntimeToolError,
    SandboxError,
    SandboxUnavailable,
)
from runtime.mcp._client import RemoteBase
from runtime.mcp.external import ExternalServer
from runtime.mcp.launch import isolation_available, launch_for
from runtime.mcp.remote_sse import connect_remote
from runtime.models import ToolSpec
from runtime.policy.network import NetworkRules

__all__ = ["McpProxyBackend"]

log = logging.getLogger("runtime.mcp.proxy")

#: Least time between two listings of one server after tools/list_changed, seconds.
_REFRESH_INTERVAL_S = 1.0
#: A url server not reached at start-up is tried again after this, seconds; doubled per
#: attempt up to _LATER_MAX_S.
_LATER_FIRST_S = 0.5
_LATER_MAX_S = 30.0
#: Reasons (``SandboxError.details["reason"]``) of failures that may pass.
_TRANSIENT = frozenset({"unreachable", "no_answer", "connection_lost", "stream_ended"})


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
        redact_keys: Iterable[str] = (),
    ) -> None:
        # An entry with enabled = false is never started, however the list was built.
        self._connections = [Connection(server=s) for s in servers if s.enabled]
        #: "strict" refuses to start a server it cannot isolate; set before opening.
        self.mode = mode
        #: The policy's [network] rules for servers reached by url; set before opening.
        #: None: the default rules (nothing allowed but each entry's own origin).
        self.network = network
        #: The policy's ``[audit] redact`` names, for the URLs the url servers' calls log
        #: in ``usage.egress`` (as the broker's own egress log hides them); set before
        #: opening.
        self.redact_keys: tuple[str, ...] = tuple(redact_keys)
        self._tools: dict[str, tuple[Connection, str]] = {}
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
    async def _serve(self, conn: Connection, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own one server's process and session until asked to stop, or until its stdout
        ends (it exited, or sent a line past its cap: see ``_mcp_stdio``)."""
        started = False
        conn.spawned = True
        conn.pipes = pipes = StdioPipes(conn.server.name)
        try:
            conn.launch = launch = launch_for(conn.server, mode=self.mode)
            async with (
                open_stdio(launch, pipes) as (read, write),
                ProxySession(read, write) as session,
            ):
                with anyio.fail_after(conn.server.start_timeout_s):
                    await session.initialize()
                    conn.tools = await list_all(session)
                pipes.listed()
                conn.session = session
                task_status.started()
                started = True
                async with anyio.create_task_group() as waiting:

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        waiting.cancel_scope.cancel()

                    waiting.start_soon(until, conn.stop)
                    waiting.start_soon(until, pipes.ended)
                conn.session = None
                if pipes.over is not None:
                    conn.error = pipes.overflow()
                elif not conn.stop.is_set():
                    conn.error = "the server process exited"
        except Exception as exc:  # a server that fails must not take the broker down
            conn.error = describe(exc)
            if not started:
                # Its stderr (logged at INFO) usually says why it did not start.
                said = " | ".join(pipes.tail)
                conn.error = (
                    "stopped before it was ready"
                    + (f" (its stderr: {said})" if said else "")
                    + f": {conn.error}"
                )
            conn.session = None
            log.warning("mcp server %r failed: %s", conn.server.name, conn.error)
        finally:
            if conn.launch is not None:
                conn.launch.cleanup()  # the process has exited: open_stdio waited for it
            conn.done.set()
            if not started:
                task_status.started()

    async def _reach(self, conn: Connection, *, again: bool = False) -> None:
        """Handshake with and list the tools of a server reached by url (its listening
        task, if its transport has one, runs in the proxy's task group)."""
        remote: RemoteBase | None = None
        try:
            with anyio.fail_after(conn.server.start_timeout_s):
                remote, conn.tools = await connect_remote(
                    conn.server,
                    self.network or NetworkRules(),
                    self._tg,
                    redact_keys=self.redact_keys,
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
            conn.error = describe(exc)
        if conn.error is not None or remote is None:
            # Said once loudly; the attempts after start-up only at debug level.
            (log.debug if again else log.warning)(
                "mcp server %r not reached: %s", conn.server.name, conn.error
            )
            return
        conn.remote = remote
        remote.inbound.on_tools_changed = lambda: self._tools_changed(conn)

    def _collect(self, conn: Connection) -> None:
        for spec, remote_name in self._own(conn, specs_of(conn)):
            self._tools[spec.name] = (conn, remote_name)
            self._specs.append(spec)

    def _own(
        self, conn: Connection, fresh: list[tuple[ToolSpec, str]]
    ) -> list[tuple[ToolSpec, str]]:
        """``fresh`` without the names another server's tools hold (the first server keeps
        a name: a call is routed by name). The policy's prefix rules keep names apart; this
        holds for servers given in code too."""
        kept: list[tuple[ToolSpec, str]] = []
        for spec, remote_name in fresh:
            owner = self._tools.get(spec.name)
            if owner is not None and owner[0] is not conn:
                log.warning(
                    "mcp server %r: tool %s skipped: server %r provides it",
                    conn.server.name,
                    spec.name,
                    owner[0].server.name,
                )
                continue
            kept.append((spec, remote_name))
        return kept

    async def _reach_later(self, conn: Connection) -> None:
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
    def _tools_changed(self, conn: Connection) -> None:
        """The server's hook for ``notifications/tools/list_changed``: one refresh task per
        server at a time; notifications during it make it list once more, no more."""
        conn.stale = True
        if conn.refreshing or self._closed or self._tg is None:
            return
        conn.refreshing = True
        self._tg.start_soon(self._refresh, conn)

    async def _refresh(self, conn: Connection) -> None:
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

    async def _refresh_loop(self, conn: Connection) -> None:
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
                    describe(exc),
                )
                return
            self._replace_tools(conn)
            # At most one listing per second per server, however often it notifies.
            await anyio.sleep(_REFRESH_INTERVAL_S)

    def _replace_tools(self, conn: Connection) -> None:
        fresh = self._own(conn, specs_of(conn))
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
                    self._specs = [s for s in self._specs if s is not spec]
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
                # Its route only: names are unique among the specs (_own, specs_of).
                self._tools.pop(spec.name, None)
                continue
            names.append(spec.name)
        return names

    # -- calls --------------------------------------------------------------------------------
    def fingerprint(self) -> Fingerprint:
        """The first server's (no tool named). The broker asks :meth:`fingerprint_for`."""
        for conn in self._connections:
            if conn.launch is not None:
                return conn.launch.fingerprint
            if conn.remote is not None:
                return remote_fingerprint(conn, self.mode)
        return Fingerprint(backend="mcp", mode=self.mode)

    def fingerprint_for(self, spec: ToolSpec) -> Fingerprint:
        """Where ``spec``'s calls run: its server's sandbox (a started server: what its
        launch has, ``netns`` or not), or the gateway (a url server). It was the first
        server's for every tool, so a ``network = true`` server's calls were recorded as
        behind an empty network namespace, a url server's as a stdio server's."""
        entry = self._tools.get(spec.name)
        if entry is None:  # no server provides it (the call will say so)
            return Fingerprint(backend="mcp", mode=self.mode)
        conn = entry[0]
        if conn.server.url is not None:
            return remote_fingerprint(conn, self.mode)
        if conn.launch is not None:
            return conn.launch.fingerprint
        return Fingerprint(backend=f"mcp:{conn.server.name}", mode=self.mode)

    async def run(self, request: ExecRequest) -> ExecOutcome:
        entry = self._tools.get(request.spec.name)
        if entry is None:
            raise SandboxError(f"{request.spec.name}: no MCP server provides this tool")
        conn, remote = entry
        if conn.server.url is None:
            return await call_started(conn, remote, request, closed=self._closed)
        return await call_remote(conn, remote, request, closed=self._closed, mode=self.mode)
