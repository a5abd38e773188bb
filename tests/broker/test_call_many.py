"""Broker.call_many: an LLM turn's parallel tool calls (seed 001's ``executeMany``) run at
once, answered in order, each on its own; the policy's max_concurrent still holds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import SyncBroker
from runtime.backends.base import ExecRequest
from runtime.policy import Policy

pytestmark = pytest.mark.anyio

_GUARD_S = 10  # fails the test instead of hanging it; never a timing assertion


def _policy(max_concurrent: int) -> Policy:
    return Policy.from_toml(
        f"[limits]\nmax_concurrent = {max_concurrent}\n[categories]\ndata = 'allow'\n"
    )


class _Gate:
    """A handler that holds every call until ``width`` calls are inside at once: calls run
    one after another never get there (the guard fails the test)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.inside = 0
        self.most = 0
        self.full = anyio.Event()

    async def __call__(self, request: ExecRequest) -> dict[str, Any]:
        self.inside += 1
        self.most = max(self.most, self.inside)
        if self.inside >= self.width:
            self.full.set()
        try:
            with anyio.fail_after(_GUARD_S):
                await self.full.wait()
        finally:
            self.inside -= 1
        return {"echo": request.arguments.get("text")}


async def test_calls_run_at_once_in_order(make_broker: Callable[..., Any]) -> None:
    gate = _Gate(3)
    calls = [{"tool": "echo", "arguments": {"text": str(i)}, "id": f"c{i}"} for i in range(3)]
    async with make_broker(gate, policy=_policy(3)) as broker:
        results = await broker.call_many(calls)
    assert [r.result for r in results] == [{"echo": "0"}, {"echo": "1"}, {"echo": "2"}]
    assert gate.most == 3


async def test_max_concurrent_still_holds(make_broker: Callable[..., Any]) -> None:
    gate = _Gate(2)
    calls = [{"tool": "echo", "arguments": {"text": str(i)}} for i in range(5)]
    async with make_broker(gate, policy=_policy(2)) as broker:
        results = await broker.call_many(calls)
    assert all(r.success for r in results)
    assert gate.most == 2  # the three others waited for a slot


async def test_one_failure_is_its_own(make_broker: Callable[..., Any]) -> None:
    calls = [
        {"tool": "echo", "arguments": {"text": "a"}},
        {"tool": "nope", "arguments": {}},
        {"tool": "echo", "arguments": {"bogus": 1}},
        {"tool": "http_get", "arguments": {"url": "https://example.org/"}},
        {"tool": "echo", "arguments": {"text": "b"}},
    ]
    async with make_broker(policy=_policy(3)) as broker:
        results = await broker.call_many(calls)
    assert [r.error.type if r.error else None for r in results] == [
        None,
        "tool_not_found",
        "invalid_arguments",
        "policy_denied",
        None,
    ]
    assert results[0].result is not None and results[4].result is not None
    assert results[0].result["arguments"] == {"text": "a"}
    assert results[4].result["arguments"] == {"text": "b"}


async def test_empty_batch(make_broker: Callable[..., Any]) -> None:
    async with make_broker() as broker:
        assert await broker.call_many([]) == []


def test_sync_broker_openai_tool_calls(tmp_path: Path) -> None:
    """An OpenAI chat message's tool_calls, as the model sent them, through SyncBroker."""
    tool_calls = [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "base64_encode", "arguments": '{"text": "hi"}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "json_parse", "arguments": '{"text": "[1, 2]"}'},
        },
    ]
    with SyncBroker(workspace=tmp_path / "ws") as broker:
        results = broker.call_many(tool_calls)
        assert [r.call_id for r in results] == ["call_a", "call_b"]
        assert results[0].result == {"encoded": "aGk="}
        assert results[1].result == {"data": [1, 2]}
        assert broker.audit.verify().count == 4  # two records per call, chain intact


def test_sync_broker_closed() -> None:
    with pytest.raises(RuntimeError, match="not open"):
        SyncBroker().call_many([])
