"""The network tools (tools/network) with a fake broker channel that calls a real gateway
against local servers, as the sandbox's frame pipe would."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import jsonschema_rs
import pytest
from egress_support import FakeRules, RecordingBackend, Server, make_gateway

from runtime.egress import EgressDenied, EgressGateway
from runtime.errors import InvalidArguments, ToolFailed
from runtime.models import Limits, ToolSpec
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry

pytestmark = pytest.mark.anyio

TOOLS = builtin_tools_dir() / "network"
NAMES = ["http_get", "http_post", "http_request", "web_fetch", "web_search"]


def spec(name: str) -> ToolSpec:
    return ToolSpec.model_validate(json.loads((TOOLS / f"{name}.json").read_text()))


def make_ctx(
    gw: EgressGateway, tmp_path: Path, limits: Limits | None = None, **options: Any
) -> ToolContext:
    def broker(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        return anyio.from_thread.run(gw.handle, op, payload)

    return ToolContext(
        workspace=tmp_path, limits=limits or Limits(), broker=broker, options=options
    )


async def call(name: str, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Validate the arguments and the result against the manifest, like the broker does."""
    s = spec(name)
    jsonschema_rs.validate(s.parameters, args)
    assert s.entry is not None
    fn: Callable[[dict[str, Any], ToolContext], Any] = load_entry(s.entry, TOOLS)
    result = await anyio.to_thread.run_sync(fn, args, ctx)
    assert s.result is not None
    jsonschema_rs.validate(s.result, result)
    return dict(result)


@pytest.fixture
def gw() -> EgressGateway:
    return make_gateway(FakeRules(named={"127.0.0.1"}), RecordingBackend())


@pytest.mark.parametrize("name", NAMES)
def test_manifests(name: str) -> None:
    s = spec(name)
    assert s.name == name
    assert s.category == "network"
    assert s.backend == "subprocess"
    assert s.entry == f"network:{name}"
    assert s.sandbox.egress is True
    assert s.sandbox.exec is False
    assert s.sandbox.workspace == "none"
    assert s.hints.open_world is True
    assert s.hints.read_only is (name in ("http_get", "web_fetch", "web_search"))
    assert s.limits == {"timeout_s": 60}
    assert s.parameters["additionalProperties"] is False
    assert s.result is not None
    assert s.result["additionalProperties"] is False
    if name == "web_fetch":  # batch mode (seed 004): every URL of urls is checked too
        assert s.arg_roles == {"url": "url", "urls": "url"}
    elif name != "web_search":
        assert s.arg_roles == {"url": "url"}
    jsonschema_rs.Draft202012Validator(s.parameters)
    assert callable(load_entry(s.entry, TOOLS))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("http_get", {}),
        ("http_get", {"url": "http://x/", "extra": 1}),
        ("http_get", {"url": "http://x/", "headers": {"a": 1}}),
        ("http_request", {"url": "http://x/", "method": "TRACE"}),
        ("http_post", {"url": "http://x/", "body_encoding": "hex"}),
        ("web_fetch", {"url": "http://x/", "format": "pdf"}),
        ("web_fetch", {"url": "http://x/", "max_chars": 0}),
        ("web_search", {"query": ""}),
        ("web_search", {"query": "x", "limit": 21}),
    ],
)
def test_bad_arguments_rejected_by_schema(name: str, args: dict[str, Any]) -> None:
    assert not jsonschema_rs.Draft202012Validator(spec(name).parameters).is_valid(args)


async def test_http_get_text(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    async with gw:
        result = await call("http_get", {"url": f"{server.base}/hello"}, make_ctx(gw, tmp_path))
    assert result["status"] == 200
    assert result["body"] == "hello"
    assert result["encoding"] == "text"
    assert result["truncated"] is False
    assert result["headers"]["x-server"] == "public"


@pytest.mark.parametrize(
    ("name", "extra"), [("http_get", {}), ("http_request", {"method": "PUT", "body": "data"})]
)
async def test_http_tools_send_only_the_allowlist_across_origins(
    gw: EgressGateway,
    server: Server,
    internal: Server,
    tmp_path: Path,
    name: str,
    extra: dict[str, Any],
) -> None:
    """Finding L3, through the tools: a 307 to another port took ``Authentication`` and
    ``X-Sig`` along (only Authorization-like names were dropped). The resent body keeps its
    Content-Type."""
    headers = {
        "Authentication": "SEKRET5",
        "X-Sig": "SEKRET12",
        "Accept": "application/json",
        "Content-Type": "text/plain",
    }
    url = f"{server.base}/redirect?code=307&to={internal.base}/echo"
    async with gw:
        result = await call(name, {"url": url, "headers": headers, **extra}, make_ctx(gw, tmp_path))
    assert result["url"] == f"{internal.base}/echo"
    echoed = json.loads(result["body"])
    sent = echoed["headers"]
    assert "authentication" not in sent and "x-sig" not in sent
    assert sent["accept"] == "application/json"
    assert echoed["body"] == extra.get("body", "")
    assert sent.get("content-type") == ("text/plain" if "body" in extra else None)
    assert internal.log[0]["headers"].get("Authentication") is None


async def test_http_get_binary_is_base64(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    async with gw:
        result = await call("http_get", {"url": f"{server.base}/binary"}, make_ctx(gw, tmp_path))
    assert result["encoding"] == "base64"
    assert base64.b64decode(result["body"]) == bytes(range(256))


async def test_http_get_truncated_by_output_budget(
    gw: EgressGateway, server: Server, tmp_path: Path
) -> None:
    ctx = make_ctx(gw, tmp_path, Limits(output_bytes=8192))
    async with gw:
        result = await call("http_get", {"url": f"{server.base}/big?n=100000"}, ctx)
    assert result["truncated"] is True
    assert len(base64.b64decode(result["body"])) == 4096


async def test_http_post_text_body(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {
        "url": f"{server.base}/echo",
        "body": '{"a": 1}',
        "headers": {"Content-Type": "application/json"},
    }
    async with gw:
        result = await call("http_post", args, make_ctx(gw, tmp_path))
    echoed = json.loads(result["body"])
    assert echoed["method"] == "POST"
    assert echoed["body"] == '{"a": 1}'
    assert echoed["headers"]["content-type"] == "application/json"


async def test_http_post_base64_body(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {
        "url": f"{server.base}/echo",
        "body": base64.b64encode(b"\x00\xffz").decode(),
        "body_encoding": "base64",
    }
    async with gw:
        result = await call("http_post", args, make_ctx(gw, tmp_path))
    assert json.loads(result["body"])["body"] == "\x00\xffz"


async def test_http_post_bad_base64(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"url": f"{server.base}/echo", "body": "!!!", "body_encoding": "base64"}
    async with gw:
        with pytest.raises(InvalidArguments):
            await call("http_post", args, make_ctx(gw, tmp_path))
    assert server.log == []


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
async def test_http_request_methods(
    gw: EgressGateway, server: Server, tmp_path: Path, method: str
) -> None:
    args = {"url": f"{server.base}/echo", "method": method, "body": "x"}
    async with gw:
        result = await call("http_request", args, make_ctx(gw, tmp_path))
    assert json.loads(result["body"])["method"] == method


async def test_http_request_head(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    async with gw:
        result = await call(
            "http_request",
            {"url": f"{server.base}/hello", "method": "HEAD"},
            make_ctx(gw, tmp_path),
        )
    assert result["status"] == 200
    assert result["body"] == ""


async def test_http_get_internal_refused(internal: Server, tmp_path: Path) -> None:
    async with make_gateway(FakeRules(), RecordingBackend()) as gw:
        with pytest.raises(EgressDenied):
            await call("http_get", {"url": f"{internal.base}/hello"}, make_ctx(gw, tmp_path))
    assert internal.log == []


async def test_no_broker_channel(tmp_path: Path) -> None:
    with pytest.raises(ToolFailed, match="no channel"):
        await call("http_get", {"url": "http://example.org/"}, ToolContext(workspace=tmp_path))


async def test_web_fetch_markdown(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    async with gw:
        result = await call("web_fetch", {"url": f"{server.base}/html"}, make_ctx(gw, tmp_path))
    content = result["content"]
    assert "# Main Title" in content
    assert "**bold**" in content
    assert "[link](/next)" in content
    assert "* one" in content or "- one" in content
    assert "alert" not in content
    assert "color: red" not in content
    assert result["status"] == 200
    assert result["truncated"] is False
    assert result["url"] == f"{server.base}/html"


async def test_web_fetch_text(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"url": f"{server.base}/html", "format": "text"}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    lines = result["content"].splitlines()
    assert "Main Title" in lines
    assert "<" not in result["content"]
    assert "alert" not in result["content"]


async def test_web_fetch_html_raw(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"url": f"{server.base}/html", "format": "html"}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    assert "<h1>Main Title</h1>" in result["content"]


async def test_web_fetch_max_chars(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"url": f"{server.base}/html", "max_chars": 10}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    assert len(result["content"]) == 10
    assert result["truncated"] is True


async def test_web_fetch_follows_redirect(
    gw: EgressGateway, server: Server, tmp_path: Path
) -> None:
    args = {"url": f"{server.base}/redirect?to=/html", "format": "text"}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    assert result["url"] == f"{server.base}/html"
    assert "Main Title" in result["content"]


async def test_web_fetch_binary_refused(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    async with gw:
        with pytest.raises(ToolFailed, match="binary"):
            await call("web_fetch", {"url": f"{server.base}/binary"}, make_ctx(gw, tmp_path))


async def test_web_search_with_option_endpoint(
    gw: EgressGateway, server: Server, tmp_path: Path
) -> None:
    ctx = make_ctx(gw, tmp_path, search_endpoint=f"{server.base}/search?n=5")
    async with gw:
        result = await call("web_search", {"query": "agent tools", "limit": 2}, ctx)
    assert result["results"] == [
        {
            "title": "Result 0 for agent tools",
            "url": "https://example.org/0",
            "snippet": "snippet 0",
        },
        {
            "title": "Result 1 for agent tools",
            "url": "https://example.org/1",
            "snippet": "snippet 1",
        },
    ]
    assert "format=json" in server.log[0]["path"]


async def test_web_search_endpoint_from_gateway(server: Server, tmp_path: Path) -> None:
    rules = FakeRules(named={"127.0.0.1"}, search_endpoint=f"{server.base}/search")
    async with make_gateway(rules, RecordingBackend()) as gw:
        result = await call("web_search", {"query": "q"}, make_ctx(gw, tmp_path))
    assert len(result["results"]) == 3


async def test_web_search_unconfigured(gw: EgressGateway, tmp_path: Path) -> None:
    async with gw:
        with pytest.raises(ToolFailed, match="no search endpoint"):
            await call("web_search", {"query": "q"}, make_ctx(gw, tmp_path))


async def test_web_search_bad_answer(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    ctx = make_ctx(gw, tmp_path, search_endpoint=f"{server.base}/hello")
    async with gw:
        with pytest.raises(ToolFailed, match="JSON"):
            await call("web_search", {"query": "q"}, ctx)


async def test_web_search_endpoint_still_checked(server: Server, tmp_path: Path) -> None:
    # The endpoint comes from the policy, but the gateway's address checks still apply.
    rules = FakeRules(search_endpoint=f"{server.base}/search")
    async with make_gateway(rules, RecordingBackend()) as gw:
        with pytest.raises(EgressDenied):
            await call("web_search", {"query": "q"}, make_ctx(gw, tmp_path))


async def test_payload_and_reply_survive_frames(
    gw: EgressGateway, server: Server, tmp_path: Path
) -> None:
    """The sandbox carries both directions as msgpack (runtime.frames' encoding); nothing
    may need pickling, and bytes must stay bytes."""
    import msgpack

    def framed(msg: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = msgpack.unpackb(
            msgpack.packb(msg, use_bin_type=True), raw=False, strict_map_key=True
        )
        return out

    def broker(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        request = framed({"op": op, "payload": payload})
        reply = anyio.from_thread.run(gw.handle, request["op"], request["payload"])
        return framed({"reply": reply})["reply"]

    ctx = ToolContext(workspace=tmp_path, broker=broker)
    args = {
        "url": f"{server.base}/echo",
        "body": base64.b64encode(b"\x00bin").decode(),
        "body_encoding": "base64",
    }
    async with gw:
        result = await call("http_post", args, ctx)
        binary = await call("http_get", {"url": f"{server.base}/binary"}, ctx)
    assert json.loads(result["body"])["body"] == "\x00bin"
    assert base64.b64decode(binary["body"]) == bytes(range(256))
