"""The README's install (``pip install -e .``) does not bring the optional ``mcp`` SDK
(the ``mcp`` extra). Commands that do not speak MCP must work without it, and ``serve --mcp``
must say what to install — they all died with ``ModuleNotFoundError: mcp_types`` because
``runtime.mcp`` imported the SDK for its launch and policy helpers too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]

# Runs the CLI in a process where ``import mcp`` / ``import mcp_types`` fail as they do when
# the SDK is not installed (a None entry in sys.modules makes the import raise).
_WITHOUT_MCP = (
    "import sys\n"
    "for name in ('mcp', 'mcp_types'):\n"
    "    sys.modules[name] = None\n"
    "from runtime.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT_MCP, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_doctor_without_the_mcp_sdk(tmp_path: Path) -> None:
    proc = run("doctor", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "sandbox" in json.loads(proc.stdout)


def test_policy_check_without_the_mcp_sdk(tmp_path: Path) -> None:
    proc = run("policy", "check", "default", str(ROOT / "examples/denied.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rule"] == "paths.escape"


def test_policy_check_of_an_mcp_servers_tool_without_the_mcp_sdk(tmp_path: Path) -> None:
    call = tmp_path / "call.json"
    call.write_text('{"tool": "notes__search", "arguments": {"query": "x"}}')
    policy = str(ROOT / "examples/mcp_policy.toml")
    proc = run("policy", "check", policy, str(call), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["action"] == "allow"


def test_serve_mcp_without_the_mcp_sdk_names_the_extra(tmp_path: Path) -> None:
    proc = run("serve", "--mcp", "--workspace", str(tmp_path / "ws"), cwd=tmp_path)
    assert proc.returncode == 69
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "[mcp]" in proc.stderr
