from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.base import ExecRequest
from runtime.backends.mock import MockBackend
from runtime.broker import Event
from runtime.errors import AuditError, ResourceLimitExceeded, ToolFailed
from runtime.models import Decision, ToolCall

pytestmark = pytest.mark.anyio

MakeBroker = Callable[..., Any]


async def test_success_result_json(make_broker: MakeBroker) -> None:
    async with make_broker(lambda r: {"echo": r.arguments["text"]}) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}, "call_id": "c1"})
    assert result.success
    assert result.result == {"echo": "hi"}
    assert result.error is None
    assert result.call_id == "c1"
    assert result.backend == "mock"
    assert result.decision is not None and result.decision["action"] == "allow"
    data = result.to_json_dict()
    for key in (
        "call_id",
        "tool",
        "success",
        "result",
        "error",
        "started_at",
        "completed_at",
        "duration_ms",
        "backend",
        "usage",
        "decision",
    ):
        assert key in data
    assert set(data["decision"]) == {"action", "rule"}


@pytest.mark.parametrize(
    ("call", "etype"),
    [
        ({"tool": "nope", "arguments": {}}, "tool_not_found"),
        ({"tool": "echo", "arguments": {"text": 3}}, "invalid_arguments"),
        ({"tool": "echo", "arguments": {"extra": "x"}}, "invalid_arguments"),
        ({"weird": True}, "invalid_arguments"),
        ('{"tool": "echo", "arguments": ', "invalid_arguments"),
        ({"tool": "http_get", "arguments": {"url": "http://127.0.0.1/"}}, "policy_denied"),
    ],
)
async def test_errors_are_results(make_broker: MakeBroker, call: Any, etype: str) -> None:
    backend = MockBackend()
    async with make_broker(backend=backend) as broker:
        result = await broker.call(call)
        assert not result.success
        assert result.error is not None and result.error.type == etype
        assert result.error.message
        assert backend.requests == []  # nothing ran
        # every call is audited, refused ones too, and the chain verifies
        assert broker.audit.verify().ok
        assert [r.kind for r in broker.audit.tail(2)] == ["request", "completion"]


async def test_tool_errors_map_to_types(make_broker: MakeBroker) -> None:
    def handler(req: ExecRequest) -> Any:
        if req.arguments.get("text") == "fail":
            raise ToolFailed("it broke")
        if req.arguments.get("text") == "mem":
            raise ResourceLimitExceeded("out of memory", usage={"max_rss_kb": 999})
        if req.arguments.get("text") == "bug":
            raise KeyError("oops")
        return {"big": "x" * 2_000_000}

    async with make_broker(handler) as broker:
        r1 = await broker.call({"tool": "echo", "arguments": {"text": "fail"}})
        r2 = await broker.call({"tool": "echo", "arguments": {"text": "mem"}})
        r3 = await broker.call({"tool": "echo", "arguments": {"text": "bug"}})
        r4 = await broker.call({"tool": "echo", "arguments": {"text": "big"}})
        assert broker.audit.verify().ok
    assert r1.error and r1.error.type == "tool_error" and r1.error.message == "it broke"
    assert r2.error and r2.error.type == "resource_limit" and r2.usage.max_rss_kb == 999
    assert r3.error and r3.error.type == "internal_error"
    assert r4.error and r4.error.type == "output_too_large"
    assert r4.error.details["preview"].startswith('{"big"')


async def test_result_schema_checked(make_broker: MakeBroker) -> None:
    async with make_broker(lambda r: ["not", "an", "object"]) as broker:
        result = await broker.call({"tool": "echo", "arguments": {}})
    assert result.error and result.error.type == "tool_error"
    assert "schema" in result.error.message


async def test_ask_without_approver_then_with(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ask_everything(call: ToolCall, spec: Any, *, profile: str | None = None) -> Decision:
        return Decision(action="ask", rule="test.ask", reasons=["needs a human"])

    seen: list[str] = []

    async def approver(call: ToolCall, decision: Decision) -> bool:
        seen.append(decision.rule)
        return call.arguments.get("text") == "yes"

    async with make_broker() as broker:
        monkeypatch.setattr(broker.policy, "decide", ask_everything)
        r = await broker.call({"tool": "echo", "arguments": {"text": "yes"}})
        assert r.error and r.error.type == "approval_required"
        broker.approver = approver
        assert (await broker.call({"tool": "echo", "arguments": {"text": "yes"}})).success
        r = await broker.call({"tool": "echo", "arguments": {"text": "no"}})
        assert r.error and r.error.type == "policy_denied"
    assert seen == ["test.ask", "test.ask"]


async def test_events_callback_and_stream(make_broker: MakeBroker) -> None:
    got: list[Event] = []
    async with make_broker(on_event=got.append) as broker, broker.subscribe() as stream:
        await broker.call({"tool": "echo", "arguments": {}})
        await broker.call({"tool": "http_get", "arguments": {"url": "http://x/"}})
        await broker.call({"tool": "nope", "arguments": {}})
        kinds = []
        async for ev in stream:
            kinds.append(ev.kind)
            if len(kinds) == 6:
                break
    assert kinds == ["requested", "completed", "requested", "denied", "requested", "failed"]
    assert [e.kind for e in got] == kinds


async def test_event_callback_errors_do_not_break_calls(make_broker: MakeBroker) -> None:
    def bad(_: Event) -> None:
        raise RuntimeError("callback bug")

    async with make_broker(on_event=bad) as broker:
        assert (await broker.call({"tool": "echo", "arguments": {}})).success


async def test_concurrency_limiter(make_broker: MakeBroker) -> None:
    running = 0
    peak = 0

    async def handler(_: ExecRequest) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return {}

    async with make_broker(handler) as broker:
        limit = broker.policy.max_concurrent
        async with anyio.create_task_group() as tg:
            for _ in range(limit * 4):
                tg.start_soon(broker.call, {"tool": "echo", "arguments": {}})
    assert peak == limit


async def test_cancellation_recorded_and_propagated(make_broker: MakeBroker) -> None:
    async def slow(_: ExecRequest) -> Any:
        await anyio.sleep(30)

    async with make_broker(slow) as broker:
        with anyio.move_on_after(0.1) as scope:
            await broker.call({"tool": "echo", "arguments": {}, "call_id": "c-cancel"})
        assert scope.cancelled_caught
        last = broker.audit.tail(1)[0]
        assert (last.call_id, last.kind, last.outcome) == ("c-cancel", "completion", "cancelled")
        assert broker.audit.verify().ok


async def test_audit_failure_fails_closed(make_broker: MakeBroker) -> None:
    backend = MockBackend()
    async with make_broker(backend=backend) as broker:
        assert (await broker.call({"tool": "echo", "arguments": {}})).success

        def broken(**_: Any) -> None:
            raise AuditError("disk full")

        broker.audit.record_request = broken
        result = await broker.call({"tool": "echo", "arguments": {}})
    assert result.error is not None and result.error.type == "internal_error"
    assert result.error.details.get("fail_closed") is True
    assert "disk full" in result.error.message
    assert len(backend.requests) == 1  # the second call never ran


async def test_budget_per_session(make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    async with make_broker() as broker:
        monkeypatch.setattr(broker.policy, "budget", lambda tool: 2 if tool == "echo" else None)
        for _ in range(2):
            assert (await broker.call({"tool": "echo", "arguments": {}})).success
        r = await broker.call({"tool": "echo", "arguments": {}})
        assert r.error and r.error.type == "policy_denied" and r.decision
        assert r.decision["rule"] == "budget.echo"
        assert (await broker.call({"tool": "echo", "arguments": {}}, session="other")).success


async def test_redaction_in_audit(make_broker: MakeBroker) -> None:
    async with make_broker() as broker:
        await broker.call({"tool": "echo", "arguments": {"token": "s3cr3t-value"}})
        request = broker.audit.tail(2)[0]
    assert "s3cr3t-value" not in str(request.arguments)


async def test_stats_recorded(make_broker: MakeBroker) -> None:
    async with make_broker() as broker:
        await broker.call({"tool": "echo", "arguments": {}})
        await broker.call({"tool": "echo", "arguments": {"text": 1}})
        stats = broker.catalogue.stats()["calls"]["echo"]
    assert stats["count"] == 2 and stats["failures"] == 1


def test_sync_broker(tmp_path: Path, catalogue: Any) -> None:
    from runtime.broker import SyncBroker

    with SyncBroker(
        workspace=tmp_path / "ws", catalogue=catalogue, backends={"mock": MockBackend()}
    ) as broker:
        result = broker.call({"type": "tool_use", "id": "t1", "name": "echo", "input": {}})
        assert result.success and result.call_id == "t1"
        assert broker.catalogue is catalogue
    with pytest.raises(RuntimeError, match="not open"):
        broker.call({"tool": "echo"})


async def test_an_empty_catalogue_is_kept(tmp_path: Path) -> None:
    from runtime.broker import Broker
    from runtime.catalogue import Catalogue

    empty = Catalogue(builtins=False)
    async with Broker(workspace=tmp_path / "ws", catalogue=empty) as broker:
        assert broker.catalogue is empty
        result = await broker.call({"tool": "read_file", "arguments": {"path": "x"}})
    assert result.error is not None and result.error.type == "tool_not_found"


async def test_closing_the_broker_under_a_call_says_so(make_broker: MakeBroker) -> None:
    """A call whose backend is ended by aclose() gets sandbox_error (the DESIGN §7 type) with
    reason broker_closed, and its completion record says cancelled."""
    from runtime.errors import SandboxError

    started, closed = anyio.Event(), anyio.Event()

    class Closing(MockBackend):
        async def aclose(self) -> None:
            await super().aclose()
            closed.set()

    async def handler(_request: ExecRequest) -> Any:
        started.set()
        await closed.wait()
        raise SandboxError("the sandbox was killed", exit_code=-9)

    backend = Closing(handler)
    results = []
    broker = make_broker(backend=backend)
    async with broker, anyio.create_task_group() as tg:

        async def run() -> None:
            results.append(await broker.call({"tool": "echo", "arguments": {}}))

        tg.start_soon(run)
        await started.wait()
        await broker.aclose()
    (result,) = results
    assert result.error is not None and result.error.type == "sandbox_error"
    assert result.error.details["reason"] == "broker_closed"
    assert result.error.details["exit_code"] == -9
    assert "closed while the call ran" in result.error.message
    from runtime.audit import AuditLog

    with AuditLog(broker.audit.path) as log:
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]
        assert log.interrupted() == [] and log.verify().ok


async def test_a_sandbox_error_of_an_open_broker_is_unchanged(make_broker: MakeBroker) -> None:
    from runtime.errors import SandboxError

    def handler(_request: ExecRequest) -> Any:
        raise SandboxError("the sandbox broke", exit_code=1)

    async with make_broker(handler) as broker:
        result = await broker.call({"tool": "echo", "arguments": {}})
        assert result.error is not None and result.error.type == "sandbox_error"
        assert result.error.message == "the sandbox broke"
        assert "reason" not in result.error.details
        assert broker.audit.tail(1)[0].outcome == "error"


async def test_opening_decides_the_accelerator_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building the audit encoder's C accelerator takes a second or two the first time: the
    broker decides it in a worker thread when it opens, so no call blocks the loop on it."""
    import threading

    from runtime import _speedups
    from runtime.broker import Broker

    real, threads = _speedups.module, []

    def recording() -> Any:
        threads.append(threading.current_thread())
        return real()

    monkeypatch.setattr(_speedups, "module", recording)
    loop_thread = threading.current_thread()
    async with Broker(workspace=tmp_path / "ws"):
        pass
    assert threads and threads[0] is not loop_thread
