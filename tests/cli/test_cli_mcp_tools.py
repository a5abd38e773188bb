"""``runtime exec`` (and the Python API) on a call to a tool of the policy's
``[[mcp_servers]]``: such tools exist only while ``runtime serve --mcp --policy P`` runs their
server. The result said "no tool named 'notes__search'", as for a name that exists nowhere,
so the user went looking for a typo; it now says where the tool is served."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import result_of, run

POLICY = """\
version = 1
default = "deny"

[tools]
"nt__search" = "allow"

[[mcp_servers]]
name = "notes"
command = ["python3", "/opt/notes/server.py"]
prefix = "nt"
tools = ["search"]
"""


def _write(tmp_path: Path, tool: str) -> tuple[Path, Path]:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    call = tmp_path / "call.json"
    call.write_text(json.dumps({"tool": tool, "arguments": {"q": "x"}, "call_id": "m1"}))
    return policy, call


def test_exec_of_an_mcp_server_tool_points_to_serve(tmp_path: Path) -> None:
    policy, call = _write(tmp_path, "nt__search")
    proc = run("exec", str(call), "--policy", str(policy), cwd=tmp_path)
    assert proc.returncode == 65, proc.stderr
    res = result_of(proc)
    assert res["call_id"] == "m1"
    assert res["error"]["type"] == "tool_not_found"
    message = res["error"]["message"]
    assert "'notes'" in message and "runtime serve --mcp" in message, message


def test_exec_of_an_unknown_name_is_unchanged(tmp_path: Path) -> None:
    # Not a tool the server lists (tools = ["search"]), nor its prefix: no hint.
    for tool in ("nt__delete", "zz__search"):
        policy, call = _write(tmp_path, tool)
        proc = run("exec", str(call), "--policy", str(policy), cwd=tmp_path)
        assert proc.returncode == 65, proc.stderr
        message = result_of(proc)["error"]["message"]
        assert message == f"no tool named {tool!r}"


def test_the_python_api_says_the_same(tmp_path: Path) -> None:
    from runtime import SyncBroker
    from runtime.policy import Policy

    with SyncBroker(workspace=tmp_path / "ws", policy=Policy.from_toml(POLICY)) as broker:
        result = broker.call({"tool": "nt__search", "arguments": {}})
    assert result.error is not None and result.error.type == "tool_not_found"
    assert "runtime serve --mcp" in result.error.message
    assert result.error.details["mcp_server"] == "notes"
