"""The baselines' harness guard and the network: a connection beyond loopback is stopped and
scored as made, except inside a sandbox under test with no route there, where the kernel
refuses it on its own (bwrap's empty network namespace lost 7 E cases to the guard)."""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.security import baselines

ROOT = Path(__file__).resolve().parents[2]


def _ctx(tmp_path: Path, sandboxed: bool) -> baselines.Ctx:
    req: dict[str, Any] = {
        "mode": "none",
        "workspace": str(tmp_path),
        "case_root": str(tmp_path),
        "timeout_s": 5.0,
        "state_file": str(tmp_path / "state.json"),
        "sandboxed": sandboxed,
    }
    return baselines.Ctx(req)


@pytest.mark.parametrize("sandboxed", [False, True])
def test_a_routable_address_beyond_loopback_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandboxed: bool
) -> None:
    monkeypatch.setattr(baselines, "_routable", lambda addr: True)
    ctx = _ctx(tmp_path, sandboxed)
    with pytest.raises(baselines.Blocked):
        baselines._guard_url(ctx, "http://169.254.169.254/latest")
    assert ctx.blocked == ["connect:169.254.169.254"]


def test_an_unroutable_address_is_left_to_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(baselines, "_routable", lambda addr: False)
    inside, outside = _ctx(tmp_path, True), _ctx(tmp_path, False)
    baselines._guard_url(inside, "http://169.254.169.254/latest")  # not stopped
    assert inside.blocked == []
    with pytest.raises(baselines.Blocked):  # a baseline without a sandbox: stopped as before
        baselines._guard_url(outside, "http://169.254.169.254/latest")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare is not installed")
def test_no_route_in_an_empty_network_namespace() -> None:
    code = (
        "import ipaddress, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from benchmarks.security.baselines import _routable\n"
        "print(_routable(ipaddress.ip_address('169.254.169.254')),"
        " _routable(ipaddress.ip_address('64:ff9b::7f00:1')))\n"
    )
    out = subprocess.run(
        ["unshare", "-rn", sys.executable, "-c", code], capture_output=True, text=True
    )
    if out.returncode != 0 and "unshare" in out.stderr:
        pytest.skip(f"no user and network namespace here: {out.stderr.strip()}")
    assert out.stdout.split() == ["False", "False"], out.stderr
    assert isinstance(baselines._routable(ipaddress.ip_address("127.0.0.1")), bool)
