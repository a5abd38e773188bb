"""The zygote's cgroup janitor: groups made ahead per limits, removed off the loop, and
nothing left once it is closed (real cgroup v1 groups: root with a writable hierarchy)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.backends.sandbox import cgroups, probe_host

pytestmark = pytest.mark.sandbox


@pytest.fixture
def base() -> Iterator[dict[str, str]]:
    caps = probe_host()
    if os.geteuid() != 0 or not {"memory", "pids"} <= set(caps.cgroup_writable):
        pytest.skip("needs root and writable cgroup v1 memory+pids hierarchies")
    made, errors = cgroups.bases(("memory", "pids"), f"runtime-test-janitor-{os.getpid()}")
    assert not errors
    yield made
    cgroups.remove(list(made.values()))
    assert not any(Path(path).exists() for path in made.values())


def _limits(memory_mb: int = 64, pids: int = 32) -> dict[str, int]:
    return {"memory_mb": memory_mb, "pids": pids}


def _take_when_ready(janitor: cgroups.Janitor, limits: dict[str, int]) -> list[str]:
    deadline = time.monotonic() + 30
    while True:
        groups = janitor.take(limits)
        if groups is not None:
            return groups
        assert time.monotonic() < deadline, "the janitor never made the groups"
        time.sleep(0.01)


def _children(base: dict[str, str]) -> set[str]:
    return {
        f"{ctrl}/{name}"
        for ctrl, path in base.items()
        for name in os.listdir(path)
        if os.path.isdir(f"{path}/{name}")
    }


def test_groups_are_made_ahead_with_their_limits_and_removed(base: dict[str, str]) -> None:
    janitor = cgroups.Janitor(base, None)
    try:
        assert janitor.take(_limits()) is None  # nothing ready yet: the caller makes its own
        groups = _take_when_ready(janitor, _limits())
        memory = next(p for p in groups if "/memory/" in p)
        pids = next(p for p in groups if "/pids/" in p)
        assert Path(f"{memory}/memory.limit_in_bytes").read_text().strip() == str(64 << 20)
        assert Path(f"{pids}/pids.max").read_text().strip() == "32"
        other = _take_when_ready(janitor, _limits(memory_mb=128))  # limits are the key
        assert Path(f"{next(iter(other))}/memory.limit_in_bytes").read_text().strip() == str(
            128 << 20
        )
        janitor.remove(groups)
        janitor.remove(other)
    finally:
        janitor.close()
    # Closing waited for the removals and removed the sets made ahead and never taken.
    assert _children(base) == set()


def test_ready_sets_are_bounded_and_none_leak(base: dict[str, str]) -> None:
    janitor = cgroups.Janitor(base, None)
    try:
        for memory_mb in range(64, 64 + cgroups._READY_KEYS + 4):
            janitor.take(_limits(memory_mb=memory_mb))
        janitor._jobs.join()  # each take queued one set: all made (or given up) now
        kept = {name for name in _children(base) if name.startswith("memory/")}
        assert 0 < len(kept) <= cgroups._READY_KEYS
    finally:
        janitor.close()
    assert _children(base) == set()
