"""A synchronous approver (a prompt at a terminal) runs in a worker thread, not on the
broker's loop: inline, one waiting for its answer stalled every other call and its timeout,
and a cancellation of its own call (SyncBroker's Ctrl-C, the CLI's SIGTERM) waited until
the question was answered. Now the waiting call can be cancelled (recorded ``cancelled``,
the approver's thread abandoned) and other calls run meanwhile."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest

from runtime.models import Decision, ToolCall
from tests.broker.test_broker import MakeBroker

pytestmark = pytest.mark.anyio


async def test_a_blocked_approver_neither_stalls_the_loop_nor_its_cancellation(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = threading.Event()
    asked = threading.Event()

    def approver(call: ToolCall, decision: Decision) -> bool:
        asked.set()
        answer.wait(30)  # a person who does not answer
        return True

    def decide(call: ToolCall, spec: Any, *, profile: str | None = None) -> Decision:
        action = "ask" if call.arguments.get("text") == "ask" else "allow"
        return Decision(action=action, rule="test")

    ran: list[str] = []
    try:
        async with make_broker(lambda r: ran.append(r.arguments["text"]) or {"ok": 1}) as broker:
            monkeypatch.setattr(broker.policy, "decide", decide)
            broker.approver = approver
            t0 = time.monotonic()
            async with anyio.create_task_group() as tg:
                tg.start_soon(broker.call, {"tool": "echo", "arguments": {"text": "ask"}})
                await anyio.to_thread.run_sync(asked.wait, 10)
                other = await broker.call({"tool": "echo", "arguments": {"text": "other"}})
                assert other.success
                tg.cancel_scope.cancel()  # the call waiting for its approver
            assert time.monotonic() - t0 < 10
            outcomes = [r.outcome for r in broker.audit.tail(10) if r.kind == "completion"]
            assert sorted(o or "" for o in outcomes) == ["cancelled", "success"]
    finally:
        answer.set()
    assert ran == ["other"]
