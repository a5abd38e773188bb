"""The approver and the ask_user hook may be set after the broker opened, on a SyncBroker
too. ``sync.approver = f`` set an attribute of the wrapper that nothing read (reads were
forwarded to the broker, writes were not), and the host tools kept the ask_user hook the
broker had when its host backend started."""

from __future__ import annotations

from pathlib import Path

from runtime import SyncBroker
from runtime.models import Decision, ToolCall


def _policy(tmp_path: Path) -> Path:
    policy = tmp_path / "ask.toml"
    policy.write_text(
        'version = 1\ndefault = "deny"\n[sandbox]\nmode = "best_effort"\n'
        '[categories]\ninteraction = "allow"\n[tools.get_env]\naction = "ask"\n'
    )
    return policy


def test_approver_set_on_a_sync_broker_is_the_brokers(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    call = {"tool": "get_env", "arguments": {"key": "HOME"}}
    with SyncBroker(workspace=ws, policy=_policy(tmp_path)) as broker:
        first = broker.call(call)
        assert first.error is not None and first.error.type == "approval_required"

        def yes(call: ToolCall, decision: Decision) -> bool:
            return True

        broker.approver = yes
        assert broker.call(call).success
        assert broker.broker is not None and broker.broker.approver is yes


def test_ask_user_set_after_the_host_backend_started(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    call = {"tool": "ask_user", "arguments": {"question": "Colour?"}}
    with SyncBroker(workspace=ws, policy=_policy(tmp_path)) as broker:
        first = broker.call(call)  # starts the host backend without a hook
        assert first.error is not None
        assert first.error.details["reason"] == "no_user_channel"
        broker.ask_user = lambda question, options: "blue"
        second = broker.call(call)
        assert second.success, second.error
        assert second.result["answer"] == "blue"


def test_a_hook_set_before_open_is_used(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    broker = SyncBroker(workspace=ws, policy=_policy(tmp_path))
    broker.ask_user = lambda question, options: "green"
    with broker:
        result = broker.call({"tool": "ask_user", "arguments": {"question": "Colour?"}})
    assert result.success and result.result["answer"] == "green"
