"""Helpers for the egress tests: local HTTP servers on 127.0.0.1, a policy double, and
network backends that record the address actually dialled."""

# httpcore's backend interface names its parameters "timeout".
# ruff: noqa: ASYNC109
from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address, IPv6Address, ip_address
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

import httpcore

from runtime.egress import EgressGateway, PinnedTransport, address_class


class Verdict(NamedTuple):
    allowed: bool
    rule: str
    reason: str


@dataclass
class FakeRules:
    """Stands in for runtime.policy.network.NetworkRules: hosts allowed by name (None = any),
    non-public addresses reachable only for the hosts in ``named``."""

    allow_hosts: set[str] | None = None
    deny_hosts: set[str] = field(default_factory=set)
    named: set[str] = field(default_factory=set)
    schemes: list[str] = field(default_factory=lambda: ["http", "https"])
    ports: list[int] = field(default_factory=list)
    max_redirects: int = 5
    timeout_s: float = 10.0
    max_response_bytes: int = 1 << 20
    retries: int = 0
    search_endpoint: str | None = None
    seen: list[tuple[str, str, int]] = field(default_factory=list)

    def check(self, scheme: str, host: str, port: int) -> Verdict:
        self.seen.append((scheme, host, port))
        if scheme not in self.schemes:
            return Verdict(False, "network.schemes", f"scheme {scheme} not allowed")
        if self.ports and port not in self.ports:
            return Verdict(False, "network.ports", f"port {port} not allowed")
        if host in self.deny_hosts:
            return Verdict(False, "network.deny", f"{host} is denied")
        if self.allow_hosts is not None and host not in self.allow_hosts:
            return Verdict(False, "default", f"{host} is not in the allow list")
        return Verdict(True, "network.allow", "allowed")

    def address_allowed(
        self, host: str, ip: IPv4Address | IPv6Address, port: int | None = None
    ) -> bool:
        # As NetworkRules: public addresses yes (this double denies none), others only
        # for the named hosts. The gateway asks about every address, public ones too.
        return address_class(ip) is None or host in self.named


class _Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, ctype: str = "text/plain", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.log.append(
            {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": body,
            }
        )
        path = url.path
        if path == "/hello":
            self._send(200, b"hello", X_Server=self.server.name)
        elif path == "/echo":
            data = {
                "method": self.command,
                "body": body.decode("latin-1"),
                "headers": {k.lower(): v for k, v in self.headers.items()},
            }
            self._send(200, json.dumps(data).encode(), "application/json")
        elif path == "/redirect":
            self._send(int(q.get("code", "302")), b"", Location=q["to"])
        elif path == "/big":
            n = int(q["n"])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                while n > 0:
                    self.wfile.write(chunk[: min(n, len(chunk))])
                    n -= len(chunk)
            except OSError:
                pass
        elif path == "/gzip":
            payload = gzip.compress(b"\0" * int(q["n"]))
            self._send(200, payload, "application/octet-stream", Content_Encoding="gzip")
        elif path == "/slow":
            self.server.release.wait(10)
            self._send(200, b"late")
        elif path == "/stall":
            # Headers and part of the body, then nothing: the deadline hits mid-body.
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.server.release.wait(10)
        elif path == "/flaky":
            self.server.flaky += 1
            if self.server.flaky <= int(q["fail"]):
                self._send(503, b"busy")
            else:
                self._send(200, b"recovered")
        elif path == "/html":
            self._send(200, HTML_PAGE.encode(), "text/html; charset=utf-8")
        elif path == "/binary":
            self._send(200, bytes(range(256)), "application/octet-stream")
        elif path == "/search":
            n = int(q.get("n", "3"))
            results = [
                {
                    "title": f"Result {i} for {q.get('q')}",
                    "url": f"https://example.org/{i}",
                    "content": f"snippet {i}",
                    "engine": "fake",
                }
                for i in range(n)
            ]
            self._send(
                200,
                json.dumps(
                    {"query": q.get("q"), "format": q.get("format"), "results": results}
                ).encode(),
                "application/json",
            )
        else:
            self._send(404, b"not found")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _handle


HTML_PAGE = """<!doctype html><html><head><title>Doc</title>
<style>body { color: red }</style><script>alert("x")</script></head>
<body><h1>Main Title</h1><p>Some <b>bold</b> text and a <a href="/next">link</a>.</p>
<ul><li>one</li><li>two</li></ul></body></html>"""


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.name = name
        self.log: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.flaky = 0

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that stop reading at their byte cap reset the connection: expected here.
        pass

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def serve(name: str) -> Iterator[Server]:
    server = Server(name)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


class RecordingBackend(httpcore.AsyncNetworkBackend):
    """Wraps httpcore's anyio backend and records every (host, port) actually dialled."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.dialled: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialled.append((host, port))
        return await self.inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise AssertionError("unix sockets are never dialled")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _CannedStream(httpcore.AsyncNetworkStream):
    def __init__(self, response: bytes) -> None:
        self._data = response
        self.written = b""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        chunk, self._data = self._data[:max_bytes], self._data[max_bytes:]
        return chunk

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.written += buffer

    async def aclose(self) -> None:
        pass

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        self.tls_server_hostname = server_hostname
        return self

    def get_extra_info(self, info: str) -> Any:
        return None


class CannedBackend(httpcore.AsyncNetworkBackend):
    """No network at all: records the dial and answers from ``responses[address]`` (or a
    plain 200). Used for "public" addresses, which tests must never really contact."""

    def __init__(self, responses: dict[str, bytes] | None = None) -> None:
        self.responses = responses or {}
        self.dialled: list[tuple[str, int]] = []
        self.streams: list[_CannedStream] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        ip_address(host)  # the gateway must only ever ask for addresses
        self.dialled.append((host, port))
        stream = _CannedStream(
            self.responses.get(host, b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ncanned")
        )
        self.streams.append(stream)
        return stream

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        raise AssertionError("unix sockets are never dialled")

    async def sleep(self, seconds: float) -> None:
        pass


def redirect_response(location: str, status: int = 302) -> bytes:
    return (
        f"HTTP/1.1 {status} Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
    ).encode()


class FakeResolver:
    """name -> list of answers, one per call (the last repeats): rebinding in one line."""

    def __init__(
        self, answers: dict[str, list[list[str]]] | None = None, default: str = "93.184.216.34"
    ) -> None:
        self.answers = answers or {}
        self.default = default
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPv4Address | IPv6Address]:
        self.calls.append(host)
        seq = self.answers.get(host)
        if not seq:
            return [ip_address(self.default)]
        answer = seq.pop(0) if len(seq) > 1 else seq[0]
        return [ip_address(a) for a in answer]


def make_gateway(
    rules: FakeRules, backend: httpcore.AsyncNetworkBackend, resolver: FakeResolver | None = None
) -> EgressGateway:
    return EgressGateway(
        rules,
        resolver=resolver,
        transport_factory=lambda: PinnedTransport(network_backend=backend),
        backoff_s=0.0,
    )
