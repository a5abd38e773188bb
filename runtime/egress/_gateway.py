"""The egress gateway: the only code that talks to the network on behalf of a tool.

One request, in order: validate the payload; parse the URL strictly (``_url``); ask the policy
about (scheme, host, port); resolve the name once; refuse if ANY address is non-public and the
policy does not name it; dial exactly a checked address (``_transport``); follow redirects
here, each one checked from scratch; stream the body under a byte cap and the whole exchange
under a time cap. Idempotent requests retry transient failures when the policy allows.
"""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from ipaddress import ip_address
from types import TracebackType
from typing import Any, cast
from urllib.parse import urljoin

import anyio
import httpx

from runtime._quote import quoted
from runtime.egress._addresses import address_class
from runtime.egress._decode import BodyDecoder
from runtime.egress._failures import wire_failure
from runtime.egress._transport import PIN_EXTENSION, PinnedTransport
from runtime.egress._types import EgressDenied, IPAddress, NetworkRulesLike, Resolver
from runtime.egress._url import TargetURL, parse_target
from runtime.errors import InvalidArguments, ToolFailed, ToolTimeout

__all__ = ["EgressGateway", "StreamedReply", "TransportFactory"]

#: Builds the gateway's transport once, lazily; see :class:`PinnedTransport`.
TransportFactory = Callable[[], httpx.AsyncBaseTransport]

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
_TRANSIENT_STATUS = frozenset({502, 503, 504})
_REDIRECT_STATUS = frozenset({301, 302, 303, 307, 308})
# Hop-by-hop headers (RFC 9110 §7.6.1) and the framing headers the client must compute itself:
# a tool that sets Host or Content-Length could smuggle a second request or pick a vhost the
# policy never saw.
_DROPPED_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "expect",
    }
)
# What follows a redirect to another origin (scheme, host or port): only these of the
# caller's headers, which say how to answer and carry no credential. Everything else is
# dropped, not only the names that look like credentials: a custom header (``X-Sig``,
# ``Authentication``, a tenant id) cannot be told from a credential by its name, so a list
# of credential names always misses one. Browsers and curl drop Authorization and Cookie;
# this is stricter on purpose. The body's own headers follow while the body does (a 307 or
# 308 resends it): ``_CROSS_ORIGIN_BODY_HEADERS``.
_CROSS_ORIGIN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "range",
        "user-agent",
        "if-match",
        "if-none-match",
        "if-modified-since",
        "if-unmodified-since",
        "if-range",
    }
)
_CROSS_ORIGIN_BODY_HEADERS = frozenset({"content-type", "content-encoding", "content-language"})
# fullmatch, not match: '$' also matches before a trailing newline ("X-A\n", "v\n"), which
# h11 then refused when sending (tool_error instead of invalid_arguments).
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VALUE_RE = re.compile(r"[\t\x20-\x7e]*")
_MAX_HEADERS = 100
_MAX_HEADER_BYTES = 65536
_MAX_BODY = 16 * 1024 * 1024


@dataclass(slots=True)
class _Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    max_bytes: int
    timeout_s: float
    follow_redirects: bool
    #: Lower-case names of headers the caller marks secret: dropped on an origin change even
    #: when they would follow it (``_CROSS_ORIGIN_HEADERS``).
    secret_headers: frozenset[str] = frozenset()


async def _system_resolver(host: str, port: int) -> list[IPAddress]:
    try:
        infos = await anyio.to_thread.run_sync(
            partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM),
            abandon_on_cancel=True,
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolFailed(
            f"cannot resolve {host!r}: {exc}", host=host, reason="name_not_resolved"
        ) from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = ip_address(str(sockaddr[0]))
        if ip not in addresses:
            addresses.append(ip)
    return addresses


def _validated(payload: dict[str, Any], rules: NetworkRulesLike) -> _Request:
    if not isinstance(payload, dict):
        raise InvalidArguments("the http payload must be an object")
    method = payload.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise InvalidArguments(f"method must be one of {sorted(_METHODS)}", field="method")
    url = payload.get("url")
    if not isinstance(url, str):
        raise InvalidArguments("url must be a string", field="url")
    raw_headers = payload.get("headers") or {}
    if not isinstance(raw_headers, dict) or len(raw_headers) > _MAX_HEADERS:
        raise InvalidArguments(f"headers must be an object of at most {_MAX_HEADERS} entries")
    headers: dict[str, str] = {}
    size = 0
    for name, value in raw_headers.items():
        if not isinstance(name, str) or not _TOKEN_RE.fullmatch(name):
            raise InvalidArguments(f"bad header name {quoted(name)}", field="headers")
        if not isinstance(value, str) or not _VALUE_RE.fullmatch(value):
            # CR/LF would split the request (header injection); non-ASCII has no agreed
            # encoding on the wire.
            raise InvalidArguments(
                f"value of header {quoted(name)} must be printable ASCII", field="headers"
            )
        size += len(name) + len(value)
        if name.lower() not in _DROPPED_HEADERS:
            headers[name] = value
    if size > _MAX_HEADER_BYTES:
        raise InvalidArguments(f"headers larger than {_MAX_HEADER_BYTES} bytes")
    body = payload.get("body")
    if isinstance(body, str):
        body = body.encode("utf-8")
    if body is not None and not isinstance(body, bytes | bytearray):
        raise InvalidArguments("body must be bytes, a string or null", field="body")
    if body is not None and len(body) > _MAX_BODY:
        raise InvalidArguments(f"request body larger than {_MAX_BODY} bytes", field="body")
    max_bytes = payload.get("max_bytes", rules.max_response_bytes)
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 0:
        raise InvalidArguments("max_bytes must be a non-negative integer", field="max_bytes")
    timeout_s = payload.get("timeout_s", rules.timeout_s)
    if not isinstance(timeout_s, int | float) or isinstance(timeout_s, bool) or timeout_s <= 0:
        raise InvalidArguments("timeout_s must be a positive number", field="timeout_s")
    follow = payload.get("follow_redirects", True)
    if not isinstance(follow, bool):
        raise InvalidArguments("follow_redirects must be a boolean", field="follow_redirects")
    secret = payload.get("secret_headers") or []
    if (
        not isinstance(secret, list | tuple)
        or len(secret) > _MAX_HEADERS
        or not all(isinstance(n, str) for n in secret)
    ):
        raise InvalidArguments(
            f"secret_headers must be a list of at most {_MAX_HEADERS} header names",
            field="secret_headers",
        )
    return _Request(
        method=method.upper(),
        url=url,
        headers=headers,
        body=None if body is None else bytes(body),
        max_bytes=min(max_bytes, rules.max_response_bytes),
        timeout_s=min(float(timeout_s), rules.timeout_s),
        follow_redirects=follow,
        secret_headers=frozenset(n.lower() for n in secret),
    )


def _cross_origin_headers(
    headers: dict[str, str], with_body: bool, secret: frozenset[str]
) -> dict[str, str]:
    """The part of ``headers`` that follows a redirect to another origin: the names in
    ``_CROSS_ORIGIN_HEADERS``, and in ``_CROSS_ORIGIN_BODY_HEADERS`` when the body is
    still sent (``with_body``), less those the caller marked secret."""
    kept: dict[str, str] = {}
    for name, value in headers.items():
        low = name.lower()
        if low in secret:
            continue
        if low in _CROSS_ORIGIN_HEADERS or (with_body and low in _CROSS_ORIGIN_BODY_HEADERS):
            kept[name] = value
    return kept


def _reply_headers(response: httpx.Response, decoded: bool) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        if decoded and key in ("content-encoding", "content-length"):
            continue
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


class StreamedReply:
    """A response of :meth:`EgressGateway.stream` whose body is still on the wire.
    ``status``, ``headers`` (lower-case names), ``url`` (after redirects), ``redirects``;
    :meth:`chunks` yields the body, decoded (gzip/deflate under the caller's ``want``)."""

    __slots__ = ("_decoder", "_response", "headers", "redirects", "status", "url")

    def __init__(self, response: httpx.Response, url: str, redirects: list[str]) -> None:
        self._response = response
        self._decoder = BodyDecoder(response.headers.get("content-encoding", ""))
        self.status = response.status_code
        self.headers = _reply_headers(response, self._decoder.decoded)
        self.url = url
        self.redirects = redirects

    async def chunks(self, want: int = 1 << 20) -> AsyncIterator[bytes]:
        """The body as it arrives, each decoded chunk at most ``want`` bytes (a compressed
        chunk that would inflate past it is cut there: a bomb never fills memory). Network
        failures are the gateway's errors (``ToolFailed``, ``ToolTimeout``) raised from the
        httpx exception."""
        raw = cast(AsyncGenerator[bytes, None], self._response.aiter_raw())
        try:
            async with aclosing(raw) as pieces:
                async for piece in pieces:
                    if not self._decoder.decoded:
                        for start in range(0, len(piece), want):
                            yield piece[start : start + want]
                        continue
                    # A compressed piece may inflate to many times ``want``: the decoder
                    # holds the rest back, and is drained ``want`` bytes at a time.
                    out = self._decoder.decode(piece, want)
                    while out:
                        yield out
                        out = self._decoder.decode(b"", want) if len(out) == want else b""
            while tail := self._decoder.flush(want):
                yield tail
        except httpx.TimeoutException as exc:
            raise ToolTimeout(f"reading {self.url[:200]!r} timed out: {exc}") from exc
        except (httpx.HTTPError, OSError) as exc:
            raise wire_failure(f"reading {self.url[:200]!r}", exc) from exc


class EgressGateway:
    """Brokered HTTP for sandboxed tools. ``await handle("http", payload)``; see the package
    docstring for the payload and reply. ``resolver`` replaces ``getaddrinfo``;
    ``transport_factory()`` builds the httpx transport (default :class:`PinnedTransport`);
    it must dial ``request.extensions[PIN_EXTENSION]`` and nothing else. ``backoff_s`` is
    the first retry delay, doubled per attempt, seconds."""

    def __init__(
        self,
        rules: NetworkRulesLike,
        *,
        resolver: Resolver | None = None,
        transport_factory: TransportFactory | None = None,
        backoff_s: float = 0.25,
    ) -> None:
        self._rules = rules
        self._resolver: Resolver = resolver or _system_resolver
        self._transport_factory: TransportFactory = transport_factory or PinnedTransport
        self._transport: httpx.AsyncBaseTransport | None = None
        self._backoff_s = backoff_s

    async def handle(
        self, op: str, payload: dict[str, Any], *, note: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The broker's entry point. Ops: ``http`` (one request), ``search_endpoint``
        (``{"url": str | None}``, the policy's web_search endpoint). ``note``, when given,
        is filled as the request goes (for the broker's egress log): ``dialled`` the
        address of each exchange, ``redirects`` the URLs followed, ``status`` the final
        one; on failure it holds what happened up to it."""
        if op == "http":
            return await self.request(payload, note=note)
        if op == "search_endpoint":
            return {"url": self._rules.search_endpoint}
        raise InvalidArguments(f"unknown egress operation {op!r}")

    async def request(
        self, payload: dict[str, Any], *, note: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        req = _validated(payload, self._rules)
        try:
            with anyio.fail_after(req.timeout_s):
                return await self._fetch(req, note)
        except TimeoutError as exc:
            raise ToolTimeout(
                f"request to {req.url[:200]!r} exceeded {req.timeout_s:g} s", limit="timeout_s"
            ) from exc
        except httpx.TimeoutException as exc:
            raise ToolTimeout(f"request to {req.url[:200]!r} timed out: {exc}") from exc
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            raise wire_failure(f"request to {req.url[:200]!r}", exc) from exc

    @asynccontextmanager
    async def stream(
        self, payload: dict[str, Any], *, note: dict[str, Any] | None = None
    ) -> AsyncIterator[StreamedReply]:
        """One request whose body the caller reads as it arrives (an SSE stream): the same
        checks, pinning and redirects as :meth:`request`; ``timeout_s`` bounds the exchange up
        to the response's headers, and the caller bounds the reading (time and bytes: this
        reads nothing it is not asked for). The connection closes when the block ends.
        ``note`` is filled as for :meth:`handle` (``status`` once the headers are in)."""
        req = _validated(payload, self._rules)
        try:
            with anyio.fail_after(req.timeout_s):
                response, target, redirects = await self._open(req, note)
                if note is not None:
                    note["status"] = response.status_code
        except TimeoutError as exc:
            raise ToolTimeout(
                f"request to {req.url[:200]!r} exceeded {req.timeout_s:g} s", limit="timeout_s"
            ) from exc
        except httpx.TimeoutException as exc:
            raise ToolTimeout(f"request to {req.url[:200]!r} timed out: {exc}") from exc
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            raise wire_failure(f"request to {req.url[:200]!r}", exc) from exc
        try:
            yield StreamedReply(response, target.url, redirects)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _fetch(self, req: _Request, note: dict[str, Any] | None) -> dict[str, Any]:
        response, target, redirects = await self._open(req, note)
        if note is not None:
            note["status"] = response.status_code
        body_bytes, truncated, decoded = await self._read(response, req.max_bytes)
        return {
            "status": response.status_code,
            "headers": _reply_headers(response, decoded),
            "body": body_bytes,
            "truncated": truncated,
            "url": target.url,
            "redirects": redirects,
        }

    async def _open(
        self, req: _Request, note: dict[str, Any] | None = None
    ) -> tuple[httpx.Response, TargetURL, list[str]]:
        """Send ``req`` (redirects followed and checked); the response's body is unread."""
        target = parse_target(req.url)
        method, body, headers = req.method, req.body, dict(req.headers)
        if not any(k.lower() == "accept-encoding" for k in headers):
            headers["Accept-Encoding"] = "gzip, deflate"
        redirects: list[str] = []
        if note is not None:
            note["redirects"] = redirects  # the same list: filled as redirects are followed
        while True:
            try:
                response = await self._send(method, target, headers, body, note)
            except EgressDenied as exc:
                if not redirects:
                    raise
                details = {k: v for k, v in exc.details.items() if k != "rule"}
                raise EgressDenied(
                    f"redirect to {target.url!r} refused: {exc.message}", rule=exc.rule, **details
                ) from exc
            location = response.headers.get("location")
            if not (req.follow_redirects and response.status_code in _REDIRECT_STATUS):
                break
            if location is None:
                break
            await response.aclose()
            if len(redirects) >= self._rules.max_redirects:
                raise ToolFailed(
                    f"more than {self._rules.max_redirects} redirects",
                    limit="max_redirects",
                    reason="too_many_redirects",
                )
            try:
                nxt = parse_target(urljoin(target.url, location))
            except EgressDenied as exc:
                raise EgressDenied(
                    f"redirect from {target.url!r} refused: {exc.message}",
                    rule=exc.rule,
                    location=location[:500],
                ) from exc
            if response.status_code == 303 or (
                response.status_code in (301, 302) and method == "POST"
            ):
                method, body = ("HEAD" if method == "HEAD" else "GET"), None
                headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
            if nxt.origin != target.origin:
                # Once dropped, a header stays dropped, back on the first origin too.
                headers = _cross_origin_headers(headers, body is not None, req.secret_headers)
            target = nxt
            redirects.append(target.url)
        return response, target, redirects

    async def _read(self, response: httpx.Response, limit: int) -> tuple[bytes, bool, bool]:
        decoder = BodyDecoder(response.headers.get("content-encoding", ""))
        buf = bytearray()
        truncated = False
        try:
            raw = cast(AsyncGenerator[bytes, None], response.aiter_raw())
            async with aclosing(raw) as chunks:
                async for chunk in chunks:
                    buf += decoder.decode(chunk, limit + 1 - len(buf))
                    if len(buf) > limit:
                        break
                else:
                    buf += decoder.flush(limit + 1 - len(buf))
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        if len(buf) > limit:
            truncated = True
            del buf[limit:]
        return bytes(buf), truncated, decoder.decoded

    async def _send(
        self,
        method: str,
        target: TargetURL,
        headers: dict[str, str],
        body: bytes | None,
        note: dict[str, Any] | None = None,
    ) -> httpx.Response:
        attempts = 1 + (max(self._rules.retries, 0) if method in _IDEMPOTENT else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = await self._send_once(method, target, headers, body, note)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if last:
                    raise
            else:
                if last or response.status_code not in _TRANSIENT_STATUS:
                    return response
                await response.aclose()
            await anyio.sleep(min(self._backoff_s * 2**attempt, 5.0))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_once(
        self,
        method: str,
        target: TargetURL,
        headers: dict[str, str],
        body: bytes | None,
        note: dict[str, Any] | None = None,
    ) -> httpx.Response:
        addresses = await self._check(target)
        transport = self._transport
        if transport is None:
            transport = self._transport = self._transport_factory()
        error: httpx.HTTPError | None = None
        # Every address was checked; try them in resolver order, as a client would.
        for address in addresses:
            request = httpx.Request(
                method,
                target.url,
                headers=headers,
                content=body,
                extensions={PIN_EXTENSION: str(address)},
            )
            if request.url.raw_host.decode("ascii").lower() != target.host:
                # Defence in depth: httpx must read our canonical URL as we did.
                raise EgressDenied(
                    f"URL parsers disagree about the host of {target.url!r}",
                    rule="egress.url",
                    host=target.host,
                )
            try:
                response = await transport.handle_async_request(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                error = exc
                continue
            if note is not None:
                note.setdefault("dialled", []).append(str(address))
            return response
        assert error is not None
        raise error

    async def _check(self, target: TargetURL) -> list[IPAddress]:
        verdict = self._rules.check(target.scheme, target.host, target.port)
        if not verdict.allowed:
            raise EgressDenied(
                f"{target.scheme}://{target.host}:{target.port} refused by rule "
                f"{verdict.rule!r}: {verdict.reason}",
                rule=verdict.rule,
                host=target.host,
                reason=verdict.reason,
            )
        if target.address is not None:
            addresses = [target.address]
        else:
            addresses = await self._resolver(target.host, target.port)
            if not addresses:
                raise ToolFailed(
                    f"{target.host!r} resolved to no address",
                    host=target.host,
                    reason="name_not_resolved",
                )
        for ip in addresses:
            kind = address_class(ip)
            # Every address is put to the policy, public ones too: a deny CIDR covers the
            # addresses a name resolves to, not only IP literals in URLs.
            if not self._rules.address_allowed(target.host, ip, target.port):
                raise EgressDenied(
                    f"{target.host} -> {ip} is a {kind} address and the policy does not name it"
                    if kind is not None
                    else f"{target.host} -> {ip} is an address the policy denies",
                    rule="egress.address",
                    host=target.host,
                    address=str(ip),
                    address_class=kind or "public",
                )
        return addresses

    async def aclose(self) -> None:
        transport, self._transport = self._transport, None
        if transport is not None:
            await transport.aclose()

    async def __aenter__(self) -> EgressGateway:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()
