"""What the Streamable HTTP endpoint answers before the SDK reads a request
(``runtime.mcp._http_guard``): an MCP-Protocol-Version it does not speak, or one that is not
the session's; a JSON-RPC batch, or other JSON that is not one JSON-RPC message; and
Host/Origin on a remote (``--allow-remote``) address, where there was no check at all. Each
with its benign control."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from runtime.errors import ConfigError
from runtime.mcp._http_guard import check_allowed_host, check_allowed_origin, served_names
from tests.mcp.conftest import (
    ACCEPT,
    INITIALIZE,
    HttpServer,
    fixture_argv,
    http_session,
    raw_http_session,
)

LIST = {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}


def _post(url: str, body: Any, headers: dict[str, str], **extra: str) -> httpx.Response:
    return httpx.post(url, json=body, headers={**headers, **extra}, timeout=10)


# -- MCP-Protocol-Version -----------------------------------------------------------------
def test_an_unsupported_version_is_named_as_such(shared_http_server: HttpServer) -> None:
    url = shared_http_server.url
    headers = raw_http_session(url)
    response = _post(url, LIST, headers, **{"MCP-Protocol-Version": "1999-01-01"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022  # the SDK's UNSUPPORTED_PROTOCOL_VERSION
    assert "MCP-Protocol-Version" in error["message"] and "1999-01-01" in error["message"]
    assert "_meta" not in error["message"] and "envelope" not in error["message"]
    assert error["data"]["requested"] == "1999-01-01"
    assert "2025-06-18" in error["data"]["supported"]


def test_a_version_other_than_the_sessions_is_refused(shared_http_server: HttpServer) -> None:
    url = shared_http_server.url
    headers = raw_http_session(url, "2025-06-18")
    for other in ("2025-03-26", "2025-11-25", "2026-07-28"):
        response = _post(url, LIST, headers, **{"MCP-Protocol-Version": other})
        assert response.status_code == 400, other
        error = response.json()["error"]
        assert error["code"] == -32600
        assert "negotiated" in error["message"] and "2025-06-18" in error["message"]


def test_the_negotiated_version_or_none_is_served(shared_http_server: HttpServer) -> None:
    # Benign controls: the session's own version, an older session's own, and no header
    # (the spec's backwards compatibility).
    url = shared_http_server.url
    for version in ("2025-06-18", "2025-03-26", "2025-11-25"):
        headers = raw_http_session(url, version)
        ok = _post(url, LIST, headers, **{"MCP-Protocol-Version": version})
        assert ok.status_code == 200, (version, ok.text)
        assert _post(url, LIST, headers).status_code == 200


@pytest.mark.anyio
async def test_the_sdk_client_sends_what_it_negotiated(shared_http_server: HttpServer) -> None:
    # Benign control: the official client's whole flow (initialize, initialized, the GET
    # stream, requests) passes the check.
    async with http_session(shared_http_server.url) as session:
        assert (await session.list_tools()).tools
        result = await session.call_tool("echo", {"text": "hi"})
        assert result.structured_content == {"echo": "hi"}


# -- batches -------------------------------------------------------------------------------
@pytest.mark.parametrize("body", [[LIST], [], [LIST, LIST]])
def test_a_batch_is_an_invalid_request(shared_http_server: HttpServer, body: Any) -> None:
    url = shared_http_server.url
    headers = raw_http_session(url)
    response = _post(url, body, headers, **{"MCP-Protocol-Version": "2025-06-18"})
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] is None
    assert answer["error"]["code"] == -32600
    assert "batch" in answer["error"]["message"] and len(answer["error"]["message"]) < 120


def test_a_batch_without_a_session_is_an_invalid_request(shared_http_server: HttpServer) -> None:
    response = _post(shared_http_server.url, [INITIALIZE], {"Accept": ACCEPT})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


# -- bodies that are JSON but not one JSON-RPC message ----------------------------------------
NOT_JSONRPC = [
    ({"hello": 1}, None),
    ({}, None),
    (3, None),
    ("x", None),
    (None, None),
    ({"jsonrpc": "2.0", "id": 5}, None),  # neither method nor result
    ({"jsonrpc": "2.0", "id": 5, "result": 1}, None),  # a response whose result is no object
    ({"jsonrpc": "2.0", "method": 3}, None),
    ({"jsonrpc": "1.0", "id": 5, "method": "ping"}, 5),  # a request: its id is readable
    ({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": 3}, 6),
    # An id that is no string or integer: the SDK read this as a notification (202, and
    # the request was never answered).
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
]


@pytest.mark.parametrize(("body", "answer_id"), NOT_JSONRPC)
def test_a_body_that_is_not_jsonrpc_is_an_invalid_request(
    shared_http_server: HttpServer, body: Any, answer_id: Any
) -> None:
    # The SDK answered these -32602 ("invalid params") with a pydantic dump of a kilobyte.
    url = shared_http_server.url
    for headers in (raw_http_session(url), {"Accept": ACCEPT}):  # in a session and not
        raw = json.dumps(body).encode()  # httpx sends no body at all for json=None
        headers = {**headers, "Content-Type": "application/json"}
        response = httpx.post(url, content=raw, headers=headers, timeout=10)
        assert response.status_code == 400
        answer = response.json()
        assert answer["id"] == answer_id
        error = answer["error"]
        assert error["code"] == -32600, error
        assert len(error["message"]) < 120 and "validation" not in error["message"].lower()


def test_bodies_that_are_not_batches_reach_the_sdk(shared_http_server: HttpServer) -> None:
    # Benign controls: leading whitespace before an object is still one request; text
    # that starts like an array but is not JSON keeps the SDK's parse error.
    url = shared_http_server.url
    headers = {**raw_http_session(url), "Content-Type": "application/json"}
    ok = httpx.post(
        url, content=b' \n\t{"jsonrpc":"2.0","id":5,"method":"tools/list"}', headers=headers
    )
    assert ok.status_code == 200, ok.text
    bad = httpx.post(url, content=b"[1, 2", headers=headers, timeout=10)
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == -32700


def test_a_body_the_sdk_cannot_read_keeps_its_parse_error(shared_http_server: HttpServer) -> None:
    # JSON-RPC over HTTP is UTF-8 (RFC 8259 8.1): a batch in UTF-16, or after a BOM, is
    # text the SDK cannot parse (-32700), not a batch the check read its own way (-32600).
    url = shared_http_server.url
    headers = {**raw_http_session(url), "Content-Type": "application/json"}
    batch = json.dumps([LIST])
    for raw in (batch.encode("utf-16"), batch.encode("utf-32"), b"\xef\xbb\xbf" + batch.encode()):
        response = httpx.post(url, content=raw, headers=headers, timeout=10)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700, raw[:8]


DEEP = "[" * 2_000 + "]" * 2_000


@pytest.mark.parametrize(
    ("body", "answer_id"),
    [
        # Too deep for Python's parser too: the id before the deep value, or null.
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + DEEP + "}", 7),
        ('{"jsonrpc":"2.0","method":"tools/call","params":{"x":' + DEEP + '},"id":8}', None),
        ('{"jsonrpc":"2.0","id":9,"result":{},"x":' + DEEP + "}", None),  # no request
        # Past pydantic-core's 200 levels but not Python's: the id wherever it is.
        (
            '{"jsonrpc":"2.0","method":"tools/call","params":{"x":'
            + "[" * 300
            + "]" * 300
            + '},"id":8}',
            8,
        ),
    ],
)
def test_a_body_too_deep_to_read_is_a_parse_error_under_its_id(
    shared_http_server: HttpServer, body: str, answer_id: Any
) -> None:
    # Past the parser's 200 levels the SDK answered id null whatever the body said: the
    # id read before the deep value comes back now (null when it comes after).
    url = shared_http_server.url
    stateless = {"Accept": ACCEPT, "MCP-Protocol-Version": "2026-07-28"}
    for headers in (raw_http_session(url), stateless):
        headers = {**headers, "Content-Type": "application/json"}
        response = httpx.post(url, content=body.encode(), headers=headers, timeout=10)
        assert response.status_code == 400
        answer = response.json()
        assert answer["id"] == answer_id
        assert answer["error"]["code"] == -32700, answer


# -- Host and Origin on a remote address -----------------------------------------------------
def _own_address() -> str:
    """A non-loopback address of this host (the route's source; no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))
        except OSError:
            pytest.skip("no non-loopback address")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("no non-loopback address")
    return address


def _remote(workspace: Path, address: str, *options: str) -> Iterator[str]:
    argv = fixture_argv(workspace)
    server = HttpServer([*argv, "--http", f"{address}:0", "--allow-remote", *options])
    try:
        yield server.url
    finally:
        server.close()


@pytest.fixture
def remote(workspace: Path) -> Iterator[str]:
    yield from _remote(workspace, _own_address())


@pytest.fixture
def wildcard(workspace: Path) -> Iterator[str]:
    extra = ["--allowed-host", "mcp.example:*", "--allowed-origin", "https://app.example"]
    yield from _remote(workspace, "0.0.0.0", *extra)


def _init(url: str, **headers: str) -> int:
    return httpx.post(
        url, json=INITIALIZE, headers={"Accept": ACCEPT, **headers}, timeout=10
    ).status_code


def test_remote_foreign_host_and_origin_are_refused(remote: str) -> None:
    port = urlsplit(remote).port
    assert _init(remote, Host=f"evil.example:{port}") == 421
    assert _init(remote, Host=f"localhost:{port}") == 421  # not the address served
    assert _init(remote, Origin=f"http://{urlsplit(remote).netloc}") == 403  # none by default
    assert _init(remote, Origin="https://evil.example") == 403


def test_remote_own_address_without_origin_is_served(remote: str) -> None:
    # Benign control: a client (not a browser: no Origin) naming the address it reached.
    assert _init(remote) == 200


def test_wildcard_serves_local_names_and_what_is_allowed(wildcard: str) -> None:
    port = urlsplit(wildcard).port
    base = wildcard.replace("0.0.0.0", "127.0.0.1")
    assert _init(base) == 200  # Host 127.0.0.1:PORT: this host's own name for itself
    assert _init(base, Host=f"mcp.example:{port}") == 200  # --allowed-host NAME:*
    assert _init(base, Origin="https://app.example") == 200  # --allowed-origin
    assert _init(base, Host=f"evil.example:{port}") == 421
    assert _init(base, Origin="https://app.example.evil.example") == 403
    assert _init(base, Origin=f"http://127.0.0.1:{port}") == 403


def test_allowed_values_are_checked() -> None:
    assert check_allowed_host("MCP.example.com") == "mcp.example.com"
    for good in ("mcp.example:8080", "mcp.example:*", "[::1]:8080", "[fd00::2]", "10.0.0.5"):
        check_allowed_host(good)
    for bad in ("", "*", "http://x", "x/y", "x:99999", "x:", "::1", "a b"):
        with pytest.raises(ConfigError):
            check_allowed_host(bad)
    for good in ("https://app.example", "http://localhost:3000", "http://x:*"):
        check_allowed_origin(good)
    for bad in ("*", "app.example", "https://app.example/", "ftp://x", "https://*"):
        with pytest.raises(ConfigError):
            check_allowed_origin(bad)


def test_an_allowed_origin_that_can_never_match_is_refused() -> None:
    # --allowed-origin took any port (empty, not a number, out of range) and an unbracketed
    # IPv6 address: none can match a browser's Origin, so every request of the page it
    # was meant for got 403, while --allowed-host refused the same mistakes.
    for bad in (
        "http://app.example:",
        "http://app.example:abc",
        "https://app.example:99999",
        "https://app.example:0",
        "http://app.example:\u00b2",  # a digit to str.isdigit, not to int()
        "http://::1",
        "http://::1:8080",
        "http://[::1",
    ):
        with pytest.raises(ConfigError, match="allowed-origin"):
            check_allowed_origin(bad)
    for good in ("http://[::1]", "http://[::1]:8080", "http://[::1]:*", "https://app.example:1"):
        assert check_allowed_origin(good) == good
    with pytest.raises(ConfigError, match="allowed-host"):
        check_allowed_host("app.example:\u00b2")  # was a ValueError from int()


def test_a_host_port_with_leading_zeros_matches_the_port_clients_send() -> None:
    # '--allowed-host example.com:080' was accepted but kept as written, and clients write
    # the port as a number (curl, browsers and httpx send 'example.com:8080' for a URL's
    # ':08080'): it matched no request, while the origin https://example.com:0443 was
    # normalised and matched. Both the allowed value and the request's Host are normalised.
    assert check_allowed_host("Example.com:080") == "example.com:80"
    assert check_allowed_host("[::1]:00443") == "[::1]:443"
    served = served_names(
        "127.0.0.1",
        "127.0.0.1",
        8080,
        loopback=True,
        allowed_hosts=[check_allowed_host("example.com:080")],
        allowed_origins=[check_allowed_origin("https://example.com:0443")],
    )
    assert served.host_ok("example.com:80") and served.host_ok("example.com:080")
    assert not served.host_ok("example.com:8080") and not served.host_ok("example.com")
    assert served.origin_ok("https://example.com:443")


def test_a_port_of_thousands_of_digits_is_no_port() -> None:
    # int() of a run of digits past 4,300 raises: a Host (or Origin) header with such a port
    # was a 500 and a traceback in the server's log, and such an --allowed-host value a
    # traceback at start. It is a port that matches nothing, and a refused value.
    huge = "1" * 5000
    served = served_names(
        "0.0.0.0",
        "0.0.0.0",
        8080,
        loopback=False,
        allowed_hosts=[check_allowed_host("example.com:8080")],
        allowed_origins=[check_allowed_origin("https://example.com:8080")],
    )
    assert not served.host_ok(f"example.com:{huge}")
    assert not served.origin_ok(f"https://example.com:{huge}")
    assert served.host_ok("example.com:" + "0" * 5000 + "8080")  # leading zeros: a number
    assert served.origin_ok("https://example.com:" + "0" * 5000 + "8080")
    for bad in (f"example.com:{huge}", f"example.com:0{huge}"):
        with pytest.raises(ConfigError):
            check_allowed_host(bad)
        with pytest.raises(ConfigError):
            check_allowed_origin(f"http://{bad}")


# -- a request id still in flight ----------------------------------------------------------
def test_an_id_in_flight_in_the_session_is_refused(shared_http_server: HttpServer) -> None:
    # A second request reusing the id of one still being answered in the same session took
    # over its response stream: the first result was lost and its POST stayed open for
    # ever. It is Invalid Request now; the first is answered; the id is free afterwards.
    import threading

    url = shared_http_server.url
    headers = raw_http_session(url)

    def call(seconds: float) -> dict[str, Any]:
        params = {"name": "slow", "arguments": {"seconds": seconds}}
        return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}

    first: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: first.append(_post(url, call(2), headers)))
    worker.start()
    threading.Event().wait(0.5)  # a head start: a retry below never races the first POST
    try:
        for _ in range(100):  # until the first is in flight (its POST reached the server)
            again = _post(url, call(0), headers)
            if again.status_code == 400:
                break
            threading.Event().wait(0.02)
    finally:
        worker.join(30)
    assert again.status_code == 400, again.text
    error = again.json()
    assert error["id"] == 7 and error["error"]["code"] == -32600
    assert "id already in use" in error["error"]["message"]
    assert first and first[0].status_code == 200
    assert '"slept":2' in first[0].text.replace(" ", "")
    reused = _post(url, call(0), headers)
    assert reused.status_code == 200 and '"slept":0' in reused.text.replace(" ", "")
    other = raw_http_session(url)  # another session may use the same id at the same time
    assert _post(url, call(0), other).status_code == 200
