"""web_fetch's batch mode, from seed 004 (CountBot ``web_fetch``: ``url`` or ``urls``, at
least one): several pages in one call, each with its content or its own error, sharing the
call's time limit and output cap; the policy checks every URL of ``urls``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from egress_support import FakeRules, RecordingBackend, Server, make_gateway
from test_network_tools import call, make_ctx, spec

from runtime.catalogue import Catalogue
from runtime.egress import EgressGateway
from runtime.errors import InvalidArguments, ToolFailed
from runtime.models import Limits, ToolCall
from runtime.policy import Policy
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry

pytestmark = pytest.mark.anyio


@pytest.fixture
def gw() -> EgressGateway:
    return make_gateway(FakeRules(named={"127.0.0.1"}), RecordingBackend())


async def test_pages_in_order(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"urls": [f"{server.base}/html", f"{server.base}/hello"], "format": "text"}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    assert result["count"] == 2 and result["truncated"] is False
    first, second = result["pages"]
    assert first["url"] == f"{server.base}/html" and "Main Title" in first["content"]
    assert second == {
        "url": f"{server.base}/hello",
        "status": 200,
        "content": "hello",
        "truncated": False,
    }
    assert [e["path"] for e in server.log] == ["/html", "/hello"]


async def test_url_and_urls_together(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    args = {"url": f"{server.base}/hello", "urls": [f"{server.base}/html"]}
    async with gw:
        result = await call("web_fetch", args, make_ctx(gw, tmp_path))
    assert [p["url"] for p in result["pages"]] == [f"{server.base}/hello", f"{server.base}/html"]


async def test_one_failure_costs_only_its_page(
    gw: EgressGateway, server: Server, tmp_path: Path
) -> None:
    """A binary page (the tool's refusal) and an address the gateway refuses (a private
    one the rules do not name) fail alone; the pages around them are read."""
    urls = [
        f"{server.base}/binary",
        "http://10.0.0.1/hello",
        f"{server.base}/hello",
    ]
    async with gw:
        result = await call("web_fetch", {"urls": urls}, make_ctx(gw, tmp_path))
    binary, private, hello = result["pages"]
    assert binary["url"] == urls[0] and "binary" in binary["error"]
    assert binary["error_type"] == "tool_error"
    assert private["url"] == urls[1] and private["error_type"] == "policy_denied"
    assert "content" not in private
    assert hello["content"] == "hello"
    assert [e["path"] for e in server.log] == ["/binary", "/hello"]


async def test_time_limit_is_shared(server: Server, tmp_path: Path) -> None:
    """The first page takes the call's whole time: it fails with a timeout and the next is
    not asked for (a request past the call's limit would get the whole call killed)."""
    urls = [f"{server.base}/slow", f"{server.base}/hello"]
    backend = RecordingBackend()
    gw = make_gateway(FakeRules(named={"127.0.0.1"}), backend)
    try:
        async with gw:
            ctx = make_ctx(gw, tmp_path, Limits(timeout_s=0.5))
            result = await call("web_fetch", {"urls": urls}, ctx)
    finally:
        server.release.set()
    slow, hello = result["pages"]
    assert slow["error_type"] == "timeout"
    assert hello == {
        "url": urls[1],
        "error": "not fetched: the call's time limit was reached",
        "error_type": "timeout",
    }
    # The next page was never asked for: no second connection was dialled (the first one
    # is busy with /slow, or closed) and the server never saw /hello. Whether /slow itself
    # got to the server within the call's 0.5 s is up to the machine's load (the server is
    # a thread of this process): a busy machine can pass the deadline before it is sent.
    assert len(backend.dialled) <= 1
    assert [e["path"] for e in server.log] in ([], ["/slow"])


async def test_output_cap_is_shared(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    cap = 4096
    ctx = make_ctx(gw, tmp_path, Limits(output_bytes=cap))
    async with gw:
        result = await call("web_fetch", {"urls": [f"{server.base}/html"] * 3}, ctx)
    size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= cap and result["count"] == 3
    assert all("Main Title" in p["content"] for p in result["pages"])


async def test_large_pages_cut_to_fit(gw: EgressGateway, server: Server, tmp_path: Path) -> None:
    cap = 1024
    ctx = make_ctx(gw, tmp_path, Limits(output_bytes=cap))
    async with gw:
        result = await call(
            "web_fetch", {"urls": [f"{server.base}/html"] * 4, "format": "html"}, ctx
        )
    size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode())
    assert size <= cap and result["truncated"] is True
    assert all(p["truncated"] and p["content"] for p in result["pages"])


async def test_neither_url_nor_urls(gw: EgressGateway, tmp_path: Path) -> None:
    async with gw:
        with pytest.raises(InvalidArguments, match="url or urls"):
            await call("web_fetch", {"format": "text"}, make_ctx(gw, tmp_path))


@pytest.mark.parametrize(
    "args",
    [
        {"urls": []},
        {"urls": ["http://x/"] * 11},
        {"urls": "http://x/"},
        {"urls": [""]},
        {"urls": [["http://x/"]]},
    ],
)
def test_bad_urls_rejected_by_schema(args: dict[str, object]) -> None:
    assert not jsonschema_rs.Draft202012Validator(spec("web_fetch").parameters).is_valid(args)


def test_result_schema_keeps_the_two_shapes_apart() -> None:
    result = spec("web_fetch").result
    assert result is not None
    v = jsonschema_rs.Draft202012Validator(result)
    single = {"url": "u", "status": 200, "content": "c", "truncated": False}
    batch = {"pages": [single], "count": 1, "truncated": False}
    assert v.is_valid(single) and v.is_valid(batch)
    assert not v.is_valid(single | {"pages": []})
    assert not v.is_valid(batch | {"content": "x"})
    assert not v.is_valid({"pages": [{"url": "u"}], "count": 1, "truncated": False})
    both = single | {"error": "e", "error_type": "tool_error"}  # content and an error
    assert not v.is_valid({"pages": [both], "count": 1, "truncated": False})


def test_policy_checks_every_url() -> None:
    """``urls`` carries the ``url`` role: one URL outside the allowed domains denies the
    call before anything runs, as it would alone in ``url``."""
    policy = Policy.from_toml(
        "[categories]\nnetwork = 'allow'\n[network]\nallow = ['example.org']\n"
    )
    web_fetch = Catalogue().get("web_fetch")
    ok = ToolCall(tool="web_fetch", arguments={"urls": ["https://example.org/a"] * 2})
    assert policy.decide(ok, web_fetch).action == "allow"
    bad = ToolCall(
        tool="web_fetch",
        arguments={"urls": ["https://example.org/a", "https://evil.test/b"]},
    )
    d = policy.decide(bad, web_fetch)
    assert d.action == "deny" and "evil.test" in " ".join(d.reasons)
    assert Catalogue().get("web_fetch").arg_roles == {"url": "url", "urls": "url"}


def _fake_ctx(tmp_path: Path, cap: int) -> ToolContext:
    """No gateway: every URL answers 5000 bytes of text, its final URL the one asked."""

    def broker(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = b"x" * 5000
        return {
            "status": 200,
            "headers": {"content-type": "text/plain"},
            "body": body[: payload["max_bytes"]],
            "truncated": payload["max_bytes"] < len(body),
            "url": payload["url"],
        }

    return ToolContext(workspace=tmp_path, limits=Limits(output_bytes=cap), broker=broker)


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def test_long_urls_do_not_overflow_the_cap(tmp_path: Path) -> None:
    """Pages whose URL alone is larger than their share of the cap: an equal cut of the
    contents left the result over the cap (the call failed with output_too_large, every
    page lost); the last pages now give up their content instead."""
    fetch = load_entry("network:web_fetch", builtin_tools_dir() / "network")
    urls = [f"http://example.test/{i}" + "a" * 600 for i in range(4)] + ["http://e.test/s"]
    result = fetch({"urls": urls}, _fake_ctx(tmp_path, 2900))
    assert _size(result) <= 2900 and result["truncated"] is True
    assert [p["url"] for p in result["pages"]] == urls
    assert all(p["status"] == 200 and p["truncated"] for p in result["pages"])


def test_pages_that_cannot_fit_fail_clearly(tmp_path: Path) -> None:
    fetch = load_entry("network:web_fetch", builtin_tools_dir() / "network")
    urls = [f"http://example.test/{i}" + "a" * 600 for i in range(10)]
    with pytest.raises(ToolFailed) as exc:
        fetch({"urls": urls}, _fake_ctx(tmp_path, 2048))
    assert exc.value.details["reason"] == "output_cap" and "fewer" in exc.value.message
