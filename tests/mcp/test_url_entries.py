"""``[[mcp_servers]]`` entries with ``url``: validated with the policy file (errors name file,
line and field), shipped in the JSON Schema, and kept apart from stdio-only fields."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

from runtime.errors import PolicyError
from runtime.mcp.external import load_policy, placeholder_spec
from runtime.mcp.launch import launch_for
from runtime.policy import Policy
from runtime.policy.schema import schema_text

HEAD = 'version = 1\n\n\n[[mcp_servers]]\nname = "z"\ncommand = ["x"]\n[[mcp_servers]]\n'


def test_url_entry_is_parsed() -> None:
    policy = Policy.from_toml(
        HEAD + 'name = "s"\nurl = "https://mcp.example.com/mcp"\n'
        'headers = { Authorization = "env:S_TOKEN", X-Client = "runtime" }\n'
        "start_timeout_s = 5\n"
    )
    server = policy.document.mcp_servers[1]
    assert (server.url, server.command, server.tool_prefix) == (
        "https://mcp.example.com/mcp",
        None,
        "s",
    )
    assert server.header_variables() == ["S_TOKEN"]


@pytest.mark.parametrize(
    ("entry", "field", "line"),
    [
        # both command and url
        ('name = "a"\nurl = "http://127.0.0.1:1/mcp"\ncommand = ["x"]\n', "command", 10),
        # neither
        ('name = "a"\nprefix = "b"\n', "", 7),
        ('name = "a"\nurl = "ftp://h/mcp"\n', "url", 9),
        ('name = "a"\nurl = "file:///etc/passwd"\n', "url", 9),
        ('name = "a"\nurl = "http://user:pw@h/mcp"\n', "url", 9),
        ('name = "a"\nurl = "http://h/mcp#x"\n', "url", 9),
        ('name = "a"\nurl = "http:///mcp"\n', "url", 9),
        ('name = "a"\nurl = "http://h:99999/mcp"\n', "url", 9),
        ('name = "a"\nurl = "http://h/mcp"\nbogus = 1\n', "bogus", 10),
        ('name = "a"\nurl = "http://h/mcp"\nmemory_mb = 64\n', "memory_mb", 10),
        ('name = "a"\nurl = "http://h/mcp"\nnetwork = true\n', "network", 10),
        ('name = "a"\nurl = "http://h/mcp"\nenv = { A = "b" }\n', "env", 10),
        ('name = "a"\ncommand = ["x"]\nheaders = { A = "b" }\n', "headers", 10),
        ('name = "a"\nurl = "http://h/mcp"\nheaders = { Host = "b" }\n', "headers", 10),
        ('name = "a"\nurl = "http://h/mcp"\nheaders = { "A B" = "b" }\n', "headers", 10),
        ('name = "a"\nurl = "http://h/mcp"\nheaders = { A = "b\\r\\nX: y" }\n', "headers", 10),
        ('name = "a"\nurl = "http://h/mcp"\nheaders = { A = "env:1X" }\n', "headers", 10),
    ],
)
def test_bad_entries_name_file_line_and_field(entry: str, field: str, line: int) -> None:
    full = "mcp_servers.1" + (f".{field}" if field else "")
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(HEAD + entry, "p.toml")
    assert info.value.details["field"] == full
    assert info.value.details["line"] == line
    assert info.value.message.startswith(f"p.toml:{line}: {full}")


def test_a_header_secret_may_not_be_passed_to_tools() -> None:
    text = (
        '[env]\npass = ["MCP_*"]\n[[mcp_servers]]\nname = "a"\nurl = "http://h/mcp"\n'
        'headers = { Authorization = "env:MCP_TOKEN" }\n'
    )
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "p.toml")
    assert "MCP_TOKEN" in info.value.message and "[env] pass" in info.value.message
    # Denied by [env] deny: never passed, so allowed.
    Policy.from_toml(text.replace('pass = ["MCP_*"]', 'pass = ["MCP_*"]\ndeny = ["MCP_TOKEN"]'))


def test_the_token_stays_out_of_the_tools_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOKEN", "secret-value")
    policy = Policy.from_toml(
        '[[mcp_servers]]\nname = "a"\nurl = "http://h/mcp"\n'
        'headers = { Authorization = "env:MCP_TOKEN" }\n'
    )
    env = policy.env({})
    assert "MCP_TOKEN" not in env and "secret-value" not in env.values()


def test_shipped_json_schema_knows_url_entries() -> None:
    validator = jsonschema_rs.validator_for(json.loads(schema_text()))
    assert validator.is_valid({"mcp_servers": [{"name": "a", "url": "https://h/mcp"}]})
    assert validator.is_valid(
        {"mcp_servers": [{"name": "a", "url": "http://h/mcp", "headers": {"A": "env:B"}}]}
    )
    assert not validator.is_valid({"mcp_servers": [{"name": "a"}]})
    assert not validator.is_valid(
        {"mcp_servers": [{"name": "a", "url": "https://h/mcp", "command": ["x"]}]}
    )
    assert not validator.is_valid({"mcp_servers": [{"name": "a", "url": "ftp://h/mcp"}]})
    repo = Path(__file__).resolve().parents[2]
    assert (repo / "policy" / "policy.schema.json").read_text() == schema_text()


def test_enabled_false_url_entry_is_kept_but_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[[mcp_servers]]\nname = "on"\nurl = "http://127.0.0.1:1/mcp"\n'
        '[[mcp_servers]]\nname = "off"\nurl = "http://127.0.0.1:2/mcp"\nenabled = false\n'
    )
    policy, servers = load_policy(path)
    assert [s.name for s in servers] == ["on"]
    assert [s.name for s in policy.document.mcp_servers] == ["on", "off"]
    # runtime policy check decides on the names of an enabled server only.
    assert placeholder_spec(servers, "on__x") is not None
    assert placeholder_spec(list(policy.document.mcp_servers), "off__x") is None


def test_a_url_server_is_never_launched() -> None:
    from runtime.errors import SandboxError
    from runtime.mcp.external import ExternalServer

    server = ExternalServer.model_validate({"name": "a", "url": "http://h/mcp"})
    with pytest.raises(SandboxError, match="reached by url"):
        launch_for(server, mode="best_effort")
