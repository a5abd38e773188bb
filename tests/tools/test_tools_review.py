"""review_with_feedback_content, seed 003's HITL review (Cowork Forge: title, content,
prompt; the user passes, edits or gives feedback): one question through the ask_user hook,
the answer read without guessing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from runtime.errors import ToolFailed
from runtime.models import ToolSpec
from runtime.toolkit import ToolContext, builtin_tools_dir

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]

SPEC = ToolSpec.model_validate_json(
    (builtin_tools_dir() / "interaction" / "review_with_feedback_content.json").read_text()
)
DRAFT = "# Requirements Draft\n1. REQ-001: login\n"
ARGS = {"title": "Review PRD Draft", "content": DRAFT}


def _review(tool: Load, ws: Path, answer: str, **args: Any) -> tuple[dict[str, Any], list[Any]]:
    asked: list[tuple[str, list[str] | None]] = []

    def hook(question: str, options: list[str] | None) -> str:
        asked.append((question, options))
        return answer

    ctx = ToolContext(workspace=ws, options={"ask_user": hook})
    result = tool("review_with_feedback_content")(ARGS | args, ctx)
    assert SPEC.result is not None
    jsonschema_rs.validator_for(SPEC.result).validate(result)
    json.dumps(result)
    return result, asked


@pytest.mark.parametrize("answer", ["pass", " PASS \n", ""])
def test_pass_keeps_the_draft(tool: Load, ws: Path, answer: str) -> None:
    result, asked = _review(tool, ws, answer)
    assert result == {"action": "pass", "content": DRAFT}
    ((question, options),) = asked
    assert options is None  # free text: one question, never a follow-up
    assert question.startswith("Review PRD Draft\n") and DRAFT in question
    assert "'pass'" in question and "'edit'" in question  # the default prompt says how


def test_edit_returns_the_users_text(tool: Load, ws: Path) -> None:
    revised = "# Requirements\n1. REQ-001: login with SSO\n"
    result, _ = _review(tool, ws, "edit\n" + revised)
    assert result == {"action": "edit", "content": revised}


@pytest.mark.parametrize("lead", ["\n", "  \n\t\n", "\r\n  "])
def test_edit_after_blank_lines(tool: Load, ws: Path, lead: str) -> None:
    """The 'edit' line is the first non-blank one: it was found in the stripped answer but
    the content was sliced from the raw one, so after a leading blank line the 'edit' line
    itself ended up in the revised text."""
    revised = "new text\n  indented\n"
    result, _ = _review(tool, ws, lead + "edit\n" + revised)
    assert result == {"action": "edit", "content": revised}


def test_edit_line_with_crlf(tool: Load, ws: Path) -> None:
    result, _ = _review(tool, ws, "EDIT\r\nnew text\r\n")
    assert result == {"action": "edit", "content": "new text\r\n"}


def test_default_prompt_says_an_empty_answer_passes(tool: Load, ws: Path) -> None:
    """An empty answer is taken as 'pass': the user must be told so, or pressing Enter to
    skip would silently accept the draft."""
    _, asked = _review(tool, ws, "")
    ((question, _),) = asked
    assert "empty answer" in question.rsplit("-" * 40, 1)[1]


def test_edit_without_text_fails(tool: Load, ws: Path) -> None:
    for answer in ("edit", "edit\n   \n"):
        with pytest.raises(ToolFailed) as exc:
            _review(tool, ws, answer)
        assert exc.value.details["reason"] == "empty_edit"


def test_feedback_keeps_the_draft(tool: Load, ws: Path) -> None:
    result, _ = _review(tool, ws, "  drop REQ-005, PDF export is out of scope ")
    assert result == {
        "action": "feedback",
        "content": DRAFT,
        "feedback": "drop REQ-005, PDF export is out of scope",
    }


def test_long_feedback_is_not_an_edit(tool: Load, ws: Path) -> None:
    """The seed took any multi-line or 100+ character answer for edited content, so a long
    review replaced the document; only an answer that says 'edit' first is one here."""
    feedback = "The plan misses the data migration.\n" + "Please add a task for it. " * 8
    result, _ = _review(tool, ws, feedback)
    assert result["action"] == "feedback" and result["content"] == DRAFT
    assert result["feedback"] == feedback.strip()


def test_own_prompt(tool: Load, ws: Path) -> None:
    prompt = "请审查需求大纲: edit 编辑 / pass 继续 / 或直接输入修改建议"  # the seed's own
    _, asked = _review(tool, ws, "pass", prompt=prompt)
    assert asked[0][0].endswith(prompt)


def test_no_user_channel(tool: Load, ws: Path) -> None:
    with pytest.raises(ToolFailed) as exc:
        tool("review_with_feedback_content")(ARGS, ToolContext(workspace=ws))
    assert exc.value.details["reason"] == "no_user_channel"


def test_result_schema_ties_feedback_to_its_action() -> None:
    assert SPEC.result is not None
    v = jsonschema_rs.validator_for(SPEC.result)
    assert v.is_valid({"action": "feedback", "content": "c", "feedback": "f"})
    assert not v.is_valid({"action": "feedback", "content": "c"})
    assert not v.is_valid({"action": "pass", "content": "c", "feedback": "f"})
    assert not v.is_valid({"action": "reject", "content": "c"})
