"""Issue 8 §5: cancelling a call from the API kills its sandbox and records ``cancelled``;
closing the Broker ends every sandbox and the zygote, calls in flight included."""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from runtime.audit import AuditLog
from runtime.backends.sandbox import SandboxBackend
from runtime.broker import Broker
from runtime.catalogue import Catalogue
from runtime.models import BackendKind, ToolResult
from tests.reliability.conftest import POLICY, TOOLS
from tests.sandbox.helpers import call_processes

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(120)]

NAP = {"tool": "nap", "arguments": {"seconds": 600}}


def _broker(workspace: Path, base: Path) -> Broker:
    """pool=0: every process under the zygote then belongs to a call (no spares)."""
    policy = base / "policy.toml"
    policy.write_text(POLICY.read_text().replace("timeout_s = 2 }", "timeout_s = 600 }"))
    catalogue = Catalogue(folders=[TOOLS])
    preload = [s for s in catalogue.list() if s.backend is BackendKind.SUBPROCESS]
    return Broker(
        workspace=workspace,
        policy=policy,
        audit=base / "audit.db",
        catalogue=catalogue,
        backends={"subprocess": SandboxBackend(preload=preload, pool=0)},
    )


def _zygote(broker: Broker) -> psutil.Process:
    pid = broker._backends["subprocess"].zygote_pid  # type: ignore[attr-defined]
    assert pid is not None
    return psutil.Process(pid)


async def _wait_sandboxes(zygote: psutil.Process, calls: int) -> list[psutil.Process]:
    """The processes of ``calls`` running calls, once each call's pid 1 exists (with pool=0
    every child of the zygote is a call's pid 1; ``nap`` runs no programs, so its call is
    that one process: the tool is pid 1)."""
    with anyio.fail_after(60):
        while True:
            tree = call_processes(zygote.pid)
            if sum(1 for p in tree if p.ppid() == zygote.pid) >= calls:
                return tree
            await anyio.sleep(0.02)


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    _gone, alive = psutil.wait_procs(procs, timeout=10)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def test_cancel_scope_kills_the_sandbox_and_records_cancelled(workspace: Path, base: Path) -> None:
    async def main() -> None:
        async with _broker(workspace, base) as broker:
            warm = await broker.call({"tool": "crash", "arguments": {"how": "exit"}})
            assert warm.error is not None
            zygote = _zygote(broker)
            results: list[ToolResult] = []
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:

                    async def run() -> None:
                        results.append(await broker.call(NAP))

                    tg.start_soon(run)
                    tree = await _wait_sandboxes(zygote, 1)
                    scope.cancel()
            assert results == []  # the cancellation propagated out of broker.call
            assert _alive(tree) == []
            assert call_processes(zygote.pid) == []
            last = broker.audit.tail(2)
            assert [r.kind for r in last] == ["request", "completion"]
            assert last[1].tool == "nap" and last[1].outcome == "cancelled"
            assert broker.audit.interrupted() == []
            # The backend serves on after a cancelled call.
            ok = await broker.call({"tool": "read_file", "arguments": {"path": "data.txt"}})
            assert ok.success, ok.error

    anyio.run(main)


def test_closing_the_broker_ends_every_sandbox_and_the_zygote(workspace: Path, base: Path) -> None:
    results: list[ToolResult] = []

    async def main() -> None:
        # Children of this process from earlier tests of the same worker (a server fixture
        # still exiting) are not this broker's: only what appeared since must be gone.
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        broker = _broker(workspace, base)
        async with broker, anyio.create_task_group() as tg:

            async def run() -> None:
                results.append(await broker.call(NAP))

            warm = await broker.call({"tool": "crash", "arguments": {"how": "exit"}})
            assert warm.error is not None
            zygote = _zygote(broker)
            for _ in range(4):
                tg.start_soon(run)
            tree = await _wait_sandboxes(zygote, 4)
            with anyio.fail_after(30):
                await broker.aclose()
            assert _alive([zygote, *tree]) == []
            left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
            assert left == []

    anyio.run(main)
    assert len(results) == 4
    assert all(not r.success and r.error is not None for r in results), results
    assert {r.error.type for r in results if r.error} == {"sandbox_error"}
    # Every call in flight was recorded as finished before the log closed.
    with AuditLog(base / "audit.db") as log:
        assert log.verify().ok
        assert log.interrupted() == []
