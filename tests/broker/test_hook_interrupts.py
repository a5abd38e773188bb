"""A hook that raises KeyboardInterrupt or SystemExit (Ctrl-C in an approver's ``input()``,
an ask_user hook calling ``sys.exit``) ends the call unrun; the exception propagates and the
call is recorded as cancelled. ``Broker.call`` caught only ``Exception`` and cancellation:
its finish step ran with no error and no outcome and recorded a ``success`` completion for
a call that never ran. Through a SyncBroker the exception stopped the portal's loop thread
too (asyncio re-raises it out of the loop): every later call, and close(), failed with
"This portal is not running"."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.broker.core import _CallState
from runtime.models import Decision, ToolCall, utcnow
from tests.broker.test_broker import MakeBroker

pytestmark = pytest.mark.anyio

_ECHO = {"tool": "echo", "arguments": {"text": "x"}}


def _ask_everything(call: ToolCall, spec: Any, *, profile: str | None = None) -> Decision:
    return Decision(action="ask", rule="test.ask", reasons=["needs a human"])


def _completions(broker: Any) -> list[tuple[str | None, str | None]]:
    return [(r.outcome, r.error_type) for r in broker.audit.tail(100) if r.kind == "completion"]


def _interrupting(exc: type[BaseException], asynchronous: bool) -> Any:
    def approver(call: ToolCall, decision: Decision) -> bool:
        raise exc

    async def approver_async(call: ToolCall, decision: Decision) -> bool:
        raise exc

    return approver_async if asynchronous else approver


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
async def test_an_interrupted_approver_is_recorded_cancelled_not_success(
    make_broker: MakeBroker,
    monkeypatch: pytest.MonkeyPatch,
    exc: type[BaseException],
    asynchronous: bool,
) -> None:
    ran: list[object] = []
    async with make_broker(lambda request: ran.append(request) or {"ok": True}) as broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        broker.approver = _interrupting(exc, asynchronous)
        with pytest.raises(exc):
            await broker.call(_ECHO)
        broker.approver = lambda call, decision: True
        assert (await broker.call(_ECHO)).success  # the broker lives on
        assert _completions(broker) == [("cancelled", "internal_error"), ("success", None)]
        assert broker.audit.verify().ok
    assert len(ran) == 1  # only the approved call ran


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_an_interrupted_approver_through_a_sync_broker(
    tmp_path: Path, catalogue: Any, monkeypatch: pytest.MonkeyPatch, exc: type[BaseException]
) -> None:
    from runtime.backends.mock import MockBackend

    ran: list[object] = []
    broker = SyncBroker(
        workspace=tmp_path / "ws",
        catalogue=catalogue,
        backends={"mock": MockBackend(lambda request: ran.append(request) or {"ok": True})},
        approver=_interrupting(exc, asynchronous=False),
    )
    with broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        with pytest.raises(exc):
            broker.call(_ECHO)  # the backend's first call: on the event loop
        with pytest.raises(exc):
            broker.call(_ECHO)  # started: the synchronous path
        broker.approver = lambda call, decision: True
        assert broker.call(_ECHO).success  # the portal's loop still runs
        assert _completions(broker) == [
            ("cancelled", "internal_error"),
            ("cancelled", "internal_error"),
            ("success", None),
        ]
    assert len(ran) == 1


def test_an_ask_user_hook_that_exits(tmp_path: Path) -> None:
    """The red team's case: the built-in ask_user tool (host backend), whose hook calls
    sys.exit(3) in a SyncBroker; close() then failed with "This portal is not running"."""

    def leave(question: str, options: list[str] | None) -> str:
        sys.exit(3)

    broker = SyncBroker(workspace=tmp_path / "ws", ask_user=leave)
    with broker:
        with pytest.raises(SystemExit) as raised:
            broker.call({"tool": "ask_user", "arguments": {"question": "ok?"}})
        assert raised.value.code == 3
        broker.ask_user = lambda question, options: "yes"
        answered = broker.call({"tool": "ask_user", "arguments": {"question": "ok?"}})
        assert answered.success, answered.error
        assert _completions(broker) == [("cancelled", "internal_error"), ("success", None)]


async def test_no_success_is_recorded_without_an_outcome(make_broker: MakeBroker) -> None:
    """The finish step's fail-safe: a call state with neither an error nor an outcome (a
    path that let an exception by unrecorded) is an internal error, never a success."""
    async with make_broker() as broker:
        st = _CallState(raw=_ECHO, started=utcnow(), t0=0.0)
        result = broker._finish(st)
        assert not result.success
        assert result.error is not None and result.error.type == "internal_error"
        assert "without an outcome" in result.error.message
        assert _completions(broker) == [("error", "internal_error")]
