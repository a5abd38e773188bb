"""DNS-rebinding protection on every loopback address the server may be bound to.

The endpoint has no authentication, so on loopback the Host and Origin checks are what keep
a web page in the user's browser out (a page on evil.example that rebinds its name to the
loopback address sends ``Host: evil.example``). The SDK turns them on only when the host it
is told is one of three literals (127.0.0.1, localhost, ::1): ``--http 127.0.0.2:PORT`` or
``--http [0:0:0:0:0:0:0:1]:PORT``, loopback too and served without ``--allow-remote``, had
no check at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.mcp.conftest import ACCEPT, INITIALIZE, HttpServer, fixture_argv


@pytest.fixture(params=["127.0.0.1", "127.0.0.2", "[0:0:0:0:0:0:0:1]", "localhost"])
def served(request: pytest.FixtureRequest, workspace: Path) -> Iterator[str]:
    argv = fixture_argv(workspace)
    server = HttpServer([*argv, "--http", f"{request.param}:0"])
    try:
        yield server.url
    finally:
        server.close()


def _post(url: str, **headers: str) -> httpx.Response:
    headers = {"Accept": ACCEPT, **headers}
    return httpx.post(url, json=INITIALIZE, headers=headers, timeout=10)


def test_a_foreign_host_is_refused(served: str) -> None:
    port = urlsplit(served).port
    assert _post(served, Host=f"evil.example:{port}").status_code == 421


def test_a_foreign_origin_is_refused(served: str) -> None:
    port = urlsplit(served).port
    assert _post(served, Origin=f"http://evil.example:{port}").status_code == 403


def test_the_servers_own_address_is_served(served: str) -> None:
    # Benign control: a client naming the address it connected to (Host as httpx sends
    # it, and an Origin of the same address) is served.
    netloc = urlsplit(served).netloc
    response: Any = _post(served, Origin=f"http://{netloc}")
    assert response.status_code == 200, response.text
    assert _post(served).status_code == 200


@pytest.mark.anyio
async def test_the_guard_is_the_one_host_and_origin_check() -> None:
    # The SDK's own check (TransportSecuritySettings) repeated the guard's with the same
    # lists; it is off, and the guard in front refuses alone. Behind the guard, the SDK's
    # app answers a foreign Host as any other request (a GET without a session: 400);
    # through the guard it is refused.
    from mcp.server import Server

    from runtime.mcp._http_guard import SessionVersions, guarded_app, served_names

    served = served_names("127.0.0.1", "127.0.0.1", 8000, loopback=True)
    guard = guarded_app(Server("t"), path="/mcp", served=served, versions=SessionVersions())
    inner: Any = guard.app
    sse = {"Accept": "text/event-stream"}
    foreign = {"Host": "evil.example:8000", **sse}
    origin = {"Host": "127.0.0.1:8000", "Origin": "http://evil.example:8000", **sse}
    async with inner.router.lifespan_context(inner):
        for app, host_status, origin_status in ((inner, 400, 400), (guard, 421, 403)):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                assert (await client.get("/mcp", headers=foreign)).status_code == host_status
                assert (await client.get("/mcp", headers=origin)).status_code == origin_status


def test_how_served_names_match() -> None:
    from runtime.mcp._http_guard import served_names

    served = served_names("127.0.0.2", "127.0.0.2", 8000, loopback=True)
    for good in ("127.0.0.2:8000", "LOCALHOST:1", "[::1]:65535", "127.0.0.1:80"):
        assert served.host_ok(good), good
    # A port that is no number, a name that only starts like one served, no port at all
    # (as the SDK's check: loopback is served at any port, always named).
    for bad in ("localhost:80x", "localhost:²", "localhost.evil.example:80", "localhost", None):
        assert not served.host_ok(bad), bad
    assert served.origin_ok(None) and served.origin_ok("http://localhost:3000")
    for bad_origin in ("null", "https://localhost:3000", "http://evil.example:8000"):
        assert not served.origin_ok(bad_origin), bad_origin


@pytest.mark.anyio
async def test_only_checked_http_requests_reach_the_app_behind_the_guard() -> None:
    # A WebSocket (which a page may open to any host: no CORS) is closed by the guard,
    # whatever its Host, before the SDK's app sees it; lifespan events still reach it.
    from runtime.mcp._http_guard import HttpGuard, SessionVersions, served_names

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    served = served_names("127.0.0.1", "127.0.0.1", 8000, loopback=True)
    guard = HttpGuard(app, versions=SessionVersions(), served=served)
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        sent.append(message)

    for host in (b"127.0.0.1:8000", b"evil.example:8000"):
        scope = {"type": "websocket", "path": "/mcp", "headers": [(b"host", host)]}
        await guard(scope, receive, send)
    assert seen == []
    assert [m["type"] for m in sent] == ["websocket.close"] * 2
    await guard({"type": "lifespan"}, receive, send)
    assert seen == ["lifespan"]


def test_a_host_without_a_port_is_port_80() -> None:
    # curl and browsers leave the default port out of Host (and a browser out of Origin):
    # bound to port 80, every standard client was refused with 421. A portless Host is
    # port 80's only; a rebound page's own name is still refused.
    from runtime.mcp._http_guard import served_names

    at_80 = served_names("127.0.0.1", "127.0.0.1", 80, loopback=True)
    for host in ("localhost", "127.0.0.1", "[::1]", "LOCALHOST", "localhost:80"):
        assert at_80.host_ok(host), host
    assert at_80.origin_ok("http://localhost") and at_80.origin_ok("http://127.0.0.1")
    assert not at_80.host_ok("evil.example") and not at_80.host_ok("evil.example:80")
    assert not at_80.origin_ok("http://evil.example")
    at_8000 = served_names("127.0.0.1", "127.0.0.1", 8000, loopback=True)
    assert not at_8000.host_ok("localhost")
    assert at_8000.host_ok("localhost:8000")
    # An Origin names the page, not this server: http://localhost is loopback's origin at
    # port 80 on any server port (test_an_origin_is_judged_with_its_default_port).
    assert at_8000.origin_ok("http://localhost")
    remote = served_names("192.0.2.7", "192.0.2.7", 80, loopback=False)
    assert remote.host_ok("192.0.2.7") and remote.host_ok("192.0.2.7:80")
    assert not remote.host_ok("localhost") and not remote.origin_ok("http://192.0.2.7")
    remote_8080 = served_names("192.0.2.7", "192.0.2.7", 8080, loopback=False)
    assert not remote_8080.host_ok("192.0.2.7")


def test_an_origin_is_judged_with_its_default_port() -> None:
    # http://localhost and http://localhost:80 are one origin (RFC 6454): a page at
    # http://localhost was refused (403) where the same origin written with :80 passed,
    # although loopback's names are served at any port. Scheme and name case, and a
    # port's leading zeros, do not make another origin either.
    from runtime.mcp._http_guard import served_names

    at_8000 = served_names("127.0.0.1", "127.0.0.1", 8000, loopback=True)
    for origin in (
        "http://localhost",
        "http://localhost:80",
        "HTTP://LocalHost",
        "http://127.0.0.1",
        "http://[::1]",
        "http://localhost:080",
    ):
        assert at_8000.origin_ok(origin), origin
    for origin in ("https://localhost", "http://evil.example", "http://localhost.evil", "null"):
        assert not at_8000.origin_ok(origin), origin
    named = served_names(
        "127.0.0.1",
        "127.0.0.1",
        8000,
        loopback=True,
        allowed_origins=["https://app.example", "http://tool.example:8080"],
    )
    for origin in ("https://app.example", "https://app.example:443", "HTTPS://APP.EXAMPLE"):
        assert named.origin_ok(origin), origin
    assert named.origin_ok("http://tool.example:8080")
    for origin in ("http://app.example", "https://app.example:8443", "http://tool.example"):
        assert not named.origin_ok(origin), origin
