"""Human-in-the-loop tools: ask the user, request a confirmation, have content reviewed.

They run in the broker (host backend) through ``ctx.options["ask_user"]``, a callable
``(question: str, options: list[str] | None) -> str`` the broker installs (a terminal prompt
in the CLI, a callable in the API, elicitation in MCP). Without one the call fails clearly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext

__all__ = ["ask_user", "request_confirmation", "review_with_feedback_content"]

_YES, _NO = "yes", "no"
_PASS, _EDIT = "pass", "edit"
#: Shown after the content when the call gives no ``prompt`` of its own.
_REVIEW_PROMPT = (
    "Answer 'pass' (an empty answer counts as 'pass') to accept it as it is; 'edit' on the "
    "first line followed by the whole revised text to replace it; or your feedback."
)


def _ask(ctx: ToolContext, question: str, options: list[str] | None) -> str:
    hook: Callable[[str, list[str] | None], str] | None = ctx.options.get("ask_user")
    if not callable(hook):
        raise ToolFailed("no way to ask the user in this session", reason="no_user_channel")
    try:
        answer = hook(question, options)
    except ToolFailed:
        raise
    except Exception as exc:
        # The hook is the embedding application's (a prompt, a UI): its failure is this
        # call's, not the runtime's (it was internal_error).
        raise ToolFailed(
            f"asking the user failed ({type(exc).__name__}: {exc})", reason="user_channel_failed"
        ) from exc
    if not isinstance(answer, str):
        raise ToolFailed("the user channel returned no text answer", reason="bad_answer")
    return answer


def ask_user(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    question: str = args["question"]
    options: list[str] | None = args.get("options") or None
    if options is not None and len(set(options)) != len(options):
        raise ToolFailed("options must be distinct", reason="duplicate_options")
    answer = _ask(ctx, question, options)
    if options is not None and answer not in options:
        raise ToolFailed(
            "the answer is not one of the offered options",
            reason="answer_not_an_option",
            answer=answer,
            options=options,
        )
    return {"question": question, "answer": answer}


def request_confirmation(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    message: str = args["message"]
    stage = args.get("stage_name")
    question = f"[{stage}] {message}" if stage else message
    answer = _ask(ctx, question, [_YES, _NO])
    if answer not in (_YES, _NO):
        raise ToolFailed(
            "the answer to a confirmation must be 'yes' or 'no'",
            reason="answer_not_an_option",
            answer=answer,
        )
    return {"confirmed": answer == _YES, "answer": answer}


def review_with_feedback_content(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Seed 003's HITL review: the user reads a draft and passes it, replaces it, or says
    what to change. One question per call, never a follow-up: the MCP server's
    input-required round runs the call again from the start with the one answer it got,
    so a second question in the same call would be answered with the first one's text.

    The seed told an edit from feedback by the answer's length (multi-line or over 100
    characters meant edited content), which takes a long piece of feedback for the new
    document; here an edit says so on its first line."""
    title: str = args["title"]
    content: str = args["content"]
    prompt: str = args.get("prompt") or _REVIEW_PROMPT
    answer = _ask(ctx, f"{title}\n{'-' * 40}\n{content}\n{'-' * 40}\n{prompt}", None)
    text = answer.strip()
    if text.lower() in ("", _PASS):
        return {"action": _PASS, "content": content}
    # Blank lines before the 'edit' line are dropped; what follows it is kept exactly as
    # written (its leading indentation and trailing newline are the user's text).
    first, newline, rest = answer.lstrip().partition("\n")
    if first.strip().lower() == _EDIT:
        if not newline or not rest.strip():
            raise ToolFailed(
                "the answer 'edit' must be followed by the revised text on the next lines",
                reason="empty_edit",
            )
        return {"action": _EDIT, "content": rest}
    return {"action": "feedback", "content": content, "feedback": text}
