"""The client of an MCP server reached by URL: Streamable HTTP through the egress gateway.

Policy::

    [[mcp_servers]]
    name = "search"
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "env:SEARCH_MCP_TOKEN" }   # read from the broker's env

Where it runs and why that is safe: in the broker process (a sandboxed process has no
network). The broker only relays JSON-RPC: it sends ``initialize``, ``tools/list``,
``tools/call`` and a closing ``DELETE``, parses the answers as data (``mcp_types`` models,
size-capped), and never runs, imports or evaluates anything the server sends. Requests the
server sends back (sampling, elicitation, roots) are not answered: the broker offers no
client capabilities, and a server that waits for an answer runs into the call's timeout.

Reaching it: every request is one :meth:`runtime.egress.EgressGateway.request` under the
policy's ``[network]`` rules — deny entries, schemes, ports, private addresses only when
named, one resolution whose address is pinned for the connection (no DNS rebinding), every
redirect checked again and credentials dropped on a change of origin. The entry names its
own origin (scheme, host, port): :func:`origin_rules` adds exactly that origin to a copy of
the rules used by this server's connection only; the network tools never see it. A host
*name* that resolves to a private address still needs ``[network] allow_private``, as for
any exact allow entry; an IP literal in the URL names that address itself.

Transport: the 2025-06-18 handshake (``initialize``, then ``notifications/initialized``; a
server that answers with a version outside 2025-03-26, 2025-06-18 and 2025-11-25 is refused),
one POST per JSON-RPC message with ``Accept: application/json, text/event-stream``; the
answer is read whole (capped) as JSON or as an SSE stream the server closes after its
answer. ``Mcp-Session-Id`` and ``MCP-Protocol-Version`` are sent back as the spec asks. A
session the server forgot (404) is initialised again once and the request sent again: a
server answers 404 before it handles the request. The legacy HTTP+SSE transport (a GET
stream held open for the whole session) is not spoken: the gateway reads each answer whole
under a cap, which is what keeps a hostile server from streaming without end.

Errors (all typed, none hangs): refused by the rules → ``EgressDenied`` (``policy_denied``);
past the call's ``timeout_s`` → ``ToolTimeout``; unreachable, connection lost mid-answer,
an HTTP error status or an answer that is not JSON-RPC → ``SandboxError``; an answer
larger than the call's ``output_bytes`` (plus a fixed allowance for the envelope) →
``OutputTooLarge``; a JSON-RPC error → ``ToolFailed`` with its code.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from runtime.egress import EgressGateway, Resolver, TransportFactory, parse_target
from runtime.errors import (
    InvalidArguments,
    OutputTooLarge,
    RuntimeToolError,
    SandboxError,
    ToolFailed,
)
from runtime.policy.network import NetworkRules
from runtime.policy.schema import ENV_REFERENCE, McpServerEntry

__all__ = ["PROTOCOL_VERSION", "RemoteClient", "origin_rules", "resolve_headers"]

#: The handshake spoken: the Streamable HTTP era's initialize / initialized exchange.
PROTOCOL_VERSION = "2025-06-18"
#: Versions whose Streamable HTTP and tools/call this client follows (the server may answer
#: the handshake with another version it prefers).
_SPOKEN = frozenset({"2025-03-26", "2025-06-18", "2025-11-25"})
_ACCEPT = "application/json, text/event-stream"
#: Room for the JSON-RPC envelope and SSE framing above the call's output cap, bytes.
_ENVELOPE_BYTES = 65_536
#: Cap of a handshake or tools/list answer, bytes (512 tools with 64 KiB schemas fit).
_LIST_BYTES = 32 * 1024 * 1024
#: The gateway's ceilings for this connection: each request passes its own smaller caps
#: (the call's timeout and output cap), so these only lift the network tools' defaults.
_CEILING_TIMEOUT_S = 3600.0
_CEILING_BYTES = 64 * 1024 * 1024 + _ENVELOPE_BYTES
_CLOSE_TIMEOUT_S = 5.0
_REDACTED = "[redacted]"


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
            # POSTs are never retried by the gateway; a close (DELETE) is not worth it.
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


class _SessionExpired(Exception):
    """The server answered 404 to a request carrying our session id."""


class RemoteClient:
    """One server reached by URL. ``await connect()`` (handshake and tool listing; the caller
    bounds it with the entry's ``start_timeout_s``), then :meth:`call_tool` from any task
    (requests are independent HTTP exchanges), :meth:`aclose` at the end."""

    def __init__(
        self,
        server: McpServerEntry,
        network: NetworkRules,
        *,
        resolver: Resolver | None = None,
        transport_factory: TransportFactory | None = None,
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
        self._headers: dict[str, str] = {}
        self._secrets: list[str] = []
        self._session_id: str | None = None
        self._protocol = PROTOCOL_VERSION
        self._ids = itertools.count(1)
        self._reconnect = anyio.Lock()

    # -- lifecycle ----------------------------------------------------------------------------
    async def connect(self) -> list[types.Tool]:
        self._headers, self._secrets = resolve_headers(self.server)
        await self._initialize(timeout_s=self.server.start_timeout_s)
        return await self._list_all()

    async def aclose(self) -> None:
        """End the session (a DELETE, best effort: the server may be gone) and close."""
        session, self._session_id = self._session_id, None
        with anyio.CancelScope(shield=True):
            try:
                if session is not None:
                    with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                        await self._gateway.request(
                            {
                                "method": "DELETE",
                                "url": self.url,
                                "headers": self._request_headers(session),
                                "max_bytes": 4096,
                                "timeout_s": _CLOSE_TIMEOUT_S,
                                "follow_redirects": False,
                            }
                        )
            except RuntimeToolError:
                pass  # a server that is gone has no session to end
            finally:
                await self._gateway.aclose()

    # -- requests -----------------------------------------------------------------------------
    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout_s: float, max_bytes: int
    ) -> types.CallToolResult:
        """``tools/call``; the whole exchange (a re-initialisation included) is bounded by
        the caller's deadline, the answer by ``max_bytes`` plus the envelope allowance."""
        result = await self._request(
            "tools/call",
            {"name": name, "arguments": arguments},
            timeout_s=timeout_s,
            max_bytes=max_bytes + _ENVELOPE_BYTES,
        )
        try:
            return types.CallToolResult.model_validate(result)
        except ValidationError as exc:
            raise self._malformed(f"tools/call result: {_first_error(exc)}") from exc

    def scrub(self, text: str) -> str:
        """``text`` with the header secrets replaced: a server may echo them in errors."""
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        return text

    async def _initialize(self, *, timeout_s: float) -> None:
        self._session_id = None
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            # No capabilities: the broker answers no server-to-client request.
            "capabilities": {},
            "clientInfo": {"name": "runtime", "version": "1"},
        }
        answer = await self._exchange(
            "initialize", params, timeout_s=timeout_s, max_bytes=_LIST_BYTES
        )
        try:
            result = types.InitializeResult.model_validate(answer)
        except ValidationError as exc:
            raise self._malformed(f"initialize result: {_first_error(exc)}") from exc
        if result.protocol_version not in _SPOKEN:
            # Another era may change what a call means (the 2026 one answers calls with
            # InputRequired rounds); it also goes back into a header, so it is checked here.
            raise self._malformed(
                f"protocol version {result.protocol_version[:64]!r}; this client speaks "
                f"{', '.join(sorted(_SPOKEN))}"
            )
        self._protocol = result.protocol_version
        await self._post(
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            timeout_s=timeout_s,
            max_bytes=4096,
        )

    async def _list_all(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(64):  # a server that pages forever is cut off
            params: dict[str, Any] = {"cursor": cursor} if cursor else {}
            answer = await self._request(
                "tools/list", params, timeout_s=self.server.start_timeout_s, max_bytes=_LIST_BYTES
            )
            try:
                page = types.ListToolsResult.model_validate(answer)
            except ValidationError as exc:
                raise self._malformed(f"tools/list result: {_first_error(exc)}") from exc
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) >= 512:
                break
        return tools

    async def _request(
        self, method: str, params: dict[str, Any], *, timeout_s: float, max_bytes: int
    ) -> dict[str, Any]:
        with anyio.fail_after(timeout_s):  # raised as TimeoutError; the proxy maps it
            try:
                return await self._exchange(
                    method, params, timeout_s=timeout_s, max_bytes=max_bytes
                )
            except _SessionExpired:
                stale = self._session_id
                async with self._reconnect:
                    if self._session_id == stale:  # not already renewed by another call
                        await self._initialize(timeout_s=timeout_s)
            try:
                return await self._exchange(
                    method, params, timeout_s=timeout_s, max_bytes=max_bytes
                )
            except _SessionExpired as exc:
                raise SandboxError(
                    f"MCP server {self.server.name!r} forgot the session it had just opened",
                    server=self.server.name,
                ) from exc

    async def _exchange(
        self, method: str, params: dict[str, Any], *, timeout_s: float, max_bytes: int
    ) -> dict[str, Any]:
        request_id = next(self._ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        reply = await self._post(message, timeout_s=timeout_s, max_bytes=max_bytes)
        if method == "initialize":
            session = reply["headers"].get("mcp-session-id")
            if session is not None and not _visible_ascii(session):
                raise self._malformed("a session id that is not visible ASCII")
            self._session_id = session
        return self._answer(reply, request_id)

    async def _post(
        self, message: dict[str, Any], *, timeout_s: float, max_bytes: int
    ) -> dict[str, Any]:
        payload = {
            "method": "POST",
            "url": self.url,
            "headers": {
                **self._request_headers(self._session_id),
                "Content-Type": "application/json",
            },
            "body": json.dumps(message, separators=(",", ":")).encode(),
            "max_bytes": max_bytes,
            "timeout_s": timeout_s,
            "follow_redirects": True,
        }
        try:
            reply = await self._gateway.request(payload)
        except (ToolFailed, InvalidArguments) as exc:
            # Refusals (EgressDenied) and timeouts pass through as they are; the rest is a
            # server that cannot be reached or dropped the connection.
            raise SandboxError(
                f"MCP server {self.server.name!r} is unreachable or dropped the connection: "
                f"{self.scrub(exc.message)}",
                server=self.server.name,
                url=self.url[:200],
            ) from exc
        status = reply["status"]
        if reply["truncated"]:
            raise OutputTooLarge(
                f"MCP server {self.server.name!r} answered more than {max_bytes} bytes",
                limit_bytes=max_bytes,
            )
        if (
            status == 404
            and self._session_id is not None
            and message.get("method") != ("initialize")
        ):
            raise _SessionExpired
        if not 200 <= status < 300:
            body = bytes(reply["body"][:200]).decode("utf-8", "replace")
            raise SandboxError(
                f"MCP server {self.server.name!r} answered HTTP {status}: {self.scrub(body)!r}",
                server=self.server.name,
                status=status,
            )
        return reply

    def _answer(self, reply: dict[str, Any], request_id: int) -> dict[str, Any]:
        """The result of the JSON-RPC response to ``request_id`` in a reply's body."""
        content_type = reply["headers"].get("content-type", "").split(";")[0].strip().lower()
        body: bytes = reply["body"]
        try:
            if content_type == "application/json":
                decoded = json.loads(body)
                messages = decoded if isinstance(decoded, list) else [decoded]
            elif content_type == "text/event-stream":
                messages = [json.loads(data) for data in _sse_data(body)]
            else:
                raise self._malformed(f"an answer of type {content_type[:100]!r}")
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8
            raise self._malformed(f"an answer that is not JSON ({exc})") from exc
        for message in messages:
            if not isinstance(message, dict) or message.get("id") != request_id:
                continue  # notifications, and requests the broker does not answer
            if "error" in message:
                error = message["error"]
                if not isinstance(error, dict):
                    raise self._malformed("a JSON-RPC error that is not an object")
                code = error.get("code")
                text = str(error.get("message", ""))[:4096]
                raise ToolFailed(
                    f"MCP server {self.server.name!r}: {self.scrub(text)}",
                    code=code if isinstance(code, int) else None,
                )
            result = message.get("result")
            if not isinstance(result, dict):
                raise self._malformed("a JSON-RPC response without a result object")
            return result
        raise self._malformed(f"no answer to request {request_id}")

    def _request_headers(self, session: str | None) -> dict[str, str]:
        headers = {**self._headers, "Accept": _ACCEPT, "MCP-Protocol-Version": self._protocol}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return headers

    def _malformed(self, what: str) -> SandboxError:
        return SandboxError(
            f"MCP server {self.server.name!r} sent {self.scrub(what)[:500]}",
            server=self.server.name,
            reason="malformed",
        )


def _sse_data(body: bytes) -> list[str]:
    """The ``data`` of each event of a ``text/event-stream`` body (lines joined by LF)."""
    events: list[str] = []
    data: list[str] = []
    for raw in body.decode("utf-8").splitlines():
        if not raw:
            if data:
                events.append("\n".join(data))
            data = []
        elif raw.startswith("data:"):
            value = raw[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        events.append("\n".join(data))
    return events


def _visible_ascii(text: str) -> bool:
    return bool(text) and all(0x21 <= ord(c) <= 0x7E for c in text)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"[:300]
