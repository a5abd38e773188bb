"""Issue 8 §1: 1,000 calls at concurrency 64 — reads, writes, wasm, 100 timeouts, 100 crashes.

Every call gets a typed result of the expected kind, the audit log holds two records a call
and verifies, and once the broker is closed nothing is left: no child process, no fd, no
mount, no temporary file, no cgroup directory.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.broker import Broker
from runtime.models import ToolResult
from tests.reliability.conftest import POLICY, TOOLS
from tests.reliability.leaks import Snapshot, temp_leftovers, wait_no_children, zygote_cgroups

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.timeout(300)]

CONCURRENCY = 64
CRASHES = ("sigkill", "exit", "segv", "abort")


def _mix() -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    calls += [("read", {"tool": "read_file", "arguments": {"path": "data.txt"}})] * 300
    calls += [
        (
            "write",
            {"tool": "write_file", "arguments": {"path": f"out/{i % 50}.txt", "content": "w"}},
        )
        for i in range(250)
    ]
    calls += [("wasm", {"tool": "json_parse", "arguments": {"text": '{"a": [1, 2]}'}})] * 250
    calls += [("timeout", {"tool": "nap", "arguments": {"seconds": 60}})] * 100
    calls += [
        ("crash", {"tool": "crash", "arguments": {"how": CRASHES[i % 4]}}) for i in range(100)
    ]
    random.Random(8).shuffle(calls)
    return calls


EXPECTED = {
    "read": (True, None),
    "write": (True, None),
    "wasm": (True, None),
    "timeout": (False, "timeout"),
    "crash": (False, "sandbox_error"),
}


def test_thousand_calls_at_concurrency_64_leave_nothing_behind(
    workspace: Path, private_tmp: Path, base: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    calls = _mix()
    assert len(calls) == 1000
    before = Snapshot.take()
    results: list[tuple[str, ToolResult]] = []
    zygote: dict[str, int | None] = {}

    async def main() -> None:
        async with Broker(
            workspace=workspace,
            policy=POLICY,
            audit=base / "audit.db",
            tool_folders=[TOOLS],
        ) as broker:
            limiter = anyio.Semaphore(CONCURRENCY)

            async def one(kind: str, call: dict[str, Any]) -> None:
                async with limiter:
                    results.append((kind, await broker.call(call)))

            async with anyio.create_task_group() as tg:
                for kind, call in calls:
                    tg.start_soon(one, kind, call)
            zygote["pid"] = broker._backends["subprocess"].zygote_pid  # type: ignore[attr-defined]
            report = broker.audit.verify()
            assert report.ok, report
            assert report.count == 2 * len(calls)
            assert broker.audit.interrupted() == []

    anyio.run(main)

    assert len(results) == len(calls)
    wrong = Counter(
        (kind, r.error.type if r.error else None, (r.error.message[:80] if r.error else ""))
        for kind, r in results
        if (r.success, r.error.type if r.error else None) != EXPECTED[kind]
    )
    assert not wrong, wrong
    crashes = Counter(
        str(r.error.details.get("signal") or r.error.details.get("exit_code"))
        for kind, r in results
        if kind == "crash" and r.error
    )
    assert crashes == {"9": 25, "3": 25, "11": 25, "6": 25}, crashes

    assert wait_no_children(before.children) == set()
    after = Snapshot.take()
    assert after.fds - before.fds == set()
    assert after.mounts == before.mounts
    assert zygote["pid"] is not None and zygote_cgroups(zygote["pid"]) == []
    assert list(private_tmp.iterdir()) == []
    assert temp_leftovers(workspace) == []
    # The zygote and its children write to our stderr: a traceback there is a process that
    # left its code path (it was a forked child unwinding into the zygote's loop).
    assert "Traceback" not in capfd.readouterr().err
