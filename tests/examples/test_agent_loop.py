"""examples/agent_loop.py runs start to end and shows what it promises."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.sandbox
@pytest.mark.skipif(
    importlib.util.find_spec("runtime.backends.sandbox") is None,
    reason="needs the sandbox backend (the example's file tools run in it)",
)
def test_agent_loop_example() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "agent_loop.py")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    assert "<- c2: ERROR tool_error" in out  # the failure ...
    assert "model -> list_files" in out  # ... the model recovers from
    assert "<- c5: ERROR policy_denied" in out  # the injected traversal
    assert "[approval] write_file" in out and "-> approved" in out
    assert "## To do\n- benchmark the wasm guests" in out  # the file was written
    assert "root:" not in out
    assert "audit chain verified: True" in out
