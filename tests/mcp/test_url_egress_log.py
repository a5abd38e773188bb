"""The MCP proxy's URL client keeps each call's egress log (``usage.egress``, the shape of
a sandboxed tool's: runtime._egress_log): the POST of ``tools/call`` and what else it sent
for the call, with status, or error and refusal rule (a redirect it will not follow, an
address the rules deny). Against the real servers (``url_server.py``, ``hostile_server.py``,
both transports) through the broker and its audit record, and a scripted one for a
refusal mid-call."""

from __future__ import annotations

import json
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import httpx
import pytest

from runtime.egress import EgressDenied, IPAddress
from runtime.mcp.external import ExternalServer
from runtime.mcp.remote import RemoteClient
from runtime.policy.network import NetworkRules
from tests.mcp.conftest import HttpServer
from tests.mcp.test_url_client import OK, Scripted, reply, sse
from tests.mcp.test_url_hostile import broker_for, call, completions, entry
from tests.mcp.test_url_legacy import sse_server  # noqa: F401 - a fixture
from tests.mcp.test_url_servers import TOKEN, bearer, url_server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


def _egress(result: Any) -> dict[str, Any]:
    usage = result.usage.model_dump()
    assert "egress" in usage, usage
    egress: dict[str, Any] = usage["egress"]
    return egress


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_proxied_call_lists_its_request(
    url_server: HttpServer,  # noqa: F811
    sse_server: HttpServer,  # noqa: F811
    bearer: str,  # noqa: F811
    tmp_path: Path,
    transport: str,
) -> None:
    served = url_server if transport == "streamable-http" else sse_server
    server = entry(
        served.url + "?access_token=not-a-real-one",
        transport=transport,
        headers={"Authorization": "env:URL_MCP_BEARER"},
        prefix="u",
    )
    async with broker_for(server, tmp_path) as broker:
        ok = await broker.call({"tool": "u__add", "arguments": {"a": 2, "b": 40}})
    assert ok.success, ok.error
    egress = _egress(ok)
    assert egress["refused"] == 0 and egress["count"] == len(egress["requests"]) >= 1
    post = egress["requests"][-1]
    assert post["method"] == "POST" and post["status"] in (200, 202)
    assert post["dialled"] == ["127.0.0.1"]
    assert post["url"].startswith("http://127.0.0.1:")
    done = [r for r in completions(tmp_path) if r.tool == "u__add"]
    assert done[-1].usage is not None and done[-1].usage["egress"] == egress
    # Neither the header's token nor the URL's reaches the log.
    text = json.dumps(egress)
    assert TOKEN not in text and "not-a-real-one" not in text
    if transport == "streamable-http":
        assert post["url"].endswith("/mcp?access_token=[REDACTED]")


async def test_a_refused_redirect_is_in_the_egress_log(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        result = await call(broker, "redirect")
        later = await call(broker, "ok")
    assert result.error is not None and result.error.details["reason"] == "redirect"
    egress = _egress(result)
    assert egress["refused"] == 1
    (refused,) = [e for e in egress["requests"] if e.get("refused")]
    assert refused == {
        "method": "POST",
        "url": hostile.url,
        "dialled": ["127.0.0.1"],
        "status": 307,
        "error": "sandbox_error",
        "refused": "mcp.redirect",
    }
    done = [r for r in completions(tmp_path) if r.tool == "h__t"]
    assert done[0].usage is not None and done[0].usage["egress"] == egress
    assert later.success and _egress(later)["refused"] == 0


async def test_an_address_denied_mid_call_is_in_the_egress_log() -> None:
    """The server's name resolved to a public address at connect time, and to loopback
    when the call opened its connection (DNS rebinding): refused, and logged as such."""
    resolved = ["93.184.216.34"]

    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [ip_address(resolved[0])]

    script = Scripted(lambda message, request: sse(reply(message, OK)))
    server = ExternalServer.model_validate({"name": "s", "url": "http://mcp.example.test:9/mcp"})
    remote = RemoteClient(
        server,
        NetworkRules(),
        resolver=resolver,
        transport_factory=lambda: httpx.MockTransport(script),
    )
    trace: dict[str, Any] = {}
    try:
        await remote.connect()
        resolved[0] = "127.0.0.1"  # every request's target is checked again
        with pytest.raises(EgressDenied):
            await remote.call_tool("t", {}, timeout_s=10, max_bytes=1000, trace=trace)
    finally:
        await remote.aclose()
    assert trace["egress"]["refused"] == trace["egress"]["count"] >= 1
    entry_ = trace["egress"]["requests"][0]
    assert entry_["method"] == "POST" and entry_["url"] == "http://mcp.example.test:9/mcp"
    assert entry_["error"] == "policy_denied" and entry_["refused"] == "egress.address"


async def test_the_policys_redact_names_hide_url_parameters_in_the_log(
    url_server: HttpServer,  # noqa: F811
    bearer: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A URL parameter the policy's ``[audit] redact`` names (no built-in rule knows
    ``tenant_pin``) is hidden in the proxied call's egress log, as the broker's own egress
    log and the audit record's arguments hide it."""
    from tests.mcp.test_url_hostile import POLICY
    from tests.mcp.test_url_servers import broker_for as servers_broker_for

    server = entry(
        url_server.url + "?tenant_pin=4471-secret",
        headers={"Authorization": "env:URL_MCP_BEARER"},
        prefix="u",
    )
    policy = POLICY + '\n[audit]\nredact = ["tenant_pin"]\n\n[tools.u__add]\naction = "allow"\n'
    async with servers_broker_for([server], tmp_path, policy) as broker:
        ok = await broker.call({"tool": "u__add", "arguments": {"a": 2, "b": 40}})
    assert ok.success, ok.error
    text = json.dumps(_egress(ok))
    assert "4471-secret" not in text and "tenant_pin=[REDACTED]" in text
    done = [r for r in completions(tmp_path) if r.tool == "u__add"]
    assert done and "4471-secret" not in json.dumps(done[-1].usage)
