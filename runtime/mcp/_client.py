"""What the two URL transports share: the origin the entry names, its headers, the
handshake's checks, tool listing, ``tools/call`` and reading a JSON-RPC response.

:class:`RemoteBase` leaves two things to a transport: ``_open`` (reach the server and
initialise a session) and ``_request`` (one request, its answer, and the transport's own
rules for reconnecting). ``trace`` counts what happened to one request for its audit
record: ``mcp_retries`` (sent again: the earlier attempt provably never reached the
server) and ``mcp_sessions`` (fresh sessions opened on the way); and ``egress``, the
requests it made of the server (:mod:`runtime._egress_log`, the shape of a sandboxed
tool's egress log): each POST of the request (and of a session opened again for it), each
GET that resumes or reopens its stream, with status, or error and refusal rule (an address
the rules deny, a redirect refused as ``mcp.redirect``).
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc
import httpx
import mcp_types as types
from pydantic import ValidationError

from runtime._egress_log import log_request, new_log
from runtime.audit._redact import Redactor
from runtime.egress import EgressGateway, Resolver, TransportFactory, parse_target
from runtime.errors import InvalidArguments, RuntimeToolError, SandboxError, ToolFailed
from runtime.mcp._peer import Inbound
from runtime.policy.network import NetworkRules
from runtime.policy.schema import ENV_REFERENCE, McpServerEntry

__all__ = [
    "PROTOCOL_VERSION",
    "REDIRECT_RULE",
    "RemoteBase",
    "Trace",
    "delivered",
    "first_error",
    "location_origin",
    "origin_rules",
    "resolve_headers",
    "visible_ascii",
]

#: The handshake spoken: the Streamable HTTP era's initialize / initialized exchange.
PROTOCOL_VERSION = "2025-06-18"
#: Per-request counters and egress log for the audit record (see the module docstring).
Trace = dict[str, Any]
#: Room for the JSON-RPC envelope and SSE framing above the call's output cap, bytes.
ENVELOPE_BYTES = 65_536
#: Cap of a handshake or tools/list answer, bytes (512 tools with 64 KiB schemas fit).
LIST_BYTES = 32 * 1024 * 1024
#: The gateway's ceilings for this connection: each request passes its own smaller caps
#: (the call's timeout and output cap), so these only lift the network tools' defaults.
_CEILING_TIMEOUT_S = 3600.0
_CEILING_BYTES = 64 * 1024 * 1024 + ENVELOPE_BYTES
_REDACTED = "[redacted]"
#: The refusal rule of a redirect the client will not follow (see ``status_error``).
REDIRECT_RULE = "mcp.redirect"


def delivered(exc: BaseException) -> bool:
    """False when the gateway's error proves the request never left this host: it raises
    ``ToolFailed`` from the httpx exception of a connection that was not made, or from the
    resolver's ``socket.gaierror``. Anything else may have reached the server."""
    cause = exc.__cause__
    return not isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout | socket.gaierror)


def origin_rules(base: NetworkRules, url: str) -> NetworkRules:
    """``base`` plus an allow entry for the origin of ``url`` (host and port), for one
    server's connection. Deny entries, schemes, ports and ``allow_private`` stay as the
    policy has them. Raises ``EgressDenied`` for a URL the gateway would not parse."""
    target = parse_target(url)
    host = f"[{target.host}]" if ":" in target.host else target.host
    return base.model_copy(
        update={
            "allow": [f"{host}:{target.port}", *base.allow],
            "timeout_s": _CEILING_TIMEOUT_S,
            "max_response_bytes": _CEILING_BYTES,
            # POSTs are never retried by the gateway; the client decides what may be sent
            # again (it knows which requests are safe to repeat).
            "retries": 0,
        }
    )


def resolve_headers(server: McpServerEntry) -> tuple[dict[str, str], list[str]]:
    """The headers to send and the secret values among them (read from the environment).
    A variable that is not set is an error naming the variable, never its value."""
    headers: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in server.headers.items():
        if value.startswith(ENV_REFERENCE):
            variable = value[len(ENV_REFERENCE) :]
            found = os.environ.get(variable)
            if found is None:
                raise SandboxError(
                    f"MCP server {server.name!r}: header {name!r} reads the environment "
                    f"variable {variable!r}, which is not set",
                    server=server.name,
                )
            if not all(c == "\t" or " " <= c <= "~" for c in found):
                # CR/LF would split the request; said here, not as an unreachable server.
                raise SandboxError(
                    f"MCP server {server.name!r}: the environment variable {variable!r} "
                    f"(header {name!r}) holds characters other than printable ASCII",
                    server=server.name,
                )
            headers[name] = found
            if found:
                secrets.append(found)
        else:
            headers[name] = value
    return headers, secrets


class HttpStatusError(SandboxError):
    """The server answered a status outside 2xx (``status`` in details)."""


class RemoteBase:
    """One server reached by URL. ``await connect(task_group)`` (handshake and tool listing;
    the caller bounds it with the entry's ``start_timeout_s``; ``task_group`` runs the
    transport's listening task, if it has one, until :meth:`aclose`), then
    :meth:`call_tool` from any task, :meth:`aclose` at the end."""

    transport = "?"
    #: Versions whose transport and tools/call this client follows (the server may answer
    #: the handshake with another version it prefers).
    spoken: frozenset[str] = frozenset({"2025-03-26", "2025-06-18", "2025-11-25"})
    #: The version asked for in ``initialize``.
    offered: str = PROTOCOL_VERSION

    def __init__(
        self,
        server: McpServerEntry,
        network: NetworkRules,
        *,
        resolver: Resolver | None = None,
        transport_factory: TransportFactory | None = None,
        redact_keys: Iterable[str] = (),
    ) -> None:
        if server.url is None:
            raise SandboxError(f"MCP server {server.name!r} has no url", server=server.name)
        self.server = server
        self.url: str = server.url
        self._gateway = EgressGateway(
            origin_rules(network, server.url),
            resolver=resolver,
            transport_factory=transport_factory,
        )
        #: The egress log's URLs: credentials hidden as the audit log hides them (its
        #: built-in rules and the policy's ``[audit] redact`` names).
        self._urls = Redactor(tuple(redact_keys))
        self._headers: dict[str, str] = {}
        self._secrets: list[str] = []
        self._protocol = self.offered
        self._ids = itertools.count(1)
        self._task_group: anyio.abc.TaskGroup | None = None
        self._closed = False
        #: Unsolicited messages; the proxy sets ``inbound.on_tools_changed``.
        self.inbound = Inbound(server.name)

    # -- to be provided by a transport ------------------------------------------------------
    async def _open(self, *, timeout_s: float, trace: Trace) -> None:
        raise NotImplementedError

    async def _request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout_s: float,
        max_bytes: int,
        trace: Trace,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def aclose(self) -> None:
        self._closed = True
        await self._gateway.aclose()

    # -- shared -----------------------------------------------------------------------------
    async def connect(self, task_group: anyio.abc.TaskGroup | None = None) -> list[types.Tool]:
        self._headers, self._secrets = resolve_headers(self.server)
        self._task_group = task_group
        await self._open(timeout_s=self.server.start_timeout_s, trace={})
        return await self.list_tools()

    async def list_tools(self) -> list[types.Tool]:
        """Every page of ``tools/list`` (at most 64 pages, 512 tools), within the entry's
        ``start_timeout_s``."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        with anyio.fail_after(self.server.start_timeout_s):
            for _ in range(64):  # a server that pages forever is cut off
                params: dict[str, Any] = {"cursor": cursor} if cursor else {}
                answer = await self._request(
                    "tools/list",
                    params,
                    timeout_s=self.server.start_timeout_s,
                    max_bytes=LIST_BYTES,
                    trace={},
                )
                try:
                    page = types.ListToolsResult.model_validate(answer)
                except ValidationError as exc:
                    raise self.malformed(f"tools/list result: {first_error(exc)}") from exc
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor or len(tools) >= 512:
                    break
        return tools

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout_s: float,
        max_bytes: int,
        trace: Trace | None = None,
    ) -> types.CallToolResult:
        """``tools/call``; the whole exchange (a re-initialisation included) is bounded by
        the caller's deadline, the answer by ``max_bytes`` plus the envelope allowance.
        ``trace`` receives the counters for the audit record."""
        result = await self._request(
            "tools/call",
            {"name": name, "arguments": arguments},
            timeout_s=timeout_s,
            max_bytes=max_bytes + ENVELOPE_BYTES,
            trace=trace if trace is not None else {},
        )
        try:
            return types.CallToolResult.model_validate(result)
        except ValidationError as exc:
            raise self.malformed(f"tools/call result: {first_error(exc)}") from exc

    async def post_message(
        self,
        url: str,
        headers: dict[str, str],
        message: dict[str, Any],
        *,
        timeout_s: float,
        follow_redirects: bool,
        lost: type[Exception],
        not_sent: type[Exception],
        trace: Trace | None = None,
    ) -> dict[str, Any]:
        """POST one JSON-RPC message whose answer, if any, comes another way (the server
        answers 202 and no body): the gateway's reply. A transport failure raises ``lost``
        when the request may have reached the server, else ``not_sent`` (each caller's
        retry rules differ). Logged in ``trace``'s egress log when given."""
        note: dict[str, Any] = {}
        error: RuntimeToolError | None = None
        reply: dict[str, Any] | None = None
        try:
            reply = await self._gateway.request(
                {
                    "method": "POST",
                    "url": url,
                    "headers": {**headers, "Content-Type": "application/json"},
                    "body": json.dumps(message, separators=(",", ":")).encode(),
                    "max_bytes": 4096,
                    "timeout_s": timeout_s,
                    "follow_redirects": follow_redirects,
                },
                note=note,
            )
        except RuntimeToolError as exc:
            error = exc
            if isinstance(exc, ToolFailed | InvalidArguments):
                raise (lost if delivered(exc) else not_sent) from exc
            raise
        finally:
            headers_in = reply["headers"] if reply is not None else None
            self.log_egress(trace, "POST", url, note=note, error=error, headers=headers_in)
        return reply

    def log_egress(
        self,
        trace: Trace | None,
        method: str,
        url: str,
        *,
        note: dict[str, Any],
        error: RuntimeToolError | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """One request in ``trace``'s egress log (none without a trace: the handshake
        and listing at connect time belong to no call). ``note`` is what the gateway filled
        in; a 3xx status (never followed) is logged as refused, rule :data:`REDIRECT_RULE`,
        with the origin of its ``Location`` from ``headers``."""
        if trace is None:
            return
        log = trace.get("egress")
        if log is None:
            log = trace["egress"] = new_log()
        status = note.get("status")
        refused = None
        if isinstance(status, int) and 300 <= status < 400:
            refused = REDIRECT_RULE
            if error is None:
                error = self.status_error(status, b"", headers=headers)
        elif isinstance(error, HttpStatusError) and error.details.get("reason") == "redirect":
            refused = REDIRECT_RULE
        log_request(log, method, url, self._shown_url, note=note, error=error, refused=refused)

    def _shown_url(self, url: str) -> str:
        return self.scrub(self._urls.redact_url(url))

    def status_error(
        self,
        status: int,
        body: bytes | bytearray,
        what: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> HttpStatusError:
        """A status outside 2xx, with the start of its body (scrubbed of the headers'
        secrets) and ``what`` the answer was to. A redirect (3xx) is never followed on an
        MCP endpoint (the spec has none; following one re-sent the request, and its secret
        headers, to wherever the server pointed): it is this error, naming only the origin
        of its ``Location`` (from ``headers``), ``reason`` ``"redirect"``."""
        if 300 <= status < 400:
            where = location_origin(self.url, (headers or {}).get("location"))
            return HttpStatusError(
                f"MCP server {self.server.name!r} answered HTTP {status}{what}, a redirect "
                f"to {self.scrub(where)}: refused, not followed (an MCP endpoint does not "
                "redirect)",
                server=self.server.name,
                status=status,
                reason="redirect",
                location=self.scrub(where),
            )
        text = bytes(body[:200]).decode("utf-8", "replace")
        shown = f": {self.scrub(text)!r}" if text else ""
        return HttpStatusError(
            f"MCP server {self.server.name!r} answered HTTP {status}{what}{shown}",
            server=self.server.name,
            status=status,
        )

    def scrub(self, text: str) -> str:
        """``text`` with the header secrets replaced: a server may echo them in errors."""
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return text

    def initialize_message(self, request_id: int) -> dict[str, Any]:
        params = {
            "protocolVersion": self.offered,
            # No capabilities: the broker answers no server-to-client request but ping.
            "capabilities": {},
            "clientInfo": {"name": "runtime", "version": "1"},
        }
        return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}

    def accept_initialize(self, answer: dict[str, Any]) -> None:
        try:
            result = types.InitializeResult.model_validate(answer)
        except ValidationError as exc:
            raise self.malformed(f"initialize result: {first_error(exc)}") from exc
        if result.protocol_version not in self.spoken:
            # Another era may change what a call means (the 2026 one answers calls with
            # InputRequired rounds); it also goes back into a header, so it is checked here.
            raise self.malformed(
                f"protocol version {result.protocol_version[:64]!r}; this client speaks "
                f"{', '.join(sorted(self.spoken))}"
            )
        self._protocol = result.protocol_version

    def result_of(self, message: dict[str, Any]) -> dict[str, Any]:
        """The result of a response that answers our request, or its error raised."""
        if "error" in message:
            error = message["error"]
            if not isinstance(error, dict):
                raise self.malformed("a JSON-RPC error that is not an object")
            code = error.get("code")
            text = str(error.get("message", ""))[:4096]
            raise ToolFailed(
                f"MCP server {self.server.name!r}: {self.scrub(text)}",
                code=code if isinstance(code, int) and not isinstance(code, bool) else None,
            )
        result = message.get("result")
        if not isinstance(result, dict):
            raise self.malformed("a JSON-RPC response without a result object")
        return result

    def malformed(self, what: str) -> SandboxError:
        return SandboxError(
            f"MCP server {self.server.name!r} sent {self.scrub(what)[:500]}",
            server=self.server.name,
            reason="malformed",
        )

    def lost(self, method: str, exc: BaseException) -> SandboxError:
        """A request that may have reached the server, whose answer never came."""
        what = str(getattr(exc, "message", "") or exc or type(exc).__name__)
        if method == "tools/call":
            text = (
                f"MCP server {self.server.name!r} dropped the connection during the call "
                "(the call may have run on the server; it was not sent again)"
            )
        else:
            text = f"MCP server {self.server.name!r} dropped the connection during {method}"
        return SandboxError(
            f"{text}: {self.scrub(what)[:300]}",
            server=self.server.name,
            reason="connection_lost",
            replayed=False,
        )

    def unreachable(self, exc: BaseException, attempts: int) -> SandboxError:
        """Every attempt failed; ``exc`` is the last failure."""
        what = str(getattr(exc, "message", "") or exc or type(exc).__name__)
        # Refused at connect (or unresolvable): unreachable; otherwise it was reached and
        # gave no answer each time.
        reached = delivered(exc)
        state = "gave no answer" if reached else "is unreachable"
        return SandboxError(
            f"MCP server {self.server.name!r} {state} ({attempts} attempts): "
            f"{self.scrub(what)[:300]}",
            server=self.server.name,
            url=self.url[:200],
            reason="no_answer" if reached else "unreachable",
        )


def location_origin(base: str, location: str | None) -> str:
    """The origin (``scheme://host:port``) a ``Location`` header points to, resolved against
    ``base``; never its path, query or user info (they may carry tokens)."""
    if not location:
        return "no location"
    try:
        parts = urlsplit(urljoin(base, location.strip()))
        host, port = parts.hostname, parts.port
    except ValueError:
        return "an unreadable location"
    if not parts.scheme or not host:
        return "an unreadable location"
    host = f"[{host}]" if ":" in host else host
    origin = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    return origin[:200] if visible_ascii(origin) else "an unreadable location"


def visible_ascii(text: str) -> bool:
    return bool(text) and all(0x21 <= ord(c) <= 0x7E for c in text)


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"[:300]
