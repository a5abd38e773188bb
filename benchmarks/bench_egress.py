"""Egress gateway overhead: GETs of a small body from a local server, side by side.

    PYTHONPATH=. /work/venv/bin/python benchmarks/bench_egress.py [N]

Prints per-request latency of a bare httpx.AsyncClient (keep-alive off, so both sides open a
connection per request, as the gateway does by design) and of EgressGateway.handle (strict
parse, policy check, address classification, pinned dial, capped read), and their ratio.
"""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address, IPv6Address
from typing import Any, NamedTuple

import anyio
import httpx

from runtime.egress import EgressGateway


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = b"x" * 1024
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Verdict(NamedTuple):
    allowed: bool
    rule: str
    reason: str


class _Rules:
    schemes = ["http", "https"]
    ports: list[int] = []
    max_redirects = 5
    timeout_s = 10.0
    max_response_bytes = 1 << 20
    retries = 0
    search_endpoint = None

    def check(self, scheme: str, host: str, port: int) -> _Verdict:
        return _Verdict(True, "bench", "")

    def address_allowed(self, host: str, ip: IPv4Address | IPv6Address) -> bool:
        return host == "127.0.0.1"


async def _bench(url: str, n: int) -> tuple[float, float]:
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as client:
        for _ in range(20):
            await client.get(url)
        t0 = time.perf_counter()
        for _ in range(n):
            (await client.get(url)).read()
        bare = (time.perf_counter() - t0) / n
    async with EgressGateway(_Rules()) as gw:
        for _ in range(20):
            await gw.handle("http", {"url": url})
        t0 = time.perf_counter()
        for _ in range(n):
            await gw.handle("http", {"url": url})
        gateway = (time.perf_counter() - t0) / n
    return bare, gateway


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        bare, gateway = anyio.run(_bench, url, n)
    finally:
        server.shutdown()
        server.server_close()
    print(f"requests: {n} x GET 1 KiB from 127.0.0.1")
    print(f"bare httpx (no keep-alive): {bare * 1e6:8.0f} us/request")
    print(f"EgressGateway.handle:       {gateway * 1e6:8.0f} us/request")
    print(f"ratio gateway / bare:       {gateway / bare:8.2f}")


if __name__ == "__main__":
    main()
