"""Slowloris on the Streamable HTTP endpoint: connections that never finish their request
head were held for ever (uvicorn has no head deadline before a connection's first request
completes, and no cap on connections), until the process ran out of descriptors and every
client, new or in a session, timed out. Now the open connections are capped (one past the
cap is answered 503 and closed at once), a request head must arrive within a deadline,
and a long answer (a slow tools/call's stream) is not cut by that deadline."""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.mcp.conftest import ACCEPT, HttpServer, fixture_argv, raw_http_session

CAP = 40
HEAD_TIMEOUT_S = 1.5
BODY_TIMEOUT_S = 2.0


@pytest.fixture
def capped_server(workspace: Path) -> Iterator[HttpServer]:
    server = HttpServer(
        fixture_argv(
            workspace,
            "--http",
            "127.0.0.1:0",
            "--max-connections",
            str(CAP),
            "--head-timeout",
            str(HEAD_TIMEOUT_S),
            "--body-timeout",
            str(BODY_TIMEOUT_S),
        )
    )
    yield server
    server.close()


def _half_open(url: str, n: int) -> list[socket.socket]:
    """``n`` connections that send the start of a request head and nothing more."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    socks = []
    for _ in range(n):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        socks.append(sock)
    return socks


def _closed_by_server(sock: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing ``sock`` (None: still open after ``within``)."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass  # closed with our unread head in its buffer: the kernel resets
    return received


def test_half_open_connections_are_capped_and_time_out(capped_server: HttpServer) -> None:
    socks = _half_open(capped_server.url, 300)
    try:
        # Past the cap: answered 503 and closed at once.
        refused = [s for s in socks[CAP + 5 :] if _closed_by_server(s, 5) is not None]
        assert len(refused) == len(socks) - CAP - 5
        # Within the cap: held only until the head deadline, then closed without answer.
        started = time.monotonic()
        held = [_closed_by_server(s, HEAD_TIMEOUT_S + 10) for s in socks[: CAP - 5]]
        assert held == [b""] * (CAP - 5)  # closed, nothing answered
        assert time.monotonic() - started < HEAD_TIMEOUT_S + 10
    finally:
        for s in socks:
            s.close()
    # The server still serves a new client.
    headers = raw_http_session(capped_server.url)
    listed = httpx.post(
        capped_server.url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=headers,
        timeout=10,
    )
    assert listed.status_code == 200 and "echo" in listed.text


def test_one_past_the_cap_is_answered_503(capped_server: HttpServer) -> None:
    socks = _half_open(capped_server.url, CAP)
    try:
        time.sleep(0.2)
        extra = httpx.post(capped_server.url, json={}, headers={"Accept": ACCEPT}, timeout=10)
    finally:
        for s in socks:
            s.close()
    assert extra.status_code == 503


def test_the_head_deadline_does_not_cut_a_long_answer(capped_server: HttpServer) -> None:
    # The deadline is for the request's head only: a call that runs past it (here twice
    # as long) is answered on its open stream.
    headers = raw_http_session(capped_server.url)
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 2 * HEAD_TIMEOUT_S}},
    }
    answer = httpx.post(capped_server.url, json=call, headers=headers, timeout=30)
    assert answer.status_code == 200
    data = [line for line in answer.text.splitlines() if line.startswith("data:")]
    result = json.loads(data[-1].removeprefix("data:"))["result"]
    assert result["structuredContent"] == {"slept": 2 * HEAD_TIMEOUT_S}


def _head(url: str, length: int, headers: dict[str, str] | None = None) -> socket.socket:
    """A connection that has sent a whole POST head announcing a body of ``length``."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    lines = [
        f"POST {parts.path} HTTP/1.1",
        f"Host: {parts.hostname}:{parts.port}",
        f"Accept: {ACCEPT}",
        "Content-Type: application/json",
        f"Content-Length: {length}",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def test_a_body_that_dribbles_is_answered_408(capped_server: HttpServer) -> None:
    # A whole head, then a byte now and then: the connection (and a request task) was held
    # for as long as the client liked, bounded only by the connection cap.
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    socks = [_head(capped_server.url, len(body)) for _ in range(3)]
    started = time.monotonic()
    answers: dict[socket.socket, bytes] = {}
    try:
        for i in range(len(body) - 1):  # never the whole body
            open_socks = [sock for sock in socks if sock not in answers]
            if not open_socks or time.monotonic() - started > BODY_TIMEOUT_S + 10:
                break
            for sock in open_socks:
                if select.select([sock], [], [], 0)[0]:  # the server answered (or closed)
                    answers[sock] = _closed_by_server(sock, 10) or b""
                else:
                    with contextlib.suppress(OSError):  # closed since: read next turn
                        sock.sendall(body[i : i + 1])
            time.sleep(0.25)
        elapsed = time.monotonic() - started
    finally:
        for sock in socks:
            sock.close()
    assert len(answers) == len(socks), "a dribbling body is still being read"
    for answer in answers.values():
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert BODY_TIMEOUT_S - 0.5 < elapsed < BODY_TIMEOUT_S + 5
    # The server still serves, and said so once (rate-limited), not once per connection.
    headers = raw_http_session(capped_server.url)
    listed = httpx.post(
        capped_server.url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=headers,
        timeout=10,
    )
    assert listed.status_code == 200 and "echo" in listed.text
    capped_server.proc.terminate()
    assert capped_server.proc.stderr is not None
    logged = capped_server.proc.stderr.read()
    assert logged.count("answered 408") == 1, logged[-2000:]


def test_a_body_sent_in_parts_within_the_deadline_is_served(capped_server: HttpServer) -> None:
    headers = raw_http_session(capped_server.url)
    body = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).encode()
    sock = _head(capped_server.url, len(body), headers)
    try:
        half = len(body) // 2
        sock.sendall(body[:half])
        time.sleep(BODY_TIMEOUT_S / 2)
        sock.sendall(body[half:])
        sock.settimeout(10)
        answer = b""
        while b"tools" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    assert b"echo" in answer


def test_accept_out_of_descriptors_is_one_line_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    # asyncio logged each failed accept with a traceback (36 MB of them under the flood).
    import asyncio
    import errno

    from runtime.mcp._connections import quiet_accept_errors

    loop = asyncio.new_event_loop()
    other: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: other.append(context))
    try:
        previous = quiet_accept_errors(loop)
        context = {
            "message": "socket.accept() out of system resource",
            "exception": OSError(errno.EMFILE, "Too many open files"),
        }
        with caplog.at_level("WARNING", logger="runtime.mcp"):
            for _ in range(100):
                loop.call_exception_handler(context)
            loop.call_exception_handler({"message": "something else"})
        loop.set_exception_handler(previous)
    finally:
        loop.close()
    lines = [r for r in caplog.records if "out of file descriptors" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert other == [{"message": "something else"}]


def test_a_pipelined_request_body_has_the_deadline_too(capped_server: HttpServer) -> None:
    # A GET and, in the same write, a POST head with a body that never comes: the POST's
    # head sat in h11's buffer while the GET was answered, so no data arrived after it
    # and no body deadline was armed; the connection was held for ever (32 of them held
    # every connection the server had).
    parts = urlsplit(capped_server.url)
    assert parts.hostname is not None and parts.port is not None
    host = f"Host: {parts.hostname}:{parts.port}\r\n"
    pipelined = (
        f"GET /nothing HTTP/1.1\r\n{host}\r\n"
        f"POST {parts.path} HTTP/1.1\r\n{host}Accept: {ACCEPT}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    ).encode()
    socks = []
    for _ in range(3):
        sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
        sock.sendall(pipelined)
        socks.append(sock)
    started = time.monotonic()
    try:
        answers = [_closed_by_server(s, BODY_TIMEOUT_S + 10) for s in socks]
    finally:
        for s in socks:
            s.close()
    for answer in answers:
        assert answer is not None, "a pipelined request's body is still being waited for"
        assert b"HTTP/1.1 408 " in answer, answer[-300:]
    assert time.monotonic() - started < BODY_TIMEOUT_S + 5


def test_abandoned_bodies_are_one_line_without_traceback(capped_server: HttpServer) -> None:
    # A client that sends a head and part of a body, then goes: the SDK logged each one
    # as an ERROR with a 10-line ClientDisconnect traceback (200 of them: 2,000 lines in
    # a second), and each 408 from the body deadline the same. Fewer than the cap (with
    # room for the late one): the server lets go of a closed connection when its loop gets
    # to it, so past the cap the late one could meet 503 instead of its deadline.
    for _ in range(CAP - 10):
        sock = _head(capped_server.url, 1000)
        sock.sendall(b"{")
        sock.close()
    late = _head(capped_server.url, 1000)  # and one cut by the body deadline
    try:
        answer = _closed_by_server(late, BODY_TIMEOUT_S + 10)
    finally:
        late.close()
    assert answer is not None and answer.startswith(b"HTTP/1.1 408 "), answer
    headers = raw_http_session(capped_server.url)  # still serving
    listed = httpx.post(
        capped_server.url,
        json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        headers=headers,
        timeout=10,
    )
    assert listed.status_code == 200
    time.sleep(0.5)
    capped_server.proc.terminate()
    assert capped_server.proc.stderr is not None
    logged = capped_server.proc.stderr.read()
    assert "Traceback" not in logged and "ClientDisconnect" not in logged, logged[-2000:]
    assert "Error handling POST request" not in logged, logged[-2000:]
    assert logged.count("client gone before its request body was read") == 1, logged[-2000:]
