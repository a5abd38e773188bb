"""DNS-rebinding protection on every loopback address the server may be bound to.

The endpoint has no authentication, so on loopback the Host and Origin checks are what keep
a web page in the user's browser out (a page on evil.example that rebinds its name to the
loopback address sends ``Host: evil.example``). The SDK turns them on only when the host it
is told is one of three literals (127.0.0.1, localhost, ::1): ``--http 127.0.0.2:PORT`` or
``--http [0:0:0:0:0:0:0:1]:PORT``, loopback too and served without ``--allow-remote``, had
no check at all.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.mcp.conftest import ACCEPT, FIXTURE_SERVER, INITIALIZE, HttpServer


@pytest.fixture(params=["127.0.0.1", "127.0.0.2", "[0:0:0:0:0:0:0:1]", "localhost"])
def served(request: pytest.FixtureRequest, workspace: Path) -> Iterator[str]:
    argv = [sys.executable, str(FIXTURE_SERVER), "--workspace", str(workspace)]
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
