"""Every approver the ``Approver`` type allows gets the same verdict on every path. An
object whose ``__call__`` is ``async def`` (``inspect.iscoroutinefunction`` says False for
it), or a synchronous callable that returns a coroutine, was called in the calling thread
on SyncBroker's synchronous path and its coroutine taken for the answer: the first call
(on the loop: its backend was not started yet) was approved, every later one refused
(``approval_required``, "answered coroutine"), the coroutine never awaited. Now the first
kind is routed to the loop before anything happens, and the second's awaitable is awaited
on the loop."""

from __future__ import annotations

import functools
import gc
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from runtime import Broker, SyncBroker
from runtime.models import Decision, ToolCall

CALL = {"tool": "json_parse", "arguments": {"text": "[1]"}}


class _AsyncCallable:
    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.threads: list[str] = []

    async def __call__(self, call: ToolCall, decision: Decision) -> bool:
        self.threads.append(threading.current_thread().name)
        return self.answer


async def _answer(answer: bool, call: ToolCall, decision: Decision) -> bool:
    return answer


def _returns_coroutine(answer: bool) -> Any:
    return lambda call, decision: _answer(answer, call, decision)


MAKERS = {
    "async __call__": _AsyncCallable,
    "sync returning a coroutine": _returns_coroutine,
    "partial of async def": lambda answer: functools.partial(_answer, answer),
}


def _policy(tmp_path: Path) -> Path:
    policy = tmp_path / "ask.toml"
    policy.write_text('version = 1\ndefault = "deny"\n[tools.json_parse]\naction = "ask"\n')
    return policy


@pytest.mark.parametrize("answer", [True, False])
@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_every_call_of_a_sync_broker_gets_the_approvers_verdict(
    tmp_path: Path, kind: str, answer: bool
) -> None:
    approver = MAKERS[kind](answer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with SyncBroker(
            workspace=tmp_path / "ws",
            policy=_policy(tmp_path),
            audit=tmp_path / "audit.db",
            approver=approver,
        ) as broker:
            results = [broker.call(CALL) for _ in range(3)]
        gc.collect()
    if answer:
        assert [r.success for r in results] == [True] * 3, [r.error for r in results]
    else:
        assert [r.error and r.error.type for r in results] == ["policy_denied"] * 3
    assert not [w for w in caught if "never awaited" in str(w.message)]
    if isinstance(approver, _AsyncCallable):
        # awaited on the loop, never called in the calling thread
        assert threading.current_thread().name not in approver.threads


@pytest.mark.anyio
@pytest.mark.parametrize("kind", sorted(MAKERS))
async def test_the_async_broker_gives_the_same_verdicts(tmp_path: Path, kind: str) -> None:
    async with Broker(
        workspace=tmp_path / "ws", policy=_policy(tmp_path), audit=tmp_path / "audit.db"
    ) as broker:
        for answer in (True, False, True):
            broker.approver = MAKERS[kind](answer)
            result = await broker.call(CALL)
            assert result.success is answer, result.error
