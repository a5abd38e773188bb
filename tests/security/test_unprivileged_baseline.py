"""The baselines run by a user other than root.

Root runs each baseline call as a private uid. Any other user has none, and the worker ran as
that user: case C8-002's ``kill -9 -1`` then killed every process of the user, the bench
itself included (exit 137, no verdict, its /tmp/secbench-* tree left behind). The worker now
runs in a user + pid namespace of the case's own; where none can be made, the baselines are
refused as a usage error (exit 64), naming why.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks.security import executors

ROOT = Path(__file__).resolve().parents[2]
USER = "rtsbx"


def _as_user() -> list[str]:
    """The command prefix (up to the interpreter) that runs Python as an ordinary user: this
    process's own when it is not root, else ``rtsbx`` (as in tests/sandbox/test_unprivileged)."""
    if os.geteuid() != 0:
        return [sys.executable]
    runuser = shutil.which("runuser")
    if runuser is None or subprocess.run(["id", USER], capture_output=True).returncode:
        pytest.skip(f"needs runuser and the user {USER} to run as an ordinary user")
    probe = subprocess.run([runuser, "-u", USER, "--", sys.executable, "-c", "pass"])
    python = sys.executable if probe.returncode == 0 else "/usr/bin/python3"
    return [runuser, "-u", USER, "--", python]


def _bench() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return security_bench


@pytest.mark.timeout(180)
def test_kill_minus_one_in_a_baseline_case_reaches_only_the_case() -> None:
    prefix = _as_user()
    # Not under pytest's tmp_path: it is private to this user.
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-user-"))
    try:
        tmp.chmod(0o777)
        site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(tmp),
            "TMPDIR": str(tmp),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), *site]),
        }
        bystander = subprocess.Popen(
            [*prefix, "-c", "import time; time.sleep(120)"], env=env, start_new_session=True
        )
        try:
            bench = ["bench", "security", "--backend", "baseline-none", "--case", "C8-002"]
            done = subprocess.run(
                [*prefix, "-m", "runtime", *bench, "--json", "--no-progress"],
                cwd=tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=150,
            )
            assert bystander.poll() is None, "the user's unrelated process was killed"
        finally:
            bystander.kill()
            bystander.wait()
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        out = json.loads(done.stdout)
        assert out["backend"] == "baseline-none" and out["total"] == 1
        # `kill -9 -1` kills the case's own worker too: its call gives no reply, so the case
        # is an error (it cannot be told from a crash), not "contained"
        assert list(out["per_class"]) == ["C"]
        assert (out["total"], out["contained"], out["errored"]) == (1, 0, 1)
        assert "the worker exited -9" in out["error_detail"]["C8-002"][0]
        assert [p.name for p in tmp.iterdir() if p.name.startswith("secbench-")] == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("backend", ["baseline-none", "baseline-seed", "all"])
def test_without_root_or_user_namespaces_the_baselines_are_refused(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(executors.os, "geteuid", lambda: 4321)
    # as where user namespaces are disabled
    monkeypatch.setattr(executors, "_UNSHARE", ("false",), raising=False)
    # (An unknown --case id is a usage error of its own now: a real id, refused first.)
    code = _bench().main(["--backend", backend, "--case", "A1-001", "--no-progress"])
    assert code == 64
    err = capsys.readouterr().err
    assert "needs root" in err and "unprivileged user namespaces" in err
