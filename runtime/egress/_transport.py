"""An httpx transport that dials only the address the gateway checked.

Hazard: a normal client resolves the name again when it connects, and a DNS server that
answers "public" to the check and "127.0.0.1" to the connect (rebinding) walks straight past
the check. Here the gateway puts the checked address in the request's extensions
(:data:`PIN_EXTENSION`) and the transport opens a fresh connection to exactly that address,
while the URL keeps the name, so the Host header, TLS SNI and certificate verification all
use the name. A request without a pin is refused: this transport never resolves anything.

One connection per request, never pooled: a pooled TLS connection verified for one name
could otherwise be reused for another name on the same address.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from types import TracebackType
from typing import Any

import anyio
import httpcore
import httpx

__all__ = ["PIN_EXTENSION", "PinnedTransport"]

#: Request extension holding the checked IP address (text) to dial.
PIN_EXTENSION = "runtime.pinned_address"

_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.ProxyError, httpx.ProxyError),
    # Only a pool raises it; a fresh connection that cannot take the request is a failed dial.
    (httpcore.ConnectionNotAvailable, httpx.ConnectError),
)


def _mapped(exc: Exception, request: httpx.Request) -> Exception:
    for core_type, httpx_type in _EXCEPTIONS:
        if isinstance(exc, core_type):
            if issubclass(httpx_type, httpx.RequestError):
                return httpx_type(str(exc) or type(exc).__name__, request=request)
            return httpx_type(str(exc))
    return exc


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects to the pinned address whatever host httpcore asks for."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, address: str) -> None:
        self._inner = inner
        self._address = address

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await self._inner.connect_tcp(
            self._address,
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are never dialled by the egress gateway")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _ResponseStream(httpx.AsyncByteStream):
    """The body of one pinned connection.

    Hazard: callers stop reading at the byte cap. An async-generator ``__aiter__`` left
    suspended is finalised by the garbage collector (trio warns, and the socket lingers), so
    this is a plain iterator whose ``aclose`` closes httpcore's generator, the response and
    the connection, in that order.
    """

    def __init__(
        self,
        connection: httpcore.AsyncHTTPConnection,
        response: httpcore.Response,
        request: httpx.Request,
    ) -> None:
        self._connection = connection
        self._response = response
        self._request = request
        stream = response.stream
        assert isinstance(stream, AsyncIterable)
        self._chunks: AsyncIterator[bytes] = aiter(stream)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await anext(self._chunks)
        except StopAsyncIteration:
            raise
        except Exception as exc:
            raise _mapped(exc, self._request) from exc

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                close = getattr(self._chunks, "aclose", None)
                if close is not None:
                    await close()
                await self._response.aclose()
            finally:
                await self._connection.aclose()


class PinnedTransport(httpx.AsyncBaseTransport):
    """``handle_async_request`` dials ``request.extensions[PIN_EXTENSION]`` on the URL's port.

    ``network_backend`` is httpcore's (default: its anyio backend); tests wrap it to record
    the address actually dialled. ``ssl_context`` defaults to certificate verification on.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        network_backend: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self._ssl_context = ssl_context or ssl.create_default_context()
        self._backend = network_backend or httpcore.AnyIOBackend()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        address = request.extensions.get(PIN_EXTENSION)
        if not isinstance(address, str) or not address:
            raise httpx.ConnectError("no checked address pinned for this request", request=request)
        url = request.url
        origin = httpcore.Origin(
            url.raw_scheme, url.raw_host, url.port or (443 if url.scheme == "https" else 80)
        )
        connection = httpcore.AsyncHTTPConnection(
            origin=origin,
            ssl_context=self._ssl_context,
            network_backend=_PinnedBackend(self._backend, address),
        )
        if not isinstance(request.stream, httpx.AsyncByteStream):
            raise httpx.LocalProtocolError("request body is not an async stream", request=request)
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions={k: v for k, v in request.extensions.items() if k != PIN_EXTENSION},
        )
        try:
            response = await connection.handle_async_request(core_request)
        except BaseException as exc:
            # Cancellation (the gateway's deadline) included: the socket is closed now, not
            # by the garbage collector; shielded so the close itself is not cancelled.
            with anyio.CancelScope(shield=True):
                await connection.aclose()
            if isinstance(exc, Exception):
                raise _mapped(exc, request) from exc
            raise
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(connection, response, request),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> PinnedTransport:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()
