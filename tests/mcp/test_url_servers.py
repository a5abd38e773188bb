"""``[[mcp_servers]] url``: a real MCP server over Streamable HTTP on 127.0.0.1 (the SDK's
MCPServer under uvicorn, ``url_server.py``), reached by the mcp backend through the egress
gateway, governed and audited like any tool."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.catalogue import Catalogue
from runtime.mcp.external import ExternalServer
from runtime.policy import Policy
from tests.mcp.conftest import HttpServer

pytestmark = pytest.mark.anyio

URL_SERVER = Path(__file__).resolve().parent / "url_server.py"
TOKEN = "tok-7f3a9c1e-not-for-logs"

POLICY = """\
version = 1
default = "deny"

[categories]
mcp = "allow"

[tools]
"u__big" = { action = "allow", limits = { output_bytes = 100000 } }
"u__slow" = { action = "allow", limits = { timeout_s = 1 } }
"u__add" = "allow"
"u__fail" = "allow"
"u__die" = "allow"

[profiles.adder]
tools = ["u__add"]
"""


def _start(*args: str) -> HttpServer:
    return HttpServer([sys.executable, str(URL_SERVER), *args])


@pytest.fixture(scope="module")
def url_server() -> Iterator[HttpServer]:
    """One server for the tests that do not end it (a spawn costs more than most tests)."""
    server = _start("--token", TOKEN)
    yield server
    server.close()


@pytest.fixture
def own_server() -> Iterator[HttpServer]:
    server = _start()
    yield server
    server.close()


def entry(url: str, **kw: Any) -> ExternalServer:
    return ExternalServer.model_validate({"name": "u", "url": url, **kw})


def bearer_entry(url: str, **kw: Any) -> ExternalServer:
    # The variable holds the whole header value, "Bearer <token>".
    return entry(url, headers={"Authorization": "env:URL_MCP_BEARER"}, **kw)


@pytest.fixture
def bearer(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("URL_MCP_BEARER", f"Bearer {TOKEN}")
    return TOKEN


def _files_holding(folder: Path, text: str) -> list[Path]:
    """Files under ``folder`` (the audit database, its WAL, the workspace) holding ``text``."""
    return [p for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@asynccontextmanager
async def broker_for(
    servers: list[ExternalServer], tmp_path: Path, policy_text: str = POLICY
) -> AsyncIterator[Any]:
    from runtime.broker import Broker

    policy = Policy.from_toml(policy_text, "test")
    async with McpProxyBackend(
        servers, network=policy.network, redact_keys=policy.redact_keys
    ) as proxy:
        catalogue = Catalogue(builtins=False)
        proxy.register(catalogue)
        ws = tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        async with Broker(
            ws, policy, tmp_path / "audit.db", catalogue=catalogue, backends={"mcp": proxy}
        ) as broker:
            broker.test_proxy = proxy
            yield broker


async def test_tools_listed_called_and_audited(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    async with broker_for([bearer_entry(url_server.url)], tmp_path) as broker:
        proxy = broker.test_proxy
        assert proxy.errors == {}
        assert sorted(s.name for s in proxy.specs) == [
            "u__add",
            "u__big",
            "u__die",
            "u__fail",
            "u__slow",
        ]
        spec = broker.catalogue.get("u__add")
        assert (spec.category, spec.backend.value) == ("mcp", "mcp")
        ok = await broker.call({"tool": "u__add", "arguments": {"a": 2, "b": 40}})
        assert ok.success, ok.error
        assert ok.result == {"sum": 42} and ok.backend == "mcp"
        bad = await broker.call({"tool": "u__add", "arguments": {"a": "x", "b": 1}})
        assert bad.error is not None and bad.error.type == "invalid_arguments"
        # A profile that lists only u__add: the other tools are refused by the policy.
        hidden = await broker.call({"tool": "u__fail", "arguments": {}}, profile="adder")
        assert hidden.error is not None and hidden.error.type == "policy_denied"
        seen = await broker.call({"tool": "u__add", "arguments": {"a": 1, "b": 1}}, profile="adder")
        assert seen.success

    from runtime.audit import AuditLog

    log = AuditLog(tmp_path / "audit.db")
    try:
        records = log.tail(50)
        assert log.verify().ok
    finally:
        log.close()
    done = [r for r in records if r.tool == "u__add" and r.kind == "completion" and r.sandbox]
    assert done and all(r.backend == "mcp" for r in done)
    assert done[0].sandbox is not None and done[0].sandbox["backend"] == "mcp:u"
    assert "egress-gateway" in done[0].sandbox["mechanisms"]
    # The token went to the server (it answers 401 without it) and nowhere into the log.
    assert _files_holding(tmp_path, TOKEN) == []


async def test_policy_decides_per_prefixed_name(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    text = POLICY.replace('"u__add" = "allow"', '"u__add" = "deny"')
    async with broker_for([bearer_entry(url_server.url)], tmp_path, text) as broker:
        denied = await broker.call({"tool": "u__add", "arguments": {"a": 1, "b": 2}})
    assert denied.error is not None and denied.error.type == "policy_denied"


async def test_error_result_is_a_tool_error(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    async with broker_for([bearer_entry(url_server.url)], tmp_path) as broker:
        failed = await broker.call({"tool": "u__fail", "arguments": {}})
    assert failed.error is not None and failed.error.type == "tool_error"
    assert "fail from the url server" in failed.error.message


async def test_slow_answer_times_out_at_the_tools_limit(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    async with broker_for([bearer_entry(url_server.url)], tmp_path) as broker:
        slow = await broker.call({"tool": "u__slow", "arguments": {"seconds": 120}})
        after = await broker.call({"tool": "u__add", "arguments": {"a": 1, "b": 2}})
    assert slow.error is not None and slow.error.type == "timeout"
    assert "1 s" in slow.error.message  # the policy's timeout_s for u__slow
    assert after.success  # the connection is per request: nothing is left stuck


async def test_oversized_answer_is_output_too_large(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    async with broker_for([bearer_entry(url_server.url)], tmp_path) as broker:
        small = await broker.call({"tool": "u__big", "arguments": {"n": 1000}})
        huge = await broker.call({"tool": "u__big", "arguments": {"n": 3_000_000}})
    assert small.success
    assert huge.error is not None and huge.error.type == "output_too_large"


async def test_server_killed_mid_call(own_server: HttpServer, tmp_path: Path) -> None:
    async with broker_for([entry(own_server.url)], tmp_path) as broker:
        died = await broker.call({"tool": "u__die", "arguments": {}})
        own_server.proc.wait(timeout=30)
        later = await broker.call({"tool": "u__add", "arguments": {"a": 1, "b": 2}})
    assert died.error is not None and died.error.type == "sandbox_error"
    assert "MCP server 'u'" in died.error.message
    assert later.error is not None and later.error.type == "sandbox_error"
    assert "unreachable" in later.error.message


async def test_unreachable_server_has_no_tools_and_a_reason(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with McpProxyBackend([entry(f"http://127.0.0.1:{port}/mcp")]) as proxy:
        assert proxy.specs == []
        assert "unreachable" in proxy.errors["u"]


async def test_malformed_handshake(url_server: HttpServer) -> None:
    base = url_server.url.rsplit("/mcp", 1)[0]
    server = entry(f"{base}/garbage")
    async with McpProxyBackend([server]) as proxy:
        assert proxy.specs == []
        error = proxy.errors["u"]
    # The guard answers 401 before the route without the token; with it, the route's garbage.
    assert "401" in error


async def test_malformed_answer_with_token(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    base = url_server.url.rsplit("/mcp", 1)[0]
    async with McpProxyBackend([bearer_entry(f"{base}/garbage")]) as proxy:
        assert proxy.specs == []
        assert "not JSON" in proxy.errors["u"]


async def test_token_missing_or_wrong(
    url_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("URL_MCP_BEARER", raising=False)
    async with McpProxyBackend([bearer_entry(url_server.url)]) as proxy:
        assert proxy.specs == []
        assert "'URL_MCP_BEARER', which is not set" in proxy.errors["u"]
    monkeypatch.setenv("URL_MCP_BEARER", "Bearer wrong")
    async with McpProxyBackend([bearer_entry(url_server.url)]) as proxy:
        assert proxy.specs == []
        assert "HTTP 401" in proxy.errors["u"]
        assert "wrong" not in proxy.errors["u"]  # its own secret is scrubbed from messages


async def test_disabled_entry_is_never_reached(url_server: HttpServer) -> None:
    async with McpProxyBackend([bearer_entry(url_server.url, enabled=False)]) as proxy:
        assert proxy.specs == [] and proxy.errors == {}


# -- the network rules ------------------------------------------------------------------------


async def test_loopback_by_name_needs_allow_private(own_server: HttpServer) -> None:
    # 'localhost' is a name: the entry names its origin, but a name that resolves to a
    # private address needs [network] allow_private, as for any exact allow entry.
    url = own_server.url.replace("127.0.0.1", "localhost")
    refused = Policy.from_toml('version = 1\n[network]\nallow = ["example.org"]\n')
    async with McpProxyBackend([entry(url)], network=refused.network) as proxy:
        assert proxy.specs == []
        assert "(rule egress.address)" in proxy.errors["u"]
    granted = Policy.from_toml("version = 1\n[network]\nallow_private = true\n")
    async with McpProxyBackend([entry(url)], network=granted.network) as proxy:
        assert proxy.errors == {} and proxy.specs


async def test_deny_rule_wins_over_the_entry(own_server: HttpServer) -> None:
    policy = Policy.from_toml('version = 1\n[network]\ndeny = ["127.0.0.0/8"]\n')
    async with McpProxyBackend([entry(own_server.url)], network=policy.network) as proxy:
        assert proxy.specs == []
        assert "(rule network.deny)" in proxy.errors["u"]


async def test_scheme_and_port_rules_apply(own_server: HttpServer) -> None:
    for rules in ('schemes = ["https"]', "ports = [443]"):
        policy = Policy.from_toml(f"version = 1\n[network]\n{rules}\n")
        async with McpProxyBackend([entry(own_server.url)], network=policy.network) as proxy:
            assert proxy.specs == [], rules
            assert "refused" in proxy.errors["u"], rules


async def test_redirect_to_another_origin_is_refused(url_server: HttpServer, bearer: str) -> None:
    base = url_server.url.rsplit("/mcp", 1)[0]
    async with McpProxyBackend([bearer_entry(f"{base}/moved")]) as proxy:
        assert proxy.specs == []
        assert "redirect" in proxy.errors["u"] and "refused" in proxy.errors["u"]


async def test_the_entry_grants_nothing_to_the_network_tools(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    port = int(url_server.url.rsplit(":", 1)[1].split("/")[0])
    async with broker_for([bearer_entry(url_server.url)], tmp_path) as broker:
        assert broker.test_proxy.specs
        verdict = broker.policy.network.check("http", "127.0.0.1", port)
    assert not verdict.allowed


# -- through runtime serve --mcp ----------------------------------------------------------


def _serve_policy(tmp_path: Path, url: str, network: str = "") -> list[str]:
    from tests.mcp.conftest import serve_mcp_argv

    policy = tmp_path / "policy.toml"
    policy.write_text(
        POLICY
        + network
        + f'\n[[mcp_servers]]\nname = "u"\nurl = "{url}"\n'
        + 'headers = { Authorization = "env:URL_MCP_BEARER" }\n'
    )
    return serve_mcp_argv("--policy", str(policy), "--workspace", str(tmp_path / "ws"))


@asynccontextmanager
async def _serve_session(argv: list[str]) -> AsyncIterator[Any]:
    import os

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # The SDK passes a child only a few variables by default; the broker needs the token's.
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    with open("/dev/null", "w") as errlog:  # noqa: ASYNC230 - opened once per test
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def test_through_runtime_serve(url_server: HttpServer, bearer: str, tmp_path: Path) -> None:
    async with _serve_session(_serve_policy(tmp_path, url_server.url)) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        ok = await session.call_tool("u__add", {"a": 20, "b": 22})
    assert {"u__add", "u__slow"} <= names
    assert not ok.is_error and ok.structured_content is not None
    assert ok.structured_content["sum"] == 42


async def test_runtime_serve_applies_the_policys_network_rules(
    url_server: HttpServer, bearer: str, tmp_path: Path
) -> None:
    from mcp.shared.exceptions import MCPError

    network = '\n[network]\ndeny = ["127.0.0.1"]\n'
    async with _serve_session(_serve_policy(tmp_path, url_server.url, network)) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        with pytest.raises(MCPError) as info:
            await session.call_tool("u__add", {"a": 1, "b": 2})
    assert "u__add" not in names
    assert "network.deny" in str(info.value)
