"""Human-in-the-loop tools: ask the user, request a confirmation.

They run in the broker (host backend) through ``ctx.options["ask_user"]``, a callable
``(question: str, options: list[str] | None) -> str`` the broker installs (a terminal prompt
in the CLI, a callable in the API, elicitation in MCP). Without one the call fails clearly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext

__all__ = ["ask_user", "request_confirmation"]

_YES, _NO = "yes", "no"


def _ask(ctx: ToolContext, question: str, options: list[str] | None) -> str:
    hook: Callable[[str, list[str] | None], str] | None = ctx.options.get("ask_user")
    if not callable(hook):
        raise ToolFailed("no way to ask the user in this session", reason="no_user_channel")
    answer = hook(question, options)
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
