"""A failed exchange says what failed: ``details["reason"]`` (connect_failed,
connection_closed, protocol_error, tls_error) and a sentence, with the library's own text
kept. They were all tool_error with details {} and only httpx's or ssl's words ("All
connection attempts failed", "[SSL: WRONG_VERSION_NUMBER] ... (_ssl.c:1006)"). Real
servers on 127.0.0.1 that misbehave on purpose, each in its own way."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from egress_support import FakeResolver, FakeRules, RecordingBackend, Server, make_gateway
from test_network_tools import call, make_ctx

from runtime import SyncBroker
from runtime.egress import EgressGateway
from runtime.errors import ToolFailed

Behaviour = Callable[[socket.socket], None]


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk


def _hang_up(conn: socket.socket) -> None:
    _read_request(conn)


def _half_body(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")


def _garbage(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(b"SPDY/9 hello there\r\n\r\n")


def _plain_http(conn: socket.socket) -> None:
    # What a plain HTTP server answers to a TLS ClientHello: an HTTP error, not TLS.
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


@pytest.fixture
def misbehaving() -> Iterator[Callable[[Behaviour], int]]:
    """Starts a one-thread server on 127.0.0.1 doing ``behaviour`` to every connection,
    then closing it; returns its port."""
    listeners: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(behaviour: Behaviour) -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.settimeout(0.2)
        listeners.append(sock)

        def loop() -> None:
            while sock.fileno() != -1:
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                with conn, contextlib.suppress(OSError):
                    conn.settimeout(5)
                    behaviour(conn)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        threads.append(thread)
        return int(sock.getsockname()[1])

    yield start
    for sock in listeners:
        sock.close()
    for thread in threads:
        thread.join(5)


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _fail(url: str) -> ToolFailed:
    async with EgressGateway(FakeRules(named={"127.0.0.1"}), backoff_s=0.0) as gw:
        with pytest.raises(ToolFailed) as info:
            await gw.handle("http", {"url": url, "timeout_s": 5})
    return info.value


@pytest.mark.anyio
async def test_connection_refused() -> None:
    exc = await _fail(f"http://127.0.0.1:{_closed_port()}/")
    assert exc.details["reason"] == "connect_failed"
    assert "could not connect: connection refused" in exc.message
    assert "All connection attempts failed" in exc.message  # the library's text is kept


@pytest.mark.anyio
@pytest.mark.parametrize("behaviour", [_hang_up, _half_body], ids=["no_reply", "half_body"])
async def test_connection_dropped(
    misbehaving: Callable[[Behaviour], int], behaviour: Behaviour
) -> None:
    exc = await _fail(f"http://127.0.0.1:{misbehaving(behaviour)}/")
    assert exc.details["reason"] == "connection_closed"
    assert "the server closed the connection before a complete reply" in exc.message


@pytest.mark.anyio
async def test_garbage_status_line(misbehaving: Callable[[Behaviour], int]) -> None:
    exc = await _fail(f"http://127.0.0.1:{misbehaving(_garbage)}/")
    assert exc.details["reason"] == "protocol_error"
    assert "not valid HTTP/1.1" in exc.message and "status line" in exc.message


@pytest.mark.anyio
async def test_tls_to_a_plain_http_port(misbehaving: Callable[[Behaviour], int]) -> None:
    exc = await _fail(f"https://127.0.0.1:{misbehaving(_plain_http)}/")
    assert exc.details["reason"] == "tls_error"
    assert "TLS handshake failed" in exc.message and "SSL" in exc.message


_REQ = httpx.Request("GET", "http://x.example/")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (httpx.ConnectError("refused", request=_REQ), "connect_failed"),
        (httpx.ReadError("reset", request=_REQ), "connection_closed"),
        (httpx.WriteError("broken", request=_REQ), "connection_closed"),
        (ConnectionResetError(104, "reset"), "connection_closed"),
        (httpx.RemoteProtocolError("illegal status line", request=_REQ), "protocol_error"),
        (httpx.LocalProtocolError("bad", request=_REQ), "protocol_error"),
        (httpx.UnsupportedProtocol("h3", request=_REQ), "protocol_error"),
        (httpx.ProxyError("proxy"), "network_error"),
    ],
)
async def test_every_failure_has_a_reason(exc: Exception, reason: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    gw = EgressGateway(
        FakeRules(), resolver=FakeResolver(), transport_factory=lambda: httpx.MockTransport(handler)
    )
    async with gw:
        with pytest.raises(ToolFailed) as info:
            await gw.handle("http", {"url": "http://x.example/"})
    assert info.value.details["reason"] == reason
    assert info.value.__cause__ is exc


@pytest.mark.anyio
async def test_a_batch_page_names_the_reason(server: Server, tmp_path: Path) -> None:
    """web_fetch's batch carries on after a failed page: the page keeps the reason."""
    urls = [f"http://127.0.0.1:{_closed_port()}/", f"{server.base}/hello"]
    async with make_gateway(FakeRules(named={"127.0.0.1"}), RecordingBackend()) as gw:
        result = await call("web_fetch", {"urls": urls}, make_ctx(gw, tmp_path))
    dead, alive = result["pages"]
    assert dead["reason"] == "connect_failed" and dead["error_type"] == "tool_error"
    assert alive["content"] == "hello"


def _policy(tmp_path: Path, *ports: int) -> Path:
    path = tmp_path / "policy.toml"
    allow = ", ".join(f'"127.0.0.1:{p}"' for p in ports)
    path.write_text(
        f"""
version = 1
default = "deny"
[categories]
network = "allow"
[network]
allow = [{allow}]
allow_private = true
"""
    )
    return path


@pytest.mark.sandbox
def test_the_reason_reaches_the_caller_through_the_sandbox(
    tmp_path: Path, server: Server, misbehaving: Callable[[Behaviour], int]
) -> None:
    """The tools run sandboxed and ask the broker's gateway: the call's error is the
    gateway's, reason included, and a batch page gets it across the channel."""
    closed, garbage = _closed_port(), misbehaving(_garbage)
    port = server.server_address[1]
    with SyncBroker(
        workspace=tmp_path / "ws", policy=_policy(tmp_path, closed, garbage, port)
    ) as b:
        refused = b.call({"tool": "http_get", "arguments": {"url": f"http://127.0.0.1:{closed}/"}})
        assert refused.error is not None and refused.error.type == "tool_error"
        assert refused.error.details["reason"] == "connect_failed", refused.error
        assert "connection refused" in refused.error.message
        urls = [f"http://127.0.0.1:{garbage}/", f"{server.base}/hello"]
        batch = b.call({"tool": "web_fetch", "arguments": {"urls": urls}})
        assert batch.success, batch.error
        bad, good = batch.result["pages"]
        assert bad["reason"] == "protocol_error" and good["content"] == "hello"
