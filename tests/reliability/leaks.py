"""What a broker may leave behind, read from psutil and /proc."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Snapshot:
    fds: frozenset[str]
    mounts: tuple[str, ...]
    children: frozenset[int]

    @classmethod
    def take(cls) -> Snapshot:
        fds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:  # the fd listdir itself used, closed by now
                continue
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
        kids = psutil.Process().children(recursive=True)
        return cls(
            fds=frozenset(f"{k}->{v}" for k, v in fds.items()),
            mounts=tuple(mounts),
            children=frozenset(p.pid for p in kids),
        )


def wait_no_children(before: frozenset[int], timeout_s: float = 10.0) -> set[int]:
    """Child processes of this process not present ``before``, after up to ``timeout_s``
    for them to be reaped (a poll, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while True:
        extra = {p.pid for p in psutil.Process().children(recursive=True)} - before
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)


def zygote_cgroups(zygote_pid: int) -> list[Path]:
    """The cgroup directories the zygote of that pid created (one per controller)."""
    return [
        d
        for ctrl in ("memory", "pids", "cpu", "cpuacct")
        if (d := CGROUP_ROOT / ctrl / f"runtime-sandbox-{zygote_pid}").exists()
    ]


def temp_leftovers(workspace: Path) -> list[Path]:
    """write_file's temporary files (``.NAME.PID.HEX.tmp``) anywhere in the workspace."""
    return [p for p in workspace.rglob(".*.tmp") if ".runtime" not in p.parts]
