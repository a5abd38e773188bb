"""PYTHONPATH for a test's child interpreter: the checkout first, then what the test run's own
PYTHONPATH held. Replacing it with the checkout alone lost the site-packages an unprivileged
run reaches through PYTHONPATH (/usr/bin/python3 as another user: the venv's interpreter lives
under root's home), so its children could not import the project's dependencies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_path(first: Path) -> str:
    return os.pathsep.join([str(first), *filter(None, [os.environ.get("PYTHONPATH")])])


def run_python(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in a fresh interpreter with the checkout importable and nothing else of this
    process's environment (PATH=/usr/bin:/bin); raises when it fails."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
        timeout=120,
    )
