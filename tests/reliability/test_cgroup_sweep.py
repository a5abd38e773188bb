"""A broker killed with SIGKILL leaves its zygote's cgroups behind (the zygote dies by its
parent-death signal before it can rmdir them); the next zygote sweeps them."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from runtime.backends.sandbox import SandboxBackend, probe_host
from runtime.backends.sandbox.cgroups import PREFIX, sweep


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_sweep_removes_only_groups_of_dead_zygotes(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getpid()
    for ctrl in ("memory", "pids"):
        (tmp_path / ctrl / f"{PREFIX}{dead}" / "c7").mkdir(parents=True)
        (tmp_path / ctrl / f"{PREFIX}{alive}" / "c1").mkdir(parents=True)
        (tmp_path / ctrl / "unrelated").mkdir()
    (tmp_path / "memory" / f"{PREFIX}{dead}" / "memory.limit_in_bytes").write_text("1\n")

    removed = sweep(["memory", "pids", "absent"], root=str(tmp_path))

    assert str(tmp_path / "pids" / f"{PREFIX}{dead}") in removed
    assert not (tmp_path / "pids" / f"{PREFIX}{dead}").exists()
    # A base that still holds a file is not a cgroup the kernel would empty: kept.
    assert (tmp_path / "memory" / f"{PREFIX}{dead}").exists()
    assert not (tmp_path / "memory" / f"{PREFIX}{dead}" / "c7").exists()
    for ctrl in ("memory", "pids"):
        assert (tmp_path / ctrl / f"{PREFIX}{alive}" / "c1").is_dir()
        assert (tmp_path / ctrl / "unrelated").is_dir()


@pytest.mark.sandbox
def test_a_new_zygote_sweeps_stale_cgroups() -> None:
    writable = probe_host().cgroup_writable
    if not writable:
        pytest.skip("no writable cgroup hierarchy")
    dead = _dead_pid()
    stale = [Path("/sys/fs/cgroup") / ctrl / f"{PREFIX}{dead}" for ctrl in writable]
    for base in stale:
        (base / "c1").mkdir(parents=True)

    async def main() -> None:
        backend = SandboxBackend(mode="best_effort", pool=0)
        await backend.start()
        await backend.aclose()

    try:
        anyio.run(main)
        assert [b for b in stale if b.exists()] == []
    finally:
        for base in stale:
            for d in (base / "c1", base):
                if d.exists():
                    d.rmdir()
