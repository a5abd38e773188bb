"""The seed documents' own examples (../shared/seeds/, see the checklist in tools/README.md)
through the real broker on the default policy: what their LLMs would send, and what they
get here — the result where the tool is present, the refusal where the seed's own rules
refuse it, and a clear invalid_arguments naming the parameter where our name differs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.models import ToolResult

pytestmark = [pytest.mark.sandbox]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncBroker]:
    ws = tmp_path_factory.mktemp("seeds") / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text(
        "".join(f"line {i}\n" for i in range(1, 10)) + "def handler():\n    return 1\n"
    )
    (ws / "docs").mkdir()
    (ws / "docs" / "report.pdf").write_bytes(b"%PDF-1.4\n")
    # A multiple-choice question gets its last option; a free-text one, "pass".
    with SyncBroker(workspace=ws, ask_user=lambda q, o: o[-1] if o else "pass") as b:
        yield b


def _call(broker: SyncBroker, tool: str, **arguments: Any) -> ToolResult:
    return broker.call({"tool": tool, "arguments": arguments})


def _ok(broker: SyncBroker, tool: str, **arguments: Any) -> dict[str, Any]:
    r = _call(broker, tool, **arguments)
    assert r.success, (tool, r.error)
    assert isinstance(r.result, dict)
    return r.result


def _error(broker: SyncBroker, tool: str, **arguments: Any) -> tuple[str, dict[str, Any]]:
    r = _call(broker, tool, **arguments)
    assert not r.success and r.error is not None, (tool, r.result)
    return str(r.error.type), {"message": r.error.message, **r.error.details}


# -- 000: the tools system's own tests ----------------------------------------------------


def test_000_read_file_tests(broker: SyncBroker) -> None:
    assert "content" in _ok(broker, "read_file", path="src/main.py")
    kind, info = _error(broker, "read_file", path="nonexistent.txt")
    assert (kind, info["reason"]) == ("tool_error", "not_found")
    assert "not found" in info["message"]  # the seed's expect(error).toContain("not found")
    kind, info = _error(broker, "read_file", path="/etc/passwd")
    assert (kind, info["rule"]) == ("policy_denied", "paths.absolute")


def test_000_system_and_data_tools(broker: SyncBroker) -> None:
    assert _ok(broker, "current_time", timezone="Asia/Shanghai")["timezone"] == "Asia/Shanghai"
    assert _ok(broker, "set_env", key="MODE", value="dev")["previous"] is None
    assert _ok(broker, "get_env", key="MODE")["value"] == "dev"
    assert _ok(broker, "json_stringify", data={"a": 1}, pretty=True)["text"] == '{\n  "a": 1\n}'
    assert _ok(broker, "base64_decode", encoded="aGk=")["decoded"] == "hi"
    # The seed's sleep {duration}: our parameter is `seconds`, and the error says so.
    kind, info = _error(broker, "sleep", duration=0.01)
    assert kind == "invalid_arguments" and "'duration' was unexpected" in info["message"]
    assert '"seconds" is a required property' in str(info["errors"])


# -- 001: the coding agent's tools ----------------------------------------------------------


def test_001_file_tools(broker: SyncBroker) -> None:
    r = _ok(broker, "read_file", path="src/main.py", encoding="utf8")
    assert r["content"].startswith("line 1\n")
    _ok(broker, "write_file", path="notes/todo.md", content="- a\n")
    assert (
        _ok(broker, "write_file", path="notes/todo.md", content="- b\n", mode="append")["mode"]
        == "append"
    )
    assert _ok(broker, "read_file", path="notes/todo.md")["content"] == "- a\n- b\n"
    listed = _ok(broker, "list_files", path=".", recursive=True, pattern="*.md")
    assert [f["path"] for f in listed["files"]] == ["notes/todo.md"]


def test_001_code_query(broker: SyncBroker) -> None:
    r = _ok(broker, "code_query", query="handler", type="function", path="src")
    (match,) = r["matches"]
    assert (match["file"], match["line"], match["code"]) == ("src/main.py", 10, "def handler():")


def test_001_snippets_and_ask_user(broker: SyncBroker) -> None:
    saved = _ok(
        broker,
        "snippet_save",
        name="retry",
        code="for i in range(3): ...",
        description="retry loop",
        language="python",
        tags=["loop"],
    )
    assert _ok(broker, "snippet_load", name=saved["id"])["name"] == "retry"
    assert _ok(broker, "snippet_list", tags=["loop"], language="python")["count"] == 1
    kind, info = _error(broker, "snippet_load", name="nope")
    assert (kind, info["reason"]) == ("tool_error", "not_found")
    assert _ok(broker, "ask_user", question="Colour?", options=["red", "blue"])["answer"] == "blue"


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        # 001 §3.8 ShellExecTool.validateCommand
        ("rm -rf /", "commands.deny.rm-root"),
        (":(){ :|:& };:", "commands.deny.fork-bomb"),
        ("mkfs.ext4 /dev/sda1", "commands.deny.mkfs"),
        ("dd if=/dev/zero of=/dev/sda", "commands.deny.dd-device"),
        # 004 exec DANGEROUS_PATTERNS, beyond those
        ("echo x > /dev/sda", "commands.deny.redirect-device"),
        # 003 is_blocking_service_command
        ("python3 -m http.server", "commands.service.python-http"),
        ("npm run dev", "commands.service.npm"),
        ("npm start", "commands.service.npm"),
        ("uvicorn app:app", "commands.service.asgi"),
        ("gunicorn app:app", "commands.service.asgi"),
        ("vite", "commands.service.vite"),
        ("next dev", "commands.service.js-dev"),
        ("webpack-dev-server", "commands.service.webpack-dev-server"),
    ],
)
def test_seed_command_patterns_refused(broker: SyncBroker, command: str, rule: str) -> None:
    kind, info = _error(broker, "shell_exec", command=command)
    assert (kind, info["rule"]) == ("policy_denied", rule)


def test_003_cargo_run_is_not_a_service() -> None:
    """The one pattern of 003's list we do not refuse (checklist line 83): the decision
    only, nothing runs."""
    from runtime.catalogue import Catalogue
    from runtime.models import ToolCall
    from runtime.policy import Policy

    call = ToolCall(tool="shell_exec", arguments={"command": "cargo run"})
    assert Policy.default().decide(call, Catalogue().get("shell_exec")).action == "allow"
    watch = ToolCall(tool="shell_exec", arguments={"command": "cargo watch -x run"})
    assert Policy.default().decide(watch, Catalogue().get("shell_exec")).action == "deny"


# -- 002 / 004: the Python agents' examples ----------------------------------------------------


def test_002_read_file_defaults_and_edit(broker: SyncBroker) -> None:
    r = _ok(broker, "read_file", path="src/main.py", offset=10, limit=1)
    assert r["content"] == "def handler():\n" and r["lines"] == 1
    _ok(broker, "write_file", path="e.txt", content="a a a\n")
    assert (
        _ok(broker, "edit_file", path="e.txt", old_string="a", new_string="b", replace_all=True)[
            "replacements"
        ]
        == 3
    )


def test_004_examples(broker: SyncBroker) -> None:
    found = _ok(
        broker, "file_search", path=".", pattern="*.pdf", type="file", max_depth=3, limit=20
    )
    assert [m["path"] for m in found["matches"]] == ["docs/report.pdf"]
    assert _ok(broker, "shell_exec", command="ls -la", cwd="src")["exit_code"] == 0
    # Our names differ (start_line/end_line, working_dir): the error names the parameter.
    kind, info = _error(broker, "read_file", path="src/main.py", start_line=10, end_line=20)
    assert kind == "invalid_arguments"
    assert "'start_line'" in info["message"] and "'end_line'" in info["message"]
    kind, info = _error(broker, "shell_exec", command="ls -la", working_dir="src")
    assert kind == "invalid_arguments" and "working_dir" in info["message"]
    # web_fetch's batch shape validates; the default policy has no network (DESIGN §7).
    kind, info = _error(broker, "web_fetch", urls=["https://example.com"], format="markdown")
    assert (kind, info["rule"]) == ("policy_denied", "categories.network")


def test_003_hitl(broker: SyncBroker) -> None:
    confirm = _ok(broker, "request_confirmation", stage_name="prd", message="Go on?")
    assert confirm == {"confirmed": False, "answer": "no"}  # options yes, no: the last
    review = _ok(broker, "review_with_feedback_content", title="Review PRD Draft", content="x")
    assert review == {"action": "pass", "content": "x"}
