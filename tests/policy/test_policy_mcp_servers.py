"""The ``[[mcp_servers]]`` table is part of the policy schema: validated with the rest of the
file (errors name file, line and field), shipped in policy/policy.schema.json, and read by
``runtime policy check``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema_rs
import pytest

from runtime.errors import PolicyError
from runtime.policy import Policy
from runtime.policy.schema import schema_text

REPO = Path(__file__).resolve().parents[2]

TABLE = """\
version = 1
default = "deny"

[tools]
"notes__search" = "allow"

[[mcp_servers]]
name = "notes"
command = ["python3", "/opt/notes/server.py"]
prefix = "nt"
env = { NOTES_DIR = "/srv/notes" }
network = true
tools = ["search"]
read_only = ["/srv/notes"]
memory_mb = 512
pids = 32

[[mcp_servers]]
name = "other"
command = ["other-server"]
"""


def test_table_is_parsed() -> None:
    policy = Policy.from_toml(TABLE)
    notes, other = policy.document.mcp_servers
    assert (notes.name, notes.tool_prefix, notes.network) == ("notes", "nt", True)
    assert notes.read_only == ["/srv/notes"] and (notes.memory_mb, notes.pids) == (512, 32)
    assert (other.tool_prefix, other.network, other.memory_mb, other.pids) == (
        "other",
        False,
        2048,
        128,
    )
    assert Policy.from_toml("version = 1\n").document.mcp_servers == []


@pytest.mark.parametrize(
    ("entry", "field", "line"),
    [
        ('name = "a"\ncommand = []\n', "mcp_servers.1.command", 9),
        ('name = "a"\ncommand = "x y"\n', "mcp_servers.1.command", 9),
        ('name = "bad name"\ncommand = ["x"]\n', "mcp_servers.1.name", 8),
        ('name = "a"\ncommand = ["x"]\nshell = true\n', "mcp_servers.1.shell", 10),
        ('name = "a"\ncommand = ["x"]\nread_only = ["rel"]\n', "mcp_servers.1.read_only", 10),
        ('name = "a"\ncommand = ["x"]\nmemory_mb = 0\n', "mcp_servers.1.memory_mb", 10),
        ('name = "a"\ncommand = ["x"]\nenv = { "A=B" = "1" }\n', "mcp_servers.1.env", 10),
        # A duplicate names the second entry, the one to change (not the first's header).
        ('name = "z"\ncommand = ["x"]\n', "mcp_servers.1.name", 8),  # name "z" twice
        ('name = "y"\nprefix = "z"\ncommand = ["x"]\n', "mcp_servers.1.prefix", 9),
        ('name = "y"\nprefix = "a__b"\ncommand = ["x"]\n', "mcp_servers.1.prefix", 9),
        ('name = "y_"\ncommand = ["x"]\n', "mcp_servers.1.name", 8),
    ],
)
def test_errors_name_file_line_and_field(entry: str, field: str, line: int) -> None:
    text = 'version = 1\n\n\n[[mcp_servers]]\nname = "z"\ncommand = ["x"]\n[[mcp_servers]]\n'
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text + entry, "p")
    assert info.value.details["field"] == field
    assert info.value.details["line"] == line
    assert info.value.message.startswith(f"p:{line}: {field}")


def test_shipped_json_schema_has_the_table() -> None:
    schema = json.loads(schema_text())
    validator = jsonschema_rs.validator_for(schema)
    assert "mcp_servers" in schema["properties"]
    assert validator.is_valid({"mcp_servers": [{"name": "a", "command": ["x"]}]})
    assert not validator.is_valid({"mcp_servers": [{"name": "a", "command": "x"}]})
    assert not validator.is_valid({"mcp_servers": [{"name": "a", "command": ["x"], "y": 1}]})


def _policy_check(policy: Path, call: dict[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", "policy", "check", str(policy), "-"],
        input=json.dumps(call),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_policy_check_decides_external_tools(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(TABLE)
    allowed = _policy_check(policy, {"tool": "nt__search", "arguments": {"q": "x"}})
    assert allowed.returncode == 0, allowed.stderr
    out = json.loads(allowed.stdout)
    assert out["action"] == "deny"  # the policy names notes__search, not the nt__ prefix
    assert out["arguments_checked"] is False
    # A tool the entry does not import, and an unknown prefix: no such tool.
    for tool in ("nt__get", "zz__search"):
        done = _policy_check(policy, {"tool": tool, "arguments": {}})
        assert done.returncode == 65
        assert json.loads(done.stdout)["error"]["type"] == "tool_not_found"


def test_policy_check_reports_table_errors(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[[mcp_servers]]\nname = "a"\ncommand = "not a list"\n')
    done = _policy_check(policy, {"tool": "a__x", "arguments": {}})
    assert done.returncode == 64
    error = json.loads(done.stdout)["error"]
    assert (error["line"], error["field"]) == (3, "mcp_servers.0.command")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/", "/ itself"),
        ("/etc", "a top-level directory"),
        ("/root", "a top-level directory"),
        ("/srv/../etc", "a top-level directory"),
        ("/home/alice", "a home directory"),
        ("/proc/1", "under /proc"),
        ("/var/lib/docker", "under /var/lib"),
    ],
)
def test_read_only_paths_the_sandbox_never_binds_are_refused_at_load(path: str, why: str) -> None:
    """The sandbox's own rule, at load: such a server used to pass the policy check, then
    fail when it started, logged as a warning while its tools went missing."""
    text = f'version = 1\n[[mcp_servers]]\nname = "a"\ncommand = ["x"]\nread_only = ["{path}"]\n'
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "p")
    assert (info.value.details["field"], info.value.details["line"]) == (
        "mcp_servers.0.read_only",
        5,
    )
    assert f"{path!r} is never bound: it is {why}" in info.value.message


def test_read_only_paths_are_judged_lexically_at_load() -> None:
    """Whether a path exists (or holds runtime state) is the host's when the server starts,
    not the policy's: a path missing here still loads."""
    text = 'version = 1\n[[mcp_servers]]\nname = "a"\ncommand = ["x"]\n'
    policy = Policy.from_toml(text + 'read_only = ["/srv/no/such/dir", "/home/u/data"]\n')
    assert policy.document.mcp_servers[0].read_only == ["/srv/no/such/dir", "/home/u/data"]


def test_policy_check_refuses_a_read_only_root(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('[[mcp_servers]]\nname = "a"\ncommand = ["x"]\nread_only = ["/"]\n')
    done = _policy_check(policy, {"tool": "a__x", "arguments": {}})
    assert done.returncode == 64
    error = json.loads(done.stdout)["error"]
    assert (error["line"], error["field"]) == (4, "mcp_servers.0.read_only")


def test_a_table_built_in_code_names_the_duplicate_entry() -> None:
    from runtime.mcp.external import parse_external_servers

    entries = [{"name": "a", "command": ["x"]}, {"name": "b", "prefix": "a", "command": ["x"]}]
    with pytest.raises(PolicyError) as info:
        parse_external_servers(entries, where="code")
    assert info.value.details["field"] == "mcp_servers[1].prefix"
    assert info.value.message == "code: mcp_servers[1].prefix: mcp prefix 'a' is used twice"
