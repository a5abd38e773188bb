"""The whole sandbox suite again, as an ordinary user (unprivileged user namespaces).

As root, this creates the system user ``rtsbx`` if it is missing and runs pytest on
tests/sandbox as that user. The venv's interpreter may live under a root-only home, so the
run uses the system python3 with the venv's site-packages on PYTHONPATH when needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

USER = "rtsbx"
ROOT = Path(__file__).resolve().parents[2]


def _ensure_user() -> None:
    if subprocess.run(["id", USER], capture_output=True, check=False).returncode == 0:
        return
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
        check=True,
        capture_output=True,
    )


def _interpreter(runuser: str) -> list[str]:
    probe = subprocess.run(
        [runuser, "-u", USER, "--", sys.executable, "-c", "pass"],
        capture_output=True,
        check=False,
    )
    if probe.returncode == 0:
        return [sys.executable]
    return ["/usr/bin/python3"]


@pytest.mark.timeout(1800)
def test_sandbox_suite_as_unprivileged_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the suite itself is the unprivileged run")
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("runuser is not installed")
    _ensure_user()
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *site]),
    }
    proc = subprocess.run(
        [
            runuser,
            "-u",
            USER,
            "--",
            *_interpreter(runuser),
            "-m",
            "pytest",
            "tests/sandbox",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--ignore={Path(__file__).relative_to(ROOT)}",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1700,
    )
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    assert proc.returncode == 0, tail + proc.stderr[-3000:]
    assert " passed" in tail
