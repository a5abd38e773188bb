"""Per-session budgets hold under concurrency: the broker reserves a call of the budget when
it decides, so calls in flight together (``call_many``, concurrent ``call``s, calls waiting
for an approver) cannot all pass the check before any is counted (red-team finding E6:
budget 2 and a batch of 6 ran 6). A call that never runs gives its reservation back; one
that ran counts whatever its outcome."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import SyncBroker
from runtime.backends.base import ExecRequest
from runtime.backends.mock import MockBackend
from runtime.errors import ToolFailed
from runtime.models import Decision, ToolCall, ToolResult
from runtime.policy import Policy

pytestmark = pytest.mark.anyio

MakeBroker = Callable[..., Any]
ECHO = {"tool": "echo", "arguments": {}}
_GUARD_S = 10  # fails the test instead of hanging it; never a timing assertion


def _policy(budget: int, action: str = "allow") -> Policy:
    return Policy.from_toml(
        f"[limits]\nmax_concurrent = 8\n[tools.echo]\naction = '{action}'\nbudget = {budget}\n"
    )


def _tally(results: list[ToolResult]) -> tuple[int, int]:
    ran = sum(r.success for r in results)
    over = [r for r in results if r.decision and r.decision["rule"] == "budget.echo"]
    assert all(r.error is not None and r.error.type == "policy_denied" for r in over)
    assert ran + len(over) == len(results), results
    return ran, len(over)


async def test_a_batch_runs_no_more_than_the_budget(make_broker: MakeBroker) -> None:
    async def slow(request: ExecRequest) -> dict[str, Any]:
        await anyio.sleep(0.01)
        return {}

    async with make_broker(slow, policy=_policy(2)) as broker:
        results = await broker.call_many([ECHO] * 6)
    assert _tally(results) == (2, 4)


def test_a_sync_batch_runs_no_more_than_the_budget(tmp_path: Path, catalogue: Any) -> None:
    with SyncBroker(
        workspace=tmp_path / "ws",
        policy=_policy(2),
        catalogue=catalogue,
        backends={"mock": MockBackend()},
    ) as broker:
        results = broker.call_many([ECHO] * 6)
        assert _tally(results) == (2, 4)
        assert _tally([broker.call(ECHO)]) == (0, 1)


async def test_concurrent_calls_run_no_more_than_the_budget(make_broker: MakeBroker) -> None:
    """Five calls started together, the first one starting the backend: every call was
    decided before the first was counted."""
    results: list[ToolResult] = []

    async def one(broker: Any) -> None:
        results.append(await broker.call(ECHO))

    async with make_broker(policy=_policy(1)) as broker:
        with anyio.fail_after(_GUARD_S):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one, broker)
    assert _tally(results) == (1, 4)


async def test_calls_waiting_for_the_approver_hold_the_budget(make_broker: MakeBroker) -> None:
    """An ``ask`` tool whose approver awaits: each waiting call holds its reservation, so
    the calls past the budget are refused at once, while the approver still waits."""
    release = anyio.Event()
    waiting = 0

    async def approver(call: ToolCall, decision: Decision) -> bool:
        nonlocal waiting
        waiting += 1
        await release.wait()
        return True

    results: list[ToolResult] = []
    three_refused = anyio.Event()

    async def one(broker: Any) -> None:
        results.append(await broker.call(ECHO))
        if len(results) == 3:
            three_refused.set()

    async with make_broker(policy=_policy(2, "ask"), approver=approver) as broker:
        with anyio.fail_after(_GUARD_S):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one, broker)
                await three_refused.wait()
                assert waiting == 2  # the three refused never reached the approver
                release.set()
    assert _tally(results) == (2, 3)


async def test_a_call_that_never_runs_gives_its_reservation_back(
    make_broker: MakeBroker,
) -> None:
    """Refused by the approver, or its approver failed: the budget is as before. A call
    that ran and failed counts."""
    answers = iter([False, RuntimeError("approver broke"), True, True])

    def approver(call: ToolCall, decision: Decision) -> bool:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def failing(request: ExecRequest) -> dict[str, Any]:
        raise ToolFailed("failed on purpose")

    async with make_broker(failing, policy=_policy(1, "ask"), approver=approver) as broker:
        refused = await broker.call(ECHO)
        assert refused.error is not None and refused.error.type == "policy_denied"
        assert refused.decision is not None and refused.decision["rule"] == "tools.echo"
        broke = await broker.call(ECHO)
        assert broke.error is not None and broke.error.type == "approval_required"
        ran = await broker.call(ECHO)  # approved: ran, and failed
        assert ran.error is not None and ran.error.type == "tool_error"
        over = await broker.call(ECHO)
        assert over.decision is not None and over.decision["rule"] == "budget.echo"
        assert broker._budget_used == {("default", "echo"): 1}


def test_threads_on_the_synchronous_path_run_no_more_than_the_budget(tmp_path: Path) -> None:
    """SyncBroker runs host (and wasm) calls in its callers' threads: the check and the take
    of a budget are one step there too (the red team's review: a read, then a write)."""
    import sys
    import threading

    policy = Policy.from_toml("[tools.get_env]\naction = 'allow'\nbudget = 50\n")
    results: list[ToolResult] = []
    lock = threading.Lock()
    old = sys.getswitchinterval()
    with SyncBroker(workspace=tmp_path / "ws", policy=policy) as broker:

        def worker() -> None:
            for _ in range(20):
                result = broker.call({"tool": "get_env", "arguments": {"key": "HOME"}})
                with lock:
                    results.append(result)

        sys.setswitchinterval(1e-6)  # thread switches as often as the interpreter allows
        try:
            threads = [threading.Thread(target=worker) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(_GUARD_S)
        finally:
            sys.setswitchinterval(old)
    ran = [r for r in results if r.decision and r.decision["rule"] != "budget.get_env"]
    assert len(results) == 160
    assert len(ran) == 50, [r.error for r in ran if r.error][:3]
