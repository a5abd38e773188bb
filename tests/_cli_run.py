"""``runtime ARGS`` in a subprocess with a timeout, for tests whose failure is a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[1]


def run_runtime(
    *args: str | bytes, cwd: Path, timeout: float = 30, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``runtime ARGS`` run from ``cwd`` with this checkout on PYTHONPATH, ``stdin`` as its
    input; a run past ``timeout`` fails the test as a hang."""
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    try:
        return subprocess.run(
            [sys.executable, "-m", "runtime", *args],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"runtime {' '.join(map(str, args))} hung")
