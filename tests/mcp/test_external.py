"""External MCP servers behind the policy: the mcp backend with a server written with the SDK."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.catalogue import Catalogue
from runtime.errors import PolicyError
from runtime.mcp.external import ExternalServer, load_external_servers, parse_external_servers
from runtime.mcp.launch import isolation_available
from tests.mcp import standins

pytestmark = pytest.mark.anyio

EXT_SERVER = Path(__file__).resolve().parent / "ext_server.py"


def _python() -> tuple[str, dict[str, str]]:
    """An interpreter the sandboxed server (uid nobody) can execute. The test venv's python
    may live under a private home directory; the system python of the same version with the
    venv's site-packages on PYTHONPATH works from anywhere."""
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if system.exists():
        site = next(p for p in sys.path if p.endswith("site-packages"))
        return str(system), {"PYTHONPATH": site}
    return sys.executable, {}


def server(**kw: Any) -> ExternalServer:
    python, env = _python()
    data: dict[str, Any] = {
        "name": "ext",
        "command": [python, str(EXT_SERVER)],
        "env": {"EXT_TOKEN": "t0k", **env},
    }
    data.update(kw)
    return ExternalServer.model_validate(data)


@asynccontextmanager
async def proxied_broker(
    tmp_path: Path, servers: list[ExternalServer], policy: Any
) -> AsyncIterator[Any]:
    """A broker whose only tools are ``servers``' (``test_registered``: what the proxy
    registered; ``test_proxy``: the proxy)."""
    standins.install()
    from runtime.broker import Broker

    # best_effort: the whole suite runs on hosts without the isolation tools; the sandbox
    # tests check the isolation itself.
    async with McpProxyBackend(servers, mode="best_effort") as proxy:
        catalogue = Catalogue(builtins=False)
        registered = proxy.register(catalogue)
        async with Broker(
            tmp_path / "ws",
            policy,
            tmp_path / "audit.db",
            catalogue=catalogue,
            backends={"mcp": proxy},
        ) as b:
            b.test_registered = registered
            b.test_proxy = proxy
            yield b


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Any]:
    policy = standins.ScriptedPolicy(actions={"ext__boom": "deny"}, hidden=set())
    async with proxied_broker(tmp_path, [server()], policy) as b:
        yield b


async def test_tools_listed_under_prefix(broker: Any) -> None:
    assert sorted(broker.test_registered) == [
        "ext__add",
        "ext__boom",
        "ext__crash",
        "ext__probe",
        "ext__whoami",
    ]
    spec = broker.catalogue.get("ext__add")
    assert spec.category == "mcp"
    assert spec.backend.value == "mcp"
    assert spec.parameters["required"] == ["a", "b"]
    assert spec.result is not None and spec.result["required"] == ["sum", "calls"]
    mcp_def = next(d for d in broker.catalogue.export("mcp") if d["name"] == "ext__add")
    assert mcp_def["annotations"]["openWorldHint"] is True


async def test_call_success_and_audit(broker: Any) -> None:
    result = await broker.call({"tool": "ext__add", "arguments": {"a": 2, "b": 3}})
    assert result.success, result.error
    assert result.result["sum"] == 5
    assert result.backend == "mcp"
    records = broker.audit.tail(2)
    kinds = [r["kind"] if isinstance(r, dict) else r.kind for r in records]
    assert kinds == ["request", "completion"]


async def test_schema_validated_before_the_server_sees_it(broker: Any) -> None:
    bad = await broker.call({"tool": "ext__add", "arguments": {"a": "two", "b": 3}})
    assert bad.error is not None and bad.error.type == "invalid_arguments"
    extra = await broker.call({"tool": "ext__add", "arguments": {"a": 1}})
    assert extra.error is not None and extra.error.type == "invalid_arguments"
    good = await broker.call({"tool": "ext__add", "arguments": {"a": 1, "b": 1}})
    assert good.success and good.result["calls"] == 1  # the refused calls never arrived


async def test_policy_applies(broker: Any) -> None:
    result = await broker.call({"tool": "ext__boom", "arguments": {}})
    assert result.error is not None and result.error.type == "policy_denied"


async def test_server_error_is_tool_error(broker: Any) -> None:
    broker.policy.actions.pop("ext__boom")
    result = await broker.call({"tool": "ext__boom", "arguments": {}})
    assert result.error is not None and result.error.type == "tool_error"
    assert "boom from the external server" in result.error.message


async def test_minimal_environment(broker: Any) -> None:
    result = await broker.call({"tool": "ext__whoami", "arguments": {}})
    assert result.success
    env = set(result.result["env"])
    assert "EXT_TOKEN" in env
    assert not {k for k in env if k.startswith(("PYTEST", "VIRTUAL_ENV", "RUNTIME_"))}
    assert env <= {
        "EXT_TOKEN",
        "PYTHONPATH",
        "PATH",
        "HOME",
        "LANG",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "TMPDIR",
        "LC_CTYPE",
    }


async def test_crash_becomes_error_and_broker_lives(broker: Any) -> None:
    crashed = await broker.call({"tool": "ext__crash", "arguments": {}})
    assert not crashed.success
    assert crashed.error is not None and crashed.error.type == "sandbox_error"
    assert "exited" in crashed.error.message
    again = await broker.call({"tool": "ext__add", "arguments": {"a": 1, "b": 1}})
    assert not again.success and again.error is not None
    assert again.error.type == "sandbox_error"
    assert "not running" in again.error.message


async def test_server_that_does_not_start(tmp_path: Path) -> None:
    missing = server(name="gone", command=[str(tmp_path / "no-such-program")])
    async with McpProxyBackend([missing], mode="best_effort") as proxy:
        assert proxy.specs == []
        assert "gone" in proxy.errors


@pytest.mark.sandbox
async def test_server_runs_isolated() -> None:
    problem = isolation_available()
    if problem is not None:
        pytest.skip(problem)
    async with McpProxyBackend([server()], mode="strict") as proxy:
        assert proxy.errors == {}
        conn_fp = proxy.fingerprint()
        assert "netns" in conn_fp.mechanisms and "userns" in conn_fp.mechanisms
        assert {"mountns", "pivot_root", "seccomp", "landlock"} <= set(conn_fp.mechanisms)
        from runtime.backends.base import ExecRequest
        from runtime.models import Decision, Limits

        spec = next(s for s in proxy.specs if s.name == "ext__whoami")
        outcome = await proxy.run(
            ExecRequest(
                call_id="c1",
                spec=spec,
                arguments={},
                workspace=Path("/"),
                limits=Limits(),
                decision=Decision(action="allow", rule="t"),
            )
        )
    info = outcome.result
    assert info["uid"] != 0  # never host root
    assert info["interfaces"] == ["lo"]  # an empty network namespace
    assert info["pid"] < 10  # its own pid namespace
    # No writes outside its scratch directory (its HOME and /tmp, a private tmpfs).
    assert info["wrote_outside"] is False
    assert info["wrote_home"] is True


@pytest.mark.sandbox
async def test_network_true_shares_host_network() -> None:
    problem = isolation_available()
    if problem is not None:
        pytest.skip(problem)
    async with McpProxyBackend([server(network=True)], mode="strict") as proxy:
        assert "netns" not in proxy.fingerprint().mechanisms


def test_policy_table(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        """
[[mcp_servers]]
name = "notes"
command = ["python3", "/opt/notes/server.py"]
prefix = "nt"
env = { NOTES_DIR = "/srv/notes" }
network = true
tools = ["search"]
"""
    )
    (spec,) = load_external_servers(policy)
    assert spec.tool_prefix == "nt"
    assert spec.command == ["python3", "/opt/notes/server.py"]
    assert spec.network is True and spec.tools == ["search"]
    assert load_external_servers(None) == []


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([{"name": "x", "command": []}], "mcp_servers[0].command"),
        ([{"name": "x", "command": "python3 server.py"}], "mcp_servers[0].command"),
        ([{"name": "bad name", "command": ["x"]}], "mcp_servers[0].name"),
        ([{"name": "x", "command": ["x"], "shell": True}], "mcp_servers[0].shell"),
        ({"name": "x"}, "mcp_servers"),
    ],
)
def test_policy_table_errors(data: Any, field: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_external_servers(data)
    assert info.value.details["field"] == field


def test_duplicate_prefix() -> None:
    with pytest.raises(PolicyError):
        parse_external_servers(
            [{"name": "a", "command": ["x"]}, {"name": "b", "command": ["y"], "prefix": "a"}]
        )


POLICY_WITH_SERVERS = """
version = 1
default = "deny"

[categories]
mcp = "ask"

[[mcp_servers]]
name = "notes"
command = ["python3", "/opt/notes/server.py"]
env = { NOTES_DIR = "/srv/notes" }

[tools."notes__search"]
action = "allow"

[[mcp_servers]]
name = "other"
command = ["other-server"]
"""


def test_load_policy_reads_the_table(tmp_path: Path) -> None:
    from runtime.mcp.external import load_policy

    pytest.importorskip("runtime.policy")
    path = tmp_path / "p.toml"
    path.write_text(POLICY_WITH_SERVERS)
    policy, servers = load_policy(path)
    assert [s.name for s in servers] == ["notes", "other"]
    assert policy.document.default == "deny"
    assert policy.document.mcp_servers == servers  # read from the parsed policy
    assert load_external_servers(path) == servers


def test_load_policy_reports_errors_with_lines(tmp_path: Path) -> None:
    from runtime.mcp.external import load_policy

    pytest.importorskip("runtime.policy")
    path = tmp_path / "p.toml"
    path.write_text(
        '[[mcp_servers]]\nname = "a"\ncommand = ["x"]\n\n[categories]\nfile = "perhaps"\n'
    )
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.details.get("line") == 6


def test_mcp_server_errors_name_the_line(tmp_path: Path) -> None:
    from runtime.mcp.external import load_policy

    pytest.importorskip("runtime.policy")
    path = tmp_path / "p.toml"
    path.write_text(
        '[[mcp_servers]]\nname = "a"\ncommand = ["x"]\n\n'
        '[[mcp_servers]]\nname = "b"\ncommand = ["y"]\nshell = true\n'
    )
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert info.value.details.get("line") == 8
    assert "mcp_servers.1.shell" in info.value.message


def test_inline_table_form_is_accepted() -> None:
    pytest.importorskip("runtime.policy")
    from runtime.policy import Policy

    policy = Policy.from_toml('mcp_servers = [{ name = "a", command = ["x"] }]\n')
    assert [s.name for s in policy.document.mcp_servers] == ["a"]


async def test_serve_with_external_servers_in_the_policy(tmp_path: Path) -> None:
    """``runtime serve --mcp --policy P`` where P names an external server: its tools are
    listed next to the built-ins, validated, decided by the real policy engine and audited."""
    pytest.importorskip("runtime.policy")
    pytest.importorskip("runtime.audit")
    from tests.mcp.conftest import serve_mcp_argv, stdio_session

    python, env = _python()
    env_toml = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f"""
version = 1
default = "deny"

[sandbox]
mode = "{"strict" if isolation_available() is None else "best_effort"}"

[categories]
mcp = "allow"
data = "allow"

[[rules]]
id = "ext.small-sums"
tools = ["ext__add"]
action = "deny"
reason = "sums over 100 are not allowed"
when = [{{ arg = "a", gt = 100 }}]

[[mcp_servers]]
name = "ext"
command = ["{python}", "{EXT_SERVER}"]
env = {{ {env_toml} }}
"""
    )
    audit = tmp_path / "audit.db"
    argv = serve_mcp_argv(
        "--policy", str(policy), "--workspace", str(tmp_path / "ws"), "--audit", str(audit)
    )
    async with stdio_session(argv) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        ok = await session.call_tool("ext__add", {"a": 2, "b": 40})
        denied = await session.call_tool("ext__add", {"a": 1000, "b": 1})
        bad = await session.call_tool("ext__add", {"a": "x", "b": 1})
    assert {"ext__add", "ext__whoami"} <= names
    assert "read_file" not in names  # the policy allows only mcp and data tools
    assert not ok.is_error and ok.structured_content is not None
    assert ok.structured_content["sum"] == 42
    assert denied.is_error and denied.structured_content is not None
    assert denied.structured_content["error"]["type"] == "policy_denied"
    assert "ext.small-sums" in denied.structured_content["error"]["message"]
    assert bad.structured_content is not None
    assert bad.structured_content["error"]["type"] == "invalid_arguments"

    from runtime.audit import AuditLog

    log = AuditLog(audit)
    try:
        records = log.tail(20)
        assert log.verify().ok
    finally:
        log.close()
    ran = [r for r in records if r.tool == "ext__add" and r.kind == "request" and r.sandbox]
    assert ran and ran[0].backend == "mcp"
    assert ran[0].sandbox is not None and ran[0].sandbox["backend"] == "mcp"


def test_example_policy_loads() -> None:
    pytest.importorskip("runtime.policy")
    from runtime.mcp.external import load_policy

    policy, servers = load_policy(
        Path(__file__).resolve().parents[2] / "examples" / "mcp_policy.toml"
    )
    assert [s.name for s in servers] == ["notes"]
    assert policy.document.categories["file"] == "allow"


async def test_strict_mode_refuses_without_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.backends import mcp_proxy
    from runtime.errors import SandboxUnavailable

    monkeypatch.setattr(mcp_proxy, "isolation_available", lambda: "no Landlock")
    with pytest.raises(SandboxUnavailable):
        async with McpProxyBackend([server()], mode="strict"):
            pass


async def test_servers_start_side_by_side() -> None:
    two = [server(), server(name="ext2", prefix="two")]
    async with McpProxyBackend(two, mode="best_effort") as proxy:
        names = {s.name for s in proxy.specs}
    assert {"ext__add", "two__add"} <= names


async def test_serve_profile_scopes_listing_and_calls(tmp_path: Path) -> None:
    """``--profile``: the listing and the calls are the profile's only."""
    pytest.importorskip("runtime.policy")
    pytest.importorskip("runtime.backends.wasm")
    from tests.mcp.conftest import serve_mcp_argv, stdio_session

    policy = tmp_path / "policy.toml"
    policy.write_text(
        """
version = 1
default = "deny"

[categories]
data = "allow"
memory = "allow"

[profiles.parser]
tools = ["json_parse"]
"""
    )
    argv = serve_mcp_argv(
        "--policy",
        str(policy),
        "--workspace",
        str(tmp_path / "ws"),
        "--audit",
        str(tmp_path / "a.db"),
    )
    async with stdio_session([*argv, "--profile", "parser"]) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        ok = await session.call_tool("json_parse", {"text": "[1]"})
        with pytest.raises(MCPError) as hidden:
            await session.call_tool("memory_write", {"key": "k", "content": "c"})
    async with stdio_session(argv) as session:
        everyone = {t.name for t in (await session.list_tools()).tools}
    assert names == {"json_parse"}
    assert ok.structured_content == {"data": [1]}
    assert hidden.value.code == types.INVALID_PARAMS
    assert {"json_parse", "memory_write"} <= everyone
