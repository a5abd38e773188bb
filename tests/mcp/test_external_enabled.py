"""``enabled`` on an ``[[mcp_servers]]`` entry (seed 000's mcpServers: name, url, enabled):
``enabled = false`` keeps the entry, validated with the file and its name and prefix
reserved, but never starts the server, so its tools do not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.errors import PolicyError
from runtime.mcp.external import (
    ExternalServer,
    load_external_servers,
    load_policy,
    parse_external_servers,
    placeholder_spec,
)
from runtime.policy import Policy
from runtime.policy.schema import schema_text

POLICY = """\
version = 1
default = "deny"

[[mcp_servers]]
name = "filesystem"
command = ["fs-server"]

[[mcp_servers]]
name = "database"
command = ["db-server"]
enabled = false
"""


def test_disabled_entry_is_parsed_but_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(POLICY)
    policy, servers = load_policy(path)
    assert [(s.name, s.enabled) for s in policy.document.mcp_servers] == [
        ("filesystem", True),
        ("database", False),
    ]
    assert [s.name for s in servers] == ["filesystem"]
    assert load_external_servers(path) == servers


def test_parse_external_servers_drops_disabled() -> None:
    servers = parse_external_servers(
        [{"name": "a", "command": ["x"]}, {"name": "b", "command": ["y"], "enabled": False}]
    )
    assert [s.name for s in servers] == ["a"]


def test_disabled_entry_is_still_validated() -> None:
    """A disabled entry with a mistake fails the file: enabling it later must not be the
    moment its error shows, and its name and prefix stay reserved."""
    bad = POLICY.replace('command = ["db-server"]', 'command = "db-server"')
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(bad, "p")
    assert info.value.details["field"] == "mcp_servers.1.command"
    twice = POLICY.replace('name = "database"', 'name = "filesystem"')
    with pytest.raises(PolicyError):
        Policy.from_toml(twice, "p")


def test_disabled_tools_do_not_exist_for_policy_check() -> None:
    entries = list(Policy.from_toml(POLICY).document.mcp_servers)
    assert placeholder_spec(entries, "filesystem__read") is not None
    assert placeholder_spec(entries, "database__query") is None


@pytest.mark.anyio
async def test_proxy_never_starts_a_disabled_server() -> None:
    """However the list was built: the program does not exist, so starting it would
    record an error for it."""
    off = ExternalServer.model_validate(
        {"name": "off", "command": ["/nonexistent/server"], "enabled": False}
    )
    async with McpProxyBackend([off], mode="best_effort") as proxy:
        assert proxy.specs == [] and proxy.errors == {}


def test_schema_documents_enabled() -> None:
    entry = json.loads(schema_text())["$defs"]["McpServerEntry"]["properties"]["enabled"]
    assert entry["type"] == "boolean" and entry["default"] is True
    assert "Default true" in entry["description"]
