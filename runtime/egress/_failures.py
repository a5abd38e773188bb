"""What went wrong on the wire, for the caller: a machine-readable ``reason`` and a sentence.

httpx's and the socket layer's messages are kept in the error (they are what a person
debugging needs), but on their own they say little to a caller deciding what to do next:
"All connection attempts failed", "[SSL: WRONG_VERSION_NUMBER] wrong version number
(_ssl.c:1006)", "illegal status line: bytearray(b'...')". Each failure is put in one of a
few classes, read from the exception and its causes (httpx wraps httpcore's exception, which
wraps the socket's or ssl's).
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import httpx

from runtime.errors import ToolFailed

__all__ = [
    "CONNECTION_CLOSED",
    "CONNECT_FAILED",
    "NETWORK_ERROR",
    "PROTOCOL_ERROR",
    "TLS_ERROR",
    "wire_failure",
]

CONNECT_FAILED = "connect_failed"
CONNECTION_CLOSED = "connection_closed"
PROTOCOL_ERROR = "protocol_error"
TLS_ERROR = "tls_error"
NETWORK_ERROR = "network_error"

#: How h11 and httpcore say that the server hung up early (both raise RemoteProtocolError
#: for it, the same type as for a reply that is not HTTP).
_HUNG_UP = ("server disconnected", "peer closed connection")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them
    (anyio raises "All connection attempts failed" from the attempts' errors)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        cur = todo.pop(0)
        if id(cur) in seen:
            continue
        seen.add(id(cur))
        yield cur
        if isinstance(cur, BaseExceptionGroup):
            todo.extend(cur.exceptions)
        for nxt in (cur.__cause__, cur.__context__):
            if nxt is not None:
                todo.append(nxt)


def _classify(exc: BaseException) -> tuple[str, str]:
    """(reason, what happened in words) for a failed exchange."""
    chain = list(_chain(exc))
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        return TLS_ERROR, "the server's TLS certificate could not be verified"
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return TLS_ERROR, "the TLS handshake failed (does the port speak TLS?)"
    if isinstance(exc, httpx.ConnectError) or any(
        isinstance(e, ConnectionRefusedError) for e in chain
    ):
        if any(isinstance(e, ConnectionRefusedError) for e in chain):
            return CONNECT_FAILED, "could not connect: connection refused"
        return CONNECT_FAILED, "could not connect to the server"
    if isinstance(exc, httpx.RemoteProtocolError):
        if str(exc).lower().startswith(_HUNG_UP):
            return CONNECTION_CLOSED, "the server closed the connection before a complete reply"
        return PROTOCOL_ERROR, "the server's reply is not valid HTTP/1.1"
    if isinstance(exc, httpx.LocalProtocolError | httpx.UnsupportedProtocol):
        return PROTOCOL_ERROR, "the request could not be sent as HTTP/1.1"
    if isinstance(exc, httpx.ReadError | httpx.WriteError) or any(
        isinstance(e, ConnectionResetError | BrokenPipeError | ConnectionAbortedError)
        for e in chain
    ):
        return CONNECTION_CLOSED, "the connection was dropped"
    return NETWORK_ERROR, "network error"


def wire_failure(doing: str, exc: BaseException) -> ToolFailed:
    """The ToolFailed for ``exc`` (an httpx or OS error) while ``doing`` ("request to
    'http://…'"): ``details["reason"]`` one of the classes above, the library's own text
    kept in the message."""
    reason, what = _classify(exc)
    text = str(exc) or type(exc).__name__
    return ToolFailed(f"{doing} failed: {what} ({text})", reason=reason)
