"""What the Streamable HTTP endpoint checks before the SDK's transport reads a request.

1. Host and Origin (DNS rebinding, CSRF from a browser). The endpoint has no
   authentication: anyone who reaches it can call every tool the policy allows. On
   loopback the names of loopback are allowed (any port; without a port only when bound to
   port 80, the default a client leaves out); with ``--allow-remote`` on
   another address, the address served at its port — for a wildcard address (0.0.0.0,
   ::), the names and addresses this host goes by — and what ``--allowed-host`` adds. A
   browser's Origin must be one ``--allowed-origin`` names (on loopback also loopback's
   own); a request without Origin is not from a browser page and passes. Refused as the
   SDK refuses: 421 for the Host, 403 for the Origin. This is the one check of both: the
   SDK's own is off behind it (:func:`guarded_app`).
2. ``MCP-Protocol-Version``: a value this server does not speak is a 400 saying so (the
   SDK routed it to its 2026 entry, whose answer talked about a missing ``_meta``
   envelope), and so is a supported value that is not the one negotiated for the session
   the request names (the 2025-06-18 and 2025-11-25 transports: "invalid or unsupported
   ... MUST respond with 400"; the SDK's client sends the negotiated one). No header is
   fine (the spec's backwards compatibility).
3. A body that is JSON but not one JSON-RPC message (a batch, ``{"hello": 1}``, ``3``) is
   Invalid Request (-32600) with one sentence saying why, as on stdio
   (``runtime.mcp._jsonrpc``); the SDK answered -32602 with a pydantic dump of a kilobyte.
   A body nested deeper than the parser reads (200 levels) is a parse error (-32700)
   under the id its leading members show, else id null (the SDK's own answer had id null
   whatever the body said).

Hazard: everything here is the client's (headers, body); it is only compared and parsed.
Only checked HTTP requests (and the server's lifespan events) reach the app behind the
guard: a WebSocket is closed here, whatever its Host.
The body is read up to the SDK's own cap and handed on unchanged (a larger one, or one
that is not JSON, is the SDK's to refuse). Cost: a request's JSON is decoded here and
again by the SDK (here 2.5 ms for a MiB of string, ~15 ms for a MiB of small objects).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pydantic_core
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from runtime.errors import ConfigError
from runtime.mcp._jsonrpc import deep_parse_error, invalid_request, is_request_id

__all__ = [
    "HttpGuard",
    "Served",
    "SessionVersions",
    "check_allowed_host",
    "check_allowed_origin",
    "guarded_app",
    "served_names",
]

SUPPORTED_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_POLICY_VIOLATION = 1008  # WebSocket close code (RFC 6455 7.4.1)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _authority_ok(value: str) -> bool:
    """Whether ``value`` is ``NAME``, ``NAME:PORT`` (1-65535) or ``NAME:*``, with an IPv6
    address in brackets: what a Host header, and an Origin after its scheme, can carry. A
    value outside these can never match a request's, so it is refused where it is given
    (a typo there silently refused every request: 421 or 403)."""
    name, sep, port = value.rpartition(":") if not value.endswith("]") else (value, "", "")
    if not sep:
        name, port = value, ""
    return (
        bool(name)
        and not any(c in name for c in "/@?#* \t")
        and (":" not in name or (name.startswith("[") and name.endswith("]")))
        and (not sep or port == "*" or 0 < (_port_number(port) or 0) <= 65535)
    )


def check_allowed_host(value: str) -> str:
    """An ``--allowed-host`` value as the Host header carries it: ``NAME`` (no port: what
    a client sends for port 80, or through a proxy), ``NAME:PORT`` or ``NAME:*``; as
    :func:`_normal_host` spells it ('example.com:080' is 'example.com:80')."""
    if not _authority_ok(value):
        raise ConfigError(
            f"--allowed-host {value!r}: expected NAME, NAME:PORT or NAME:* "
            "(PORT 1-65535; IPv6 in brackets: [::1]:8080)",
            field="allowed_host",
        )
    return _normal_host(value)


def check_allowed_origin(value: str) -> str:
    """An ``--allowed-origin`` value: ``http(s)://NAME[:PORT]`` (``:*``: any port), as a
    browser sends it — no path, no trailing slash; after the scheme, what
    ``--allowed-host`` takes (:func:`_authority_ok`)."""
    scheme, sep, rest = value.partition("://")
    if not (sep and scheme.lower() in ("http", "https") and _authority_ok(rest)):
        raise ConfigError(
            f"--allowed-origin {value!r}: expected http(s)://NAME[:PORT] with no path "
            "(PORT 1-65535, ':*' for any port; IPv6 in brackets: http://[::1]:8080)",
            field="allowed_origin",
        )
    return value.lower()


def _host_names(host: str) -> list[str]:
    """The names a client may use for ``host``: itself, or for a wildcard address this
    host's loopback names, host name, FQDN and the addresses they resolve to."""
    if not _is_wildcard(host):
        return [_bracket(host)]
    names = list(_LOOPBACK_NAMES)
    hostname = socket.gethostname()
    for name in (hostname, socket.getfqdn()):
        if name:
            names.append(name.lower())
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except OSError:
        infos = []
    names.extend(_bracket(str(info[4][0])) for info in infos)
    return list(dict.fromkeys(names))


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _port_number(port: str) -> int | None:
    """A port written in ASCII digits as its number (leading zeros dropped); None for
    anything else, and for a run of digits too long to be a port: ``int`` of one past 4,300
    digits raises (a Host header of a 5,000-digit port was a 500 and a traceback)."""
    if not (port.isascii() and port.isdigit()):
        return None
    digits = port.lstrip("0") or "0"
    return int(digits) if len(digits) <= 5 else None


def _normal_host(value: str) -> str:
    """``value`` (a Host header, or a served or allowed one) lower case, with its port
    without leading zeros. Why: clients write the port as a number (curl, browsers, httpx
    send 'example.com:8080' for a URL's ':08080'), so an allowed 'example.com:08080'
    matched no request (421), while the same origin was served (:func:`_normal_origin`).
    A port left out stays out (a proxy's Host, or port 80: :func:`served_names`)."""
    value = value.lower()
    if value.endswith("]") or ":" not in value:
        return value
    name, _, port = value.rpartition(":")
    number = _port_number(port)
    return value if number is None else f"{name}:{number}"


def _normal_origin(value: str) -> str:
    """``value`` (an Origin, or a served or allowed one) as one spelling per origin: lower
    case, with its port always written (the scheme's default when left out) and without
    leading zeros. Why: ``http://localhost`` and ``http://localhost:80`` are one origin
    (RFC 6454), and the first, what a browser sends for port 80, was refused where the
    second passed. Anything else (``null``, a path) is only lowered, and matches nothing
    served."""
    value = value.lower()
    scheme, sep, rest = value.partition("://")
    default = _DEFAULT_PORTS.get(scheme)
    if not sep or default is None or not rest:
        return value
    if rest.endswith("]") or ":" not in rest:  # no port: [::1], a name, an IPv4 address
        return f"{value}:{default}"
    name, _, port = rest.rpartition(":")
    number = _port_number(port)
    return value if number is None else f"{scheme}://{name}:{number}"


@dataclass(frozen=True, slots=True)
class Served:
    """The Host and Origin values the endpoint serves: each exact, or ``NAME:*`` for NAME
    at any port. Compared case-insensitively (host names are; the values are lowered),
    ports without leading zeros (:func:`_normal_host`), an origin with its port always
    written (:func:`_normal_origin`)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    def host_ok(self, value: str | None) -> bool:
        return value is not None and _matches(_normal_host(value), self.hosts)

    def origin_ok(self, value: str | None) -> bool:
        # No Origin: not a request of a page in a browser (a browser sends one with every
        # POST), which is what this keeps out; curl and the SDK's client send none.
        return not value or _matches(_normal_origin(value), self.origins)


def _matches(value: str, allowed: tuple[str, ...]) -> bool:
    value = value.lower()
    if value in allowed:
        return True
    base, sep, port = value.rpartition(":")
    return bool(sep) and port.isascii() and port.isdigit() and f"{base}:*" in allowed


def served_names(
    host: str,
    bound_host: str,
    bound_port: int,
    *,
    loopback: bool,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> Served:
    """Host and Origin values served at ``host`` (bound as ``bound_host``).

    Loopback: the names of loopback plus the addresses asked for and bound, any port, as
    Host and as an ``http://`` Origin. Why not the SDK's defaults: it turns its check on
    only for the literals 127.0.0.1, localhost and ::1, and served 127.0.0.2 or
    0:0:0:0:0:0:0:1 (loopback too, so no --allow-remote) with no check.

    Remote: the address served at the bound port (see :func:`_host_names` for a wildcard
    address), and no Origin at all unless named.

    Bound to port 80, the same names without a port as Host too (the default port, which
    clients leave out); on any other port a Host without a port is refused. An Origin is
    an origin whatever the server's port: one without a port is its scheme's default
    (:func:`_normal_origin`), so ``http://localhost`` is loopback's at port 80.
    """
    if loopback:
        names = list(dict.fromkeys([*_LOOPBACK_NAMES, _bracket(host), _bracket(bound_host)]))
        hosts = [f"{name}:*" for name in names]
        origins = [f"http://{name}:*" for name in names]
    else:
        names = _host_names(host)
        hosts = [f"{name}:{bound_port}" for name in names]
        origins = []
    if bound_port == 80:
        # A Host without a port means the scheme's default, 80: curl and browsers omit it
        # there, and were refused (421). Only at port 80: a portless Host reaching another
        # port came through something that rewrote it. Rebinding stays shut: the names are
        # still this server's own (a rebound page sends its own name, which is none of
        # them). Not for Origin: the page's origin, not this server's address (above).
        hosts += names
    return Served(
        hosts=tuple(dict.fromkeys(_normal_host(v) for v in [*hosts, *allowed_hosts])),
        origins=tuple(dict.fromkeys(_normal_origin(v) for v in [*origins, *allowed_origins])),
    )


def guarded_app(
    server: Server[Any], *, path: str, served: Served, versions: SessionVersions
) -> HttpGuard:
    """The SDK's Streamable HTTP app for ``server`` at ``path``, behind :class:`HttpGuard`.

    The guard is the one Host and Origin check: the SDK's own (TransportSecuritySettings)
    is turned off, as it would only repeat the guard's with the same lists, after it, on
    every request. Both are made here, so that the SDK's app is never served without
    the guard in front. (The SDK's Content-Type check of a POST does not depend on that
    setting and stays.)"""
    app = server.streamable_http_app(
        streamable_http_path=path,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return HttpGuard(app, versions=versions, served=served)


class SessionVersions:
    """The protocol version negotiated for each live Streamable HTTP session.

    :meth:`track` is server middleware: at ``initialize`` it notes the session's
    connection, whose ``protocol_version`` the SDK sets to the negotiated one before the
    answer leaves; the entry goes when the connection closes.
    """

    def __init__(self) -> None:
        self._by_id: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    async def track(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method == "initialize":
            conn = getattr(ctx.session, "_connection", None)
            session_id = getattr(conn, "session_id", None)
            if isinstance(session_id, str) and session_id:
                self._by_id[session_id] = conn
        return result

    def negotiated(self, session_id: str) -> str | None:
        conn = self._by_id.get(session_id)
        version = getattr(conn, "protocol_version", None)
        return version if isinstance(version, str) else None


def _rejection(status: int, code: int, message: str, data: Any = None) -> Response:
    error = types.JSONRPCError(
        jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message, data=data)
    )
    return _answer(status, error)


def _answer(status: int, error: types.JSONRPCError) -> Response:
    body = error.model_dump(mode="json", by_alias=True, exclude_none=True)
    body["id"] = error.id  # JSON-RPC: id null when the request's id is not known
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def _in_flight_key(scope: Scope, value: Any) -> tuple[str, tuple[type, object]] | None:
    """(session, id) of a request POSTed in a session, else None (a notification, a
    response, a request outside a session: the 2026 era's are stateless)."""
    if not isinstance(value, dict) or "method" not in value:
        return None
    request_id = value.get("id")
    session_id = Headers(scope=scope).get("mcp-session-id")
    if not session_id or not is_request_id(request_id):
        return None
    return session_id, (type(request_id), request_id)  # 1 and "1" are different ids


def _id_in_use(key: tuple[type, object]) -> types.JSONRPCError:
    request_id = key[1]
    assert isinstance(request_id, (str, int))
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=types.INVALID_REQUEST,
            message="id already in use: a request with this id is still being answered in "
            "this session",
        ),
    )


class HttpGuard:
    """ASGI middleware in front of the SDK's app: the checks of this module's docstring."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        versions: SessionVersions,
        served: Served,
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ) -> None:
        #: The app behind the guard (the SDK's, which checks no Host or Origin itself).
        self.app = app
        self._versions = versions
        self._served = served
        self._max_body = max_body
        # (session id, request id) of each request being answered in a session.
        self._in_flight: set[tuple[str, tuple[type, object]]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            # A WebSocket (uvicorn serves them once ``websockets`` or ``wsproto`` is
            # installed), which no CORS keeps a page from opening: the endpoint has none,
            # and nothing but a checked HTTP request reaches the app behind the guard.
            await WebSocketClose(code=_POLICY_VIOLATION)(scope, receive, send)
            return
        refused = await self._refusal(scope)
        if refused is not None:
            await refused(scope, receive, send)
            return
        key = None
        if scope["method"] == "POST":
            checked = await self._unless_invalid(scope, receive, send)
            if checked is None:
                return
            receive, value = checked
            key = _in_flight_key(scope, value)
            if key is not None and key in self._in_flight:
                await _answer(400, _id_in_use(key[1]))(scope, receive, send)
                return
        if key is None:
            await self.app(scope, receive, send)
            return
        self._in_flight.add(key)
        try:
            await self.app(scope, receive, send)
        finally:
            self._in_flight.discard(key)

    async def _refusal(self, scope: Scope) -> Response | None:
        # Host and Origin first: a page that rebinds its name learns nothing else here.
        # (Refused as the SDK refused them: 421 and 403, plain text.)
        headers = Headers(scope=scope)
        if not self._served.host_ok(headers.get("host")):
            return Response("Invalid Host header", status_code=421)
        if not self._served.origin_ok(headers.get("origin")):
            return Response("Invalid Origin header", status_code=403)
        version = headers.get("mcp-protocol-version")
        if version is None:
            return None
        if version not in SUPPORTED_VERSIONS:
            return _rejection(
                400,
                types.UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported MCP-Protocol-Version header {version[:40]!r}: this server "
                f"speaks {', '.join(SUPPORTED_VERSIONS)}",
                {"supported": list(SUPPORTED_VERSIONS), "requested": version[:40]},
            )
        session_id = headers.get("mcp-session-id")
        negotiated = self._versions.negotiated(session_id) if session_id else None
        if negotiated is not None and version != negotiated:
            return _rejection(
                400,
                types.INVALID_REQUEST,
                f"MCP-Protocol-Version {version} is not the version negotiated for this "
                f"session ({negotiated}): send {negotiated}, or initialize a new session",
            )
        return None

    async def _unless_invalid(
        self, scope: Scope, receive: Receive, send: Send
    ) -> tuple[Receive, Any] | None:
        """Answer a body that is not one JSON-RPC message here (None), or the ``receive``
        that replays the body to the SDK, with the decoded body (None when not read)."""
        held: deque[Message] = deque()
        body = bytearray()
        while True:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            body.extend(message.get("body", b""))
            if len(body) > self._max_body or not message.get("more_body", False):
                break
        complete = held[-1]["type"] == "http.request" and not held[-1].get("more_body")
        answer = None
        value: Any = None
        if complete and len(body) <= self._max_body:
            try:
                # The SDK's own parser (pydantic-core), so that this check reads what the
                # SDK would: UTF-8 only (json.loads also took UTF-16/32 and a BOM, which the
                # SDK refuses as a parse error), its nesting and number limits.
                value = pydantic_core.from_json(body)
            except ValueError as exc:
                # Not JSON the SDK reads: its parse error (id null) says so. One nested
                # past the parser's limit is answered here, under the id its first
                # members show (as on stdio), so the client can tell which request failed.
                if "recursion limit exceeded" in str(exc):
                    answer = deep_parse_error(body)
            else:
                answer = invalid_request(value, unit="POST")
        if answer is not None:
            await _answer(400, answer)(scope, receive, send)
            return None

        async def replay() -> Message:
            return held.popleft() if held else await receive()

        return replay, value
