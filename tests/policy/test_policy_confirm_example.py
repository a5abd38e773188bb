"""policy/examples/confirm_dangerous.toml: seed 001's ``dangerous`` flag (file_write and
shell_exec need the user's confirmation) as a policy — every tool whose manifest is
destructive asks; nothing else does."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import SyncBroker
from runtime.catalogue import Catalogue
from runtime.models import Decision, ToolCall
from runtime.policy import Policy

POLICY = Path(__file__).resolve().parents[2] / "policy" / "examples" / "confirm_dangerous.toml"

ARGS = {
    "write_file": {"path": "a.txt", "content": "x"},
    "edit_file": {"path": "a.txt", "old_string": "x", "new_string": "y"},
    "delete_file": {"path": "a.txt"},
    "move_file": {"source": "a.txt", "destination": "b.txt"},
    "shell_exec": {"command": "ls"},
    "set_env": {"key": "A", "value": "b"},
    "snippet_save": {"name": "s", "code": "x"},
    "snippet_delete": {"name": "s"},
    "memory_write": {"key": "k", "content": "c"},
    "memory_delete": {"key": "k"},
    "http_post": {"url": "https://example.com/"},
    "http_request": {"method": "DELETE", "url": "https://example.com/"},
}


def test_every_destructive_tool_asks() -> None:
    policy = Policy.load(POLICY)
    catalogue = Catalogue()
    destructive = {s.name for s in catalogue.list() if s.hints.destructive}
    assert set(ARGS) == destructive  # a new destructive tool must be added to the policy
    for name in sorted(destructive):
        d = policy.decide(ToolCall(tool=name, arguments=ARGS[name]), catalogue.get(name))
        # The network tools stay denied: the network is (the default policy's rule).
        want = "deny" if name.startswith("http_") else "ask"
        assert d.action == want, (name, d.rule)


def test_the_rest_does_not_ask() -> None:
    policy = Policy.load(POLICY)
    catalogue = Catalogue()
    calls = {
        "read_file": {"path": "a.txt"},
        "list_files": {},
        "code_query": {"query": "main"},
        "json_parse": {"text": "{}"},
        "memory_read": {"key": "k"},
    }
    for name, args in calls.items():
        d = policy.decide(ToolCall(tool=name, arguments=args), catalogue.get(name))
        assert d.action == "allow", (name, d.rule)


@pytest.mark.sandbox
def test_through_the_broker(tmp_path: Path) -> None:
    asked: list[str] = []

    def approver(call: ToolCall, decision: Decision) -> bool:
        asked.append(call.tool)
        return call.tool == "write_file"

    ws = tmp_path / "ws"
    with SyncBroker(workspace=ws, policy=POLICY, approver=approver) as broker:
        w = broker.call({"tool": "write_file", "arguments": {"path": "a.txt", "content": "x"}})
        assert w.success, w.error
        s = broker.call({"tool": "shell_exec", "arguments": {"command": "ls"}})
        assert not s.success and s.error is not None and s.error.type == "policy_denied"
        r = broker.call({"tool": "read_file", "arguments": {"path": "a.txt"}})
        assert r.success and r.result is not None and r.result["content"] == "x"
    assert asked == ["write_file", "shell_exec"]
    with SyncBroker(workspace=ws, policy=POLICY) as broker:  # nobody to ask
        w = broker.call({"tool": "write_file", "arguments": {"path": "b.txt", "content": "x"}})
        assert w.error is not None and w.error.type == "approval_required"
    assert not (ws / "b.txt").exists()


def test_its_comment_says_what_approve_does() -> None:
    """``runtime exec --approve`` approves unattended (README, DESIGN §7); the comment said
    it "asks on the terminal", and a reader running it unattended got the opposite."""
    comment = " ".join(
        line.lstrip("# ") for line in POLICY.read_text().splitlines() if line.startswith("#")
    )
    assert "--approve` asks" not in comment
    assert "`runtime exec --approve` approves unattended" in comment
