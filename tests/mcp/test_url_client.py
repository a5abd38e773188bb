"""The Streamable HTTP client of ``[[mcp_servers]] url`` against scripted answers (an httpx
mock transport behind the egress gateway): what a hostile or broken server can send."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from runtime.errors import OutputTooLarge, SandboxError, ToolFailed
from runtime.mcp.external import ExternalServer
from runtime.mcp.remote import RemoteClient, origin_rules
from runtime.policy.network import NetworkRules

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"
SECRET = "Bearer s3cr3t-value"
INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "scripted", "version": "1"},
}
TOOLS = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
OK = {"content": [{"type": "text", "text": "fine"}], "isError": False}

Answer = Callable[[dict[str, Any], httpx.Request], httpx.Response]


def sse(*messages: dict[str, Any]) -> httpx.Response:
    body = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in messages)
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)


def reply(message: dict[str, Any], result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


class _Body(httpx.AsyncByteStream):
    """A body the gateway streams (a Response built from bytes counts as read already)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._data


def _streamed(response: httpx.Response) -> httpx.Response:
    return httpx.Response(
        response.status_code, headers=response.headers, stream=_Body(response.content)
    )


class Scripted:
    """Answers initialize / initialized / tools/list itself and tools/call with ``call``."""

    def __init__(self, call: Answer) -> None:
        self.call = call
        self.requests: list[httpx.Request] = []
        self.sessions = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        return _streamed(self._answer(request))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.method == "DELETE":
            return httpx.Response(200)
        message = json.loads(request.content)
        method = message.get("method")
        if method == "initialize":
            self.sessions += 1
            response = sse(reply(message, INIT))
            response.headers["mcp-session-id"] = f"session-{self.sessions}"
            return response
        if method == "notifications/initialized":
            return httpx.Response(202)
        if method == "tools/list":
            return sse(reply(message, TOOLS))
        return self.call(message, request)


def client(script: Scripted) -> RemoteClient:
    server = ExternalServer.model_validate(
        {"name": "s", "url": URL, "headers": {"Authorization": "env:URL_CLIENT_SECRET"}}
    )
    return RemoteClient(
        server, NetworkRules(), transport_factory=lambda: httpx.MockTransport(script)
    )


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("URL_CLIENT_SECRET", SECRET)


async def _call(answer: Answer, max_bytes: int = 100_000) -> Any:
    script = Scripted(answer)
    remote = client(script)
    try:
        tools = await remote.connect()
        assert [t.name for t in tools] == ["t"]
        return await remote.call_tool("t", {}, timeout_s=10, max_bytes=max_bytes)
    finally:
        await remote.aclose()


async def test_answer_among_notifications_and_server_requests() -> None:
    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        return sse(
            {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}},
            {"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {}},
            reply(message, OK),
        )

    result = await _call(answer)
    assert result.content[0].text == "fine" and not result.is_error


async def test_plain_json_answer() -> None:
    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[reply(message, OK)])

    assert (await _call(answer)).content[0].text == "fine"


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (
            lambda m: httpx.Response(
                200, headers={"content-type": "application/json; charset=utf-8"}, text="{nope"
            ),
            "not JSON",
        ),
        (
            lambda m: httpx.Response(200, headers={"content-type": "application/json"}, text="{"),
            "not JSON",
        ),
        (lambda m: httpx.Response(200, headers={"content-type": "text/html"}, text="<p>"), "type"),
        (lambda m: sse({"jsonrpc": "2.0", "id": 999, "result": OK}), "no answer"),
        (lambda m: sse({"jsonrpc": "2.0", "id": m["id"], "result": [1]}), "result object"),
        (lambda m: sse(reply(m, {"content": "not a list"})), "tools/call result"),
        (lambda m: sse({"jsonrpc": "2.0", "id": m["id"], "error": "x"}), "not an object"),
        (lambda m: httpx.Response(500, text="internal"), "HTTP 500"),
        (
            lambda m: httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=b"data: \xff\n\n"
            ),
            "not JSON",
        ),
    ],
)
async def test_malformed_answers_are_sandbox_errors(
    response: Callable[[dict[str, Any]], httpx.Response], words: str
) -> None:
    with pytest.raises(SandboxError) as info:
        await _call(lambda message, request: response(message))
    assert words in info.value.message
    assert info.value.details["server"] == "s"


async def test_json_rpc_error_is_a_tool_error_with_its_code() -> None:
    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        error = {"code": -32602, "message": f"bad arguments; you sent {SECRET}"}
        return sse({"jsonrpc": "2.0", "id": message["id"], "error": error})

    with pytest.raises(ToolFailed) as info:
        await _call(answer)
    assert info.value.details["code"] == -32602
    assert "bad arguments" in info.value.message
    assert "s3cr3t" not in info.value.message  # an echoed secret is scrubbed


async def test_answer_past_the_cap_is_output_too_large() -> None:
    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        big = {"content": [{"type": "text", "text": "x" * 300_000}]}
        return sse(reply(message, big))

    with pytest.raises(OutputTooLarge):
        await _call(answer, max_bytes=100_000)


async def test_forgotten_session_is_opened_again_once() -> None:
    seen: list[str | None] = []

    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        session = request.headers.get("mcp-session-id")
        seen.append(session)
        if session == "session-1":
            return httpx.Response(404, text="unknown session")
        return sse(reply(message, OK))

    assert (await _call(answer)).content[0].text == "fine"
    assert seen == ["session-1", "session-2"]


async def test_a_server_that_forgets_every_session() -> None:
    def answer(message: dict[str, Any], request: httpx.Request) -> httpx.Response:
        return httpx.Response(404)

    with pytest.raises(SandboxError, match="forgot the session"):
        await _call(answer)


async def test_headers_sent_and_the_session_closed() -> None:
    script = Scripted(lambda message, request: sse(reply(message, OK)))
    remote = client(script)
    await remote.connect()
    await remote.call_tool("t", {"q": 1}, timeout_s=10, max_bytes=10_000)
    await remote.aclose()
    init, *rest = script.requests
    assert init.headers["authorization"] == SECRET
    assert "mcp-session-id" not in init.headers
    assert all(r.headers["mcp-session-id"] == "session-1" for r in rest)
    assert all(r.headers["mcp-protocol-version"] == "2025-06-18" for r in rest)
    assert "text/event-stream" in init.headers["accept"]
    assert [r.method for r in script.requests][-1] == "DELETE"


def test_origin_rules_name_one_origin_for_one_connection() -> None:
    base = NetworkRules(deny=["10.0.0.0/8"], allow_private=False)
    rules = origin_rules(base, "http://127.0.0.1:8123/mcp")
    assert rules.check("http", "127.0.0.1", 8123).allowed
    assert not rules.check("http", "127.0.0.1", 8124).allowed  # another port
    assert not rules.check("http", "10.1.2.3", 8123).allowed  # deny stays
    assert not base.check("http", "127.0.0.1", 8123).allowed  # the policy's own: unchanged
    named = origin_rules(base, "https://mcp.example.com/mcp")
    assert named.check("https", "mcp.example.com", 443).allowed
    assert not named.check("https", "other.example.com", 443).allowed


async def test_a_header_variable_that_would_split_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("URL_CLIENT_SECRET", "Bearer x\r\nX-Injected: 1")
    script = Scripted(lambda message, request: sse(reply(message, OK)))
    remote = client(script)
    with pytest.raises(SandboxError, match="printable ASCII") as info:
        await remote.connect()
    await remote.aclose()
    assert script.requests == [] and "Injected" not in info.value.message


async def test_an_unexpected_failure_is_that_servers_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runtime.backends.mcp_proxy import McpProxyBackend

    async def broken(self: RemoteClient, *args: Any) -> Any:
        raise LookupError("surprise")

    monkeypatch.setattr(RemoteClient, "connect", broken)
    server = ExternalServer.model_validate({"name": "s", "url": URL})
    async with McpProxyBackend([server]) as proxy:
        assert proxy.specs == []
        assert proxy.errors["s"] == "LookupError: surprise"


@pytest.mark.parametrize("version", ["2026-07-28", "2025-06-18\r\nX: y"])
async def test_a_protocol_version_this_client_does_not_speak(version: str) -> None:
    script = Scripted(lambda message, request: sse(reply(message, OK)))
    original = script._answer

    def answer(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content) if request.method == "POST" else {}
        if message.get("method") == "initialize":
            return sse(reply(message, {**INIT, "protocolVersion": version}))
        return original(request)

    script._answer = answer  # type: ignore[method-assign]
    remote = client(script)
    with pytest.raises(SandboxError, match="protocol version"):
        await remote.connect()
    await remote.aclose()


async def test_a_name_that_resolves_to_loopback_is_refused() -> None:
    # DNS rebinding: the entry names mcp.example.test, whose owner points it at 127.0.0.1.
    from ipaddress import ip_address

    from runtime.egress import EgressDenied, IPAddress

    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [ip_address("127.0.0.1")]

    script = Scripted(lambda message, request: sse(reply(message, OK)))
    server = ExternalServer.model_validate({"name": "s", "url": "http://mcp.example.test:9/mcp"})
    remote = RemoteClient(
        server,
        NetworkRules(),
        resolver=resolver,
        transport_factory=lambda: httpx.MockTransport(script),
    )
    with pytest.raises(EgressDenied) as info:
        await remote.connect()
    await remote.aclose()
    assert info.value.rule == "egress.address"
    assert script.requests == []
