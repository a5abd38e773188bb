"""Approvals and questions for the broker's MCP server: the broker's ``approver`` and
``ask_user`` hooks, answered by eliciting the MCP client whose call is running.

Split from :mod:`runtime.mcp.server` along its one seam: the server maps the catalogue and
results to MCP; this module holds what an ``ask`` decision or an ``ask_user`` question does
on a connection, in the connection's era:

* handshake era (``initialize``, <= 2025-11-25): a server-to-client ``elicitation/create``
  request while the call waits (bounded by ``ask_timeout_s``);
* 2026-07-28 era (no server-to-client requests): the call ends with an ``InputRequiredResult``
  carrying the elicitation; the client retries with the answer and the ``requestState`` we
  minted (the server's ``RequestStateBoundary`` seals it and binds it to the tool and its
  arguments). A nonce in the state makes each answer good for one run.

The round being served is a context variable (:meth:`Approvals.serving`), not an attribute:
calls from several clients (HTTP) run concurrently, and the hooks are called from deep in
the broker.
"""

from __future__ import annotations

import contextvars
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from runtime.errors import ApprovalRequired, ToolFailed
from runtime.mcp._prompt import MAX_DECIDING, approval_text
from runtime.models import Decision, ToolCall

__all__ = ["STATE_TTL_S", "Approvals", "Round"]

#: The input keys of an approval and of an ask_user question (2026 era), and the prefix of
#: the request state we mint. The state is sealed and bound to the tool and its arguments by
#: the SDK, so it only needs to say what was asked and what was already granted, plus a
#: nonce that makes each state good for one run (a sealed state and its "yes" must not be
#: replayable to run the call again and again within the state's lifetime):
#: ``runtime-input:v2:<nonce>:<granted keys, comma-separated>:<asked key>``.
_APPROVAL_KEY = "approve"
_ASK_KEY = "answer"
_STATE_PREFIX = "runtime-input:v2"


#: Seconds a sealed request state stays valid, and so how long a used nonce is remembered.
STATE_TTL_S = 600.0


class _Nonces:
    """Nonces of answered rounds, remembered for the state's lifetime."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}

    def consume(self, nonce: str) -> bool:
        """True the first time ``nonce`` is seen (within the TTL), False after."""
        now = time.monotonic()
        if len(self._used) > 1024:
            self._used = {n: t for n, t in self._used.items() if now - t < STATE_TTL_S * 2}
        if nonce in self._used:
            return False
        self._used[nonce] = now
        return True


@dataclass(slots=True)
class Round:
    """The MCP request being served, as the approver and ask_user see it.

    Why the state carries what was granted: an ``ask``-gated tool that itself asks the user
    needs two answers, and a round carries one state. With one state of one kind, the
    round answering the question no longer carried the approval, which was asked again,
    whose round no longer carried the answer: the call never ran. A round that was
    approved mints its next state with the approval recorded in it (sealed, bound to the
    same tool and arguments, good for one run like any state)."""

    ctx: ServerRequestContext[Any, Any]
    nonces: _Nonces
    answers: dict[str, Any] = field(default_factory=dict)
    state: str | None = None
    #: (input key, request state, question) when the answer must come in a later round.
    need: tuple[str, str, types.ElicitRequest] | None = None
    #: Whether this round's call was approved (by an answer, or a grant in the state).
    approved: bool = False
    _fresh: bool | None = None  # whether the state's nonce was unused (checked once)

    def _parsed(self) -> tuple[set[str], str] | None:
        """(granted keys, asked key) of this round's state, if it is ours and unused."""
        if self.state is None:
            return None
        head = f"{_STATE_PREFIX}:"
        parts = self.state.removeprefix(head).split(":")
        if not self.state.startswith(head) or len(parts) != 3 or not parts[0]:
            return None
        if self._fresh is None:  # one nonce, consumed once for every key it carries
            self._fresh = self.nonces.consume(parts[0])
        if not self._fresh:
            return None
        return {k for k in parts[1].split(",") if k}, parts[2]

    def granted(self, key: str) -> bool:
        """Whether an earlier round of this call granted ``key`` (an approval)."""
        parsed = self._parsed()
        return parsed is not None and key in parsed[0]

    def answer(self, key: str) -> tuple[str | None, dict[str, Any]] | None:
        """The client's answer to what the last round asked, if this round carries it and
        its state was not used before."""
        parsed = self._parsed()
        if parsed is None or parsed[1] != key or key not in self.answers:
            return None
        return _answer_fields(self.answers[key])

    def ask_later(self, key: str, message: str, schema: dict[str, Any]) -> None:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        granted = _APPROVAL_KEY if self.approved else ""
        state = f"{_STATE_PREFIX}:{secrets.token_hex(16)}:{granted}:{key}"
        self.need = (key, state, request)


#: A context variable, not an attribute: calls from several clients (HTTP) run concurrently.
_current_round: contextvars.ContextVar[Round | None] = contextvars.ContextVar(
    "runtime_mcp_round", default=None
)

_APPROVE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call?",
            "description": "true runs the call once; false refuses it.",
        }
    },
    "required": ["approve"],
}


def _client_elicits(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.elicitation is not None


def _can_elicit(ctx: ServerRequestContext[Any, Any] | None) -> bool:
    """Whether we can ask the client now, with a server-to-client request."""
    return ctx is not None and ctx.session.can_send_request and _client_elicits(ctx)


def _modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _answer_fields(answer: Any) -> tuple[str | None, dict[str, Any]]:
    """(action, content) of an elicitation answer, whichever model the union parsed into."""
    if isinstance(answer, dict):
        action, content = answer.get("action"), answer.get("content")
    else:
        action, content = getattr(answer, "action", None), getattr(answer, "content", None)
    return (action if isinstance(action, str) else None), (
        content if isinstance(content, dict) else {}
    )


async def _elicit(
    ctx: ServerRequestContext[Any, Any], message: str, schema: dict[str, Any]
) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


class Approvals:
    """The broker's ``approver`` and ``ask_user`` for an MCP server: elicit the calling
    client, or refuse (approval_required / a tool error) when it cannot be asked."""

    def __init__(
        self,
        ask_timeout_s: float,
        roles: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        #: How long an approval or a question waits for the client's answer, seconds: a
        #: client that never answers must not hold a call (and its limiter slot) forever.
        self.ask_timeout_s = ask_timeout_s
        self.nonces = _Nonces()
        #: A tool's arg_roles (argument -> role): the arguments an approval shows first
        #: and whole (``runtime.mcp._prompt``).
        self.roles: Callable[[str], Mapping[str, str]] = roles or (lambda _tool: {})

    @contextmanager
    def serving(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Iterator[Round]:
        """The round of one ``tools/call``, current while the broker runs it (the hooks
        find it there)."""
        current = Round(
            ctx=ctx,
            nonces=self.nonces,
            answers=dict(params.input_responses or {}),
            state=params.request_state,
        )
        token = _current_round.set(current)
        try:
            yield current
        finally:
            _current_round.reset(token)

    # -- elicitation --------------------------------------------------------------------------
    async def approve(self, call: ToolCall, decision: Decision) -> bool:
        """The broker's approver: ask the MCP client's user, or refuse as approval_required
        (``details.reason`` says why: ``cannot_ask``, ``input_required``, ``ask_timeout``,
        ``ask_failed``, ``too_long_to_show``); the broker passes the refusal on as raised."""
        current = _current_round.get()
        reasons = "; ".join(decision.reasons) or decision.rule
        roles = self.roles(call.tool)
        try:
            message = approval_text(call.tool, reasons, call.arguments, roles)
        except (ValueError, RecursionError):  # not JSON text: nothing to show
            message = None
        if message is None:
            # Fail closed: a user must not approve a call they were not shown.
            raise ApprovalRequired(
                f"{call.tool}: the arguments that decide what the call touches "
                f"({', '.join(roles) or 'all of them'}) are too long to show for approval "
                f"(more than {MAX_DECIDING} characters); refused rather than asked about "
                "a partial view",
                rule=decision.rule,
                reasons=decision.reasons,
                reason="too_long_to_show",
            )
        if current is not None and _can_elicit(current.ctx):
            try:
                with anyio.fail_after(self.ask_timeout_s):
                    reply = await _elicit(current.ctx, message, _APPROVE_SCHEMA)
            except TimeoutError as exc:
                raise ApprovalRequired(
                    f"{call.tool}: no approval within {self.ask_timeout_s:g} s",
                    rule=decision.rule,
                    reason="ask_timeout",
                ) from exc
            except MCPError as exc:
                raise ApprovalRequired(
                    f"{call.tool}: approval could not be asked: {exc.message}",
                    rule=decision.rule,
                    reason="ask_failed",
                ) from exc
            action, content = _answer_fields(reply)
            return action == "accept" and content.get("approve") is True
        if current is not None and _modern(current.ctx) and _client_elicits(current.ctx):
            if current.granted(_APPROVAL_KEY):
                current.approved = True  # approved in an earlier round of this call
                return True
            earlier = current.answer(_APPROVAL_KEY)
            if earlier is not None:
                action, content = earlier
                current.approved = action == "accept" and content.get("approve") is True
                return current.approved
            current.ask_later(_APPROVAL_KEY, message, _APPROVE_SCHEMA)
            raise ApprovalRequired(
                f"{call.tool}: waiting for the client's approval (input required)",
                rule=decision.rule,
                reasons=decision.reasons,
                reason="input_required",
            )
        raise ApprovalRequired(
            f"{call.tool}: policy rule {decision.rule!r} asks for approval and the MCP "
            "client cannot be asked (no elicitation support on this connection)",
            rule=decision.rule,
            reasons=decision.reasons,
            reason="cannot_ask",
        )

    def ask_user(self, question: str, options: list[str] | None) -> str:
        """The broker's ask_user: runs in a worker thread; elicits on the event loop.

        In the 2026 era the question goes back to the client as an input request and the
        call is run again, from the start, with the answer: a tool that asks must ask before
        it changes anything (the built-in ask_user and request_confirmation do).
        """
        current = _current_round.get()
        answer_schema: dict[str, Any] = {"type": "string", "title": "Answer"}
        if options:
            answer_schema["enum"] = list(options)
        schema = {"type": "object", "properties": {"answer": answer_schema}, "required": ["answer"]}
        if current is not None and _can_elicit(current.ctx):
            try:
                reply = anyio.from_thread.run(self._elicit_bounded, current.ctx, question, schema)
            except TimeoutError as exc:
                raise ToolFailed(
                    f"the user did not answer within {self.ask_timeout_s:g} s"
                ) from exc
            except MCPError as exc:
                raise ToolFailed(f"asking the user failed: {exc.message}") from exc
            action, content = _answer_fields(reply)
        elif current is not None and _modern(current.ctx) and _client_elicits(current.ctx):
            answer = current.answer(_ASK_KEY)
            if answer is None:
                current.ask_later(_ASK_KEY, question, schema)
                raise ToolFailed("waiting for the user's answer (input required)")
            action, content = answer
        else:
            raise ToolFailed("the MCP client cannot be asked (no elicitation on this connection)")
        if action != "accept" or not isinstance(content.get("answer"), str):
            raise ToolFailed(f"the user did not answer ({action})")
        return str(content["answer"])

    async def _elicit_bounded(
        self, ctx: ServerRequestContext[Any, Any], message: str, schema: dict[str, Any]
    ) -> types.ElicitResult:
        with anyio.fail_after(self.ask_timeout_s):
            return await _elicit(ctx, message, schema)
