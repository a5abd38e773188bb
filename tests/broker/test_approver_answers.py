"""An approver is the embedding application's code: only ``True`` runs an ``ask`` call.
An approver that raised ended as ``internal_error`` (naming the runtime, not the approver),
and a truthy non-bool answer — the string ``"no"``, a non-empty dict — ran the call. Both
now leave the call unapproved and not run: ``approval_required`` naming the approver, with
an audit record; ``False`` and ``None`` stay refusals (``policy_denied``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.audit import AuditLog
from runtime.errors import ApprovalRequired, PolicyDenied
from runtime.models import Decision, ToolCall
from tests.broker.test_broker import MakeBroker

pytestmark = pytest.mark.anyio


def _ask_everything(call: ToolCall, spec: Any, *, profile: str | None = None) -> Decision:
    return Decision(action="ask", rule="test.ask", reasons=["needs a human"])


def _raises(call: ToolCall, decision: Decision) -> bool:
    raise RuntimeError("approval UI crashed")


async def _raises_async(call: ToolCall, decision: Decision) -> bool:
    raise RuntimeError("approval UI crashed")


@pytest.mark.parametrize("approver", [_raises, _raises_async], ids=["sync", "async"])
async def test_an_approver_that_raises_leaves_the_call_unrun(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch, approver: Any
) -> None:
    ran: list[object] = []
    async with make_broker(lambda request: ran.append(request) or {"ok": True}) as broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        broker.approver = approver
        result = await broker.call({"tool": "echo", "arguments": {"text": "x"}})
        assert result.error is not None
        assert result.error.type == "approval_required"
        assert "approver failed (RuntimeError: approval UI crashed)" in result.error.message
        assert result.error.details["reason"] == "approver_failed"
        broker.approver = lambda call, decision: True
        assert (await broker.call({"tool": "echo", "arguments": {"text": "x"}})).success
    assert len(ran) == 1  # only the approved call reached the backend


@pytest.mark.parametrize("answer", ["no", {"approve": False}, 1, [False]])
async def test_only_true_approves(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch, answer: object
) -> None:
    ran: list[object] = []
    async with make_broker(lambda request: ran.append(request) or {"ok": True}) as broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        broker.approver = lambda call, decision: answer
        result = await broker.call({"tool": "echo", "arguments": {}})
    assert not ran
    assert result.error is not None and result.error.type == "approval_required"
    assert result.error.details["reason"] == "approver_answer"
    assert "not True or False" in result.error.message


@pytest.mark.parametrize("answer", [False, None])
async def test_false_and_none_refuse(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch, answer: object
) -> None:
    async with make_broker() as broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        broker.approver = lambda call, decision: answer
        result = await broker.call({"tool": "echo", "arguments": {}})
    assert result.error is not None and result.error.type == "policy_denied"


def test_sync_broker_approver_that_raises_is_audited(tmp_path: Any) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("x")
    policy = tmp_path / "ask.toml"
    policy.write_text(
        'version = 1\ndefault = "deny"\n[sandbox]\nmode = "best_effort"\n'
        '[tools.get_env]\naction = "ask"\n'
    )
    audit = tmp_path / "audit.db"
    with SyncBroker(workspace=ws, policy=policy, audit=audit, approver=_raises) as broker:
        result = broker.call({"tool": "get_env", "arguments": {"key": "HOME"}})
        assert result.error is not None and result.error.type == "approval_required"
        assert broker.call({"tool": "get_env", "arguments": {"key": "HOME"}}).error is not None
    with AuditLog(audit) as log:
        records = log.tail(10)
        assert log.verify().ok
    assert [r.error_type for r in records if r.kind == "completion"] == ["approval_required"] * 2


def _refuses_typed(call: ToolCall, decision: Decision) -> bool:
    raise ApprovalRequired(
        "echo: the user cannot be asked here", rule=decision.rule, reason="cannot_ask"
    )


async def _refuses_typed_async(call: ToolCall, decision: Decision) -> bool:
    raise ApprovalRequired(
        "echo: the user cannot be asked here", rule=decision.rule, reason="cannot_ask"
    )


def _denies_typed(call: ToolCall, decision: Decision) -> bool:
    raise PolicyDenied("echo: refused by the user's standing rule", rule=decision.rule)


@pytest.mark.parametrize(
    ("approver", "error_type"),
    [
        (_refuses_typed, "approval_required"),
        (_refuses_typed_async, "approval_required"),
        (_denies_typed, "policy_denied"),
    ],
    ids=["approval-required", "approval-required-async", "policy-denied"],
)
async def test_an_approvers_typed_refusal_is_the_calls_error_as_raised(
    make_broker: MakeBroker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    approver: Any,
    error_type: str,
) -> None:
    """An approver's own refusal (the MCP server's "the client cannot be asked", "waiting
    for the client's approval") was wrapped as "the approver failed (ApprovalRequired:
    ...)", details.reason approver_failed, with a warning and traceback logged each call."""
    ran: list[object] = []
    async with make_broker(lambda request: ran.append(request) or {"ok": True}) as broker:
        monkeypatch.setattr(broker.policy, "decide", _ask_everything)
        broker.approver = approver
        with caplog.at_level(logging.WARNING, logger="runtime.broker"):
            result = await broker.call({"tool": "echo", "arguments": {"text": "x"}})
    assert not ran
    assert result.error is not None and result.error.type == error_type
    assert "approver failed" not in result.error.message
    assert result.error.message.startswith("echo: ")
    assert result.error.details.get("reason") != "approver_failed"
    if error_type == "approval_required":
        assert result.error.details["reason"] == "cannot_ask"
    assert not [r for r in caplog.records if "approver raised" in r.getMessage()]


def test_sync_broker_passes_an_approvers_typed_refusal_on(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = tmp_path / "ask.toml"
    policy.write_text(
        'version = 1\ndefault = "deny"\n[sandbox]\nmode = "best_effort"\n'
        '[tools.get_env]\naction = "ask"\n'
    )
    audit = tmp_path / "audit.db"
    with (
        caplog.at_level(logging.WARNING, logger="runtime.broker"),
        SyncBroker(workspace=ws, policy=policy, audit=audit, approver=_refuses_typed) as broker,
    ):
        result = broker.call({"tool": "get_env", "arguments": {"key": "HOME"}})
    assert result.error is not None and result.error.type == "approval_required"
    assert result.error.message == "echo: the user cannot be asked here"
    assert result.error.details["reason"] == "cannot_ask"
    assert not [r for r in caplog.records if "approver raised" in r.getMessage()]
    with AuditLog(audit) as log:
        records = log.tail(10)
    completion = [r for r in records if r.kind == "completion"]
    assert [(r.outcome, r.error_type) for r in completion] == [("denied", "approval_required")]
