"""Units of the URL client: the incremental SSE parser, the answers to a server's requests,
id matching, and which failures may be sent again (scripted transports behind the gateway)."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.egress import EgressGateway
from runtime.errors import SandboxError
from runtime.mcp._peer import Budget, answer_for, classify, same_id
from runtime.mcp._sse import EventTooLarge, SseEvent, SseParser, SseSyntaxError
from runtime.policy.network import NetworkRules
from tests.mcp.test_url_client import OK, SECRET, Scripted, _Body, client, reply, sse

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("URL_CLIENT_SECRET", SECRET)


def _events(chunks: list[bytes], cap: int = 1 << 20) -> list[SseEvent]:
    parser = SseParser(cap)
    out = [e for chunk in chunks for e in parser.feed(chunk)]
    last = parser.close()
    return [*out, last] if last else out


def test_sse_line_endings_comments_and_fields() -> None:
    body = (
        b": keep-alive\r\n\r\n"
        b"event: endpoint\r\ndata: /messages?x=1\r\n\r\n"
        b"data: a\rdata:b\r\rid: 7\nretry: 5\ndata: {}\n\n"
        b"data: unterminated"
    )
    expected = [
        SseEvent("endpoint", "/messages?x=1"),
        SseEvent("message", "a\nb"),
        SseEvent("message", "{}"),
        SseEvent("message", "unterminated"),
    ]
    assert _events([body]) == expected
    # The same bytes cut anywhere (a CR at a chunk's end may be half of a CRLF).
    for cut in range(1, len(body)):
        assert _events([body[:cut], body[cut:]]) == expected, cut


_LINE = st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n")


@given(st.lists(st.text(alphabet=_LINE, max_size=20)))
def test_sse_data_round_trips(lines: list[str]) -> None:
    body = "".join(f"data: {line}\n" for line in lines) + "\n"
    got = _events([body.encode()])
    assert got == ([SseEvent("message", "\n".join(lines))] if lines else [])


def test_sse_caps_an_event_and_an_unterminated_line() -> None:
    with pytest.raises(EventTooLarge):
        _events([b"data: " + b"x" * 100 + b"\n" for _ in range(20)], cap=1000)
    with pytest.raises(EventTooLarge):
        SseParser(1000).feed(b"data: " + b"y" * 5000)  # no newline ever comes
    with pytest.raises(SseSyntaxError):
        _events([b"data: \xff\n\n"])


def test_server_requests_get_an_answer() -> None:
    assert answer_for({"id": 3, "method": "ping"}) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    refused = answer_for({"id": "a", "method": "sampling/createMessage"})
    assert refused is not None and refused["error"]["code"] == -32601
    assert "drive the model" in refused["error"]["message"]
    # Ids that cannot be answered: null, a boolean, a float, an object, a huge string.
    for bad in (None, True, 1.5, {"x": 1}, "x" * 300):
        assert answer_for({"id": bad, "method": "ping"}) is None


def test_ids_are_compared_with_their_type() -> None:
    assert same_id(1, 1)
    assert not same_id(True, 1) and not same_id(1.0, 1) and not same_id("1", 1)


def test_classify() -> None:
    assert classify({"id": 1, "method": "ping"}) == "request"
    assert classify({"method": "notifications/progress"}) == "notification"
    assert classify({"id": 1, "result": {}}) == "response"
    assert classify({"id": 1}) == "junk" and classify([1]) == "junk" and classify(3) == "junk"


def test_budget_cuts_a_flood() -> None:
    budget = Budget("s")
    for _ in range(64):
        budget.spend("request", 10)
    with pytest.raises(SandboxError, match="flooded"):
        budget.spend("request", 10)
    with pytest.raises(SandboxError, match="flooded"):
        Budget("s").spend("notification", 5 * 1024 * 1024)


class Refusing(Scripted):
    """Refuses the first ``n`` connections to tools/call (a server restarting), or drops
    the connection after reading the request (``drop``)."""

    def __init__(self, n: int, *, drop: bool = False) -> None:
        super().__init__(lambda message, request: sse(reply(message, OK)))
        self.n = n
        self.drop = drop
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and json.loads(request.content).get("method") == "tools/call":
            self.calls += 1
            if self.drop:
                raise httpx.ReadError("connection reset by peer", request=request)
            if self.calls <= self.n:
                raise httpx.ConnectError("connection refused", request=request)
        return super().__call__(request)


async def test_a_refused_connection_is_retried_and_counted() -> None:
    script = Refusing(2)
    remote = client(script)
    trace: dict[str, Any] = {}
    try:
        await remote.connect()
        result = await remote.call_tool("t", {}, timeout_s=10, max_bytes=10_000, trace=trace)
    finally:
        await remote.aclose()
    assert result.content[0].text == "fine"
    egress = trace.pop("egress")
    assert script.calls == 3 and trace == {"mcp_retries": 2}
    # Each send is in the call's egress log: two refused connections, then the answer.
    assert [e.get("error") or e["status"] for e in egress["requests"]] == [
        "tool_error",
        "tool_error",
        200,
    ]
    assert egress["count"] == 3 and egress["refused"] == 0


async def test_retries_are_bounded() -> None:
    script = Refusing(100)
    remote = client(script)
    trace: dict[str, Any] = {}
    try:
        await remote.connect()
        with pytest.raises(SandboxError, match="unreachable") as info:
            await remote.call_tool("t", {}, timeout_s=10, max_bytes=10_000, trace=trace)
    finally:
        await remote.aclose()
    egress = trace.pop("egress")
    assert script.calls == 4 and trace == {"mcp_retries": 3}
    assert [e.get("error") for e in egress["requests"]] == ["tool_error"] * 4
    assert info.value.details["reason"] == "unreachable"


async def test_a_call_that_may_have_arrived_is_never_sent_again() -> None:
    script = Refusing(0, drop=True)
    remote = client(script)
    try:
        await remote.connect()
        with pytest.raises(SandboxError, match="not sent again") as info:
            await remote.call_tool("t", {}, timeout_s=10, max_bytes=10_000)
    finally:
        await remote.aclose()
    assert script.calls == 1
    assert info.value.details == {
        "server": "s",
        "reason": "connection_lost",
        "replayed": False,
    }


async def test_tools_list_is_sent_again_after_a_drop() -> None:
    class DropList(Scripted):
        dropped = 0

        def __call__(self, request: httpx.Request) -> httpx.Response:
            message = json.loads(request.content) if request.method == "POST" else {}
            if message.get("method") == "tools/list" and not self.dropped:
                self.dropped += 1
                raise httpx.RemoteProtocolError("peer closed the connection", request=request)
            return super().__call__(request)

    script = DropList(lambda message, request: sse(reply(message, OK)))
    remote = client(script)
    try:
        tools = await remote.connect()
    finally:
        await remote.aclose()
    assert [t.name for t in tools] == ["t"] and script.dropped == 1


async def test_gateway_stream_inflates_under_the_callers_cap() -> None:
    bomb = gzip.compress(b"\0" * 5_000_000)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, stream=_Body(bomb))

    rules: Any = NetworkRules(allow=["127.0.0.1:9"], allow_private=True)
    gateway = EgressGateway(rules, transport_factory=lambda: httpx.MockTransport(answer))
    async with gateway, gateway.stream({"url": "http://127.0.0.1:9/x", "timeout_s": 5}) as reply:
        assert reply.status == 200 and "content-encoding" not in reply.headers
        sizes = []
        async for chunk in reply.chunks(4096):
            sizes.append(len(chunk))
            if sum(sizes) > 100_000:
                break
    assert max(sizes) <= 4096 and sum(sizes) > 100_000  # capped per chunk, and all of it comes

    text = json.dumps({"k": list(range(30_000))}).encode()

    def plain(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-encoding": "gzip"}, stream=_Body(gzip.compress(text))
        )

    gateway = EgressGateway(rules, transport_factory=lambda: httpx.MockTransport(plain))
    async with gateway, gateway.stream({"url": "http://127.0.0.1:9/x", "timeout_s": 5}) as reply:
        got = b"".join([chunk async for chunk in reply.chunks(1000)])
    assert got == text
