"""The broker records each call's session in both of its audit records: the broker's own
(``Broker(session=...)``), a call's (``call(..., session=...)``), an MCP session's
(``audit_session``), on the async and the sync path, refused calls included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.mock import MockBackend
from runtime.broker import SyncBroker
from runtime.catalogue import Catalogue
from runtime.toolkit_env import SESSION_ENV_MAX_BYTES

pytestmark = pytest.mark.anyio

_ECHO = {"tool": "echo", "arguments": {"text": "hi"}}


def _sessions(broker: Any) -> list[tuple[str, str | None]]:
    return [(r.kind, r.session) for r in broker.audit.tail(100)]


async def test_async_calls_record_their_session(
    make_broker: Callable[..., Any], tmp_path: Path
) -> None:
    async with make_broker(lambda request: {"ok": True}, session="agent-1") as broker:
        assert (await broker.call(_ECHO)).success
        assert (await broker.call(_ECHO, session="agent-2")).success
        assert (await broker.call(_ECHO, audit_session="mcp:abc")).success
        refused = await broker.call({"tool": "echo", "arguments": {"text": 3}}, session="s3")
        assert not refused.success
        assert _sessions(broker) == [
            ("request", "agent-1"),
            ("completion", "agent-1"),
            ("request", "agent-2"),
            ("completion", "agent-2"),
            ("request", "mcp:abc"),
            ("completion", "mcp:abc"),
            ("request", "s3"),
            ("completion", "s3"),
        ]
        assert broker.audit.verify().ok


async def test_audit_session_scopes_the_environment_not_the_budgets(
    make_broker: Callable[..., Any],
) -> None:
    """An MCP session (``audit_session``) has its own session environment: the backend
    gets it as the request's session, and the policy derives the tool's environment from
    it alone. Budgets stay the broker session's (a new MCP session does not reset them)."""
    from runtime.policy import Policy

    policy = Policy.from_toml('default = "allow"\n[tools.echo]\nbudget = 2\n')
    seen: list[Any] = []

    def handler(request: Any) -> dict[str, Any]:
        seen.append(request)
        return {"session": request.session}

    async with make_broker(handler, policy=policy) as broker:
        broker.session_env("mcp:x")["WHO"] = "x"
        broker.session_env("mcp:y")["WHO"] = "y"
        result = await broker.call(_ECHO, audit_session="mcp:x")
        assert result.result == {"session": "mcp:x"}
        assert (await broker.call(_ECHO, audit_session="mcp:y")).success
        assert [r.env.get("WHO") for r in seen] == ["x", "y"]
        over = await broker.call(_ECHO, audit_session="mcp:z")  # the broker's budget: 2
        assert not over.success and over.decision == {"action": "deny", "rule": "budget.echo"}
        # A session that set nothing has no store made for it by its calls.
        assert "mcp:z" not in broker._session_env
        broker.end_session("mcp:x")
        assert "mcp:x" not in broker._session_env and "mcp:y" in broker._session_env


def test_sync_calls_record_their_session(tmp_path: Path, catalogue: Catalogue) -> None:
    with SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(lambda request: {"ok": True})},
        session="sync-1",
    ) as broker:
        broker.call(_ECHO)  # starts the backend (async path)
        broker.call(_ECHO)  # the synchronous path
        broker.call(_ECHO, session="sync-2")
        broker.call(_ECHO, audit_session="mcp:x")
        assert [s for _, s in _sessions(broker)] == (
            ["sync-1"] * 4 + ["sync-2"] * 2 + ["mcp:x"] * 2
        )
        assert broker.audit.verify().ok


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"session": 5}, TypeError),
        ({"audit_session": b"mcp"}, TypeError),
        ({"session": "s\udcff"}, ValueError),
    ],
    ids=["int", "bytes", "surrogate"],
)
def test_a_session_that_is_not_text_raises(
    tmp_path: Path, catalogue: Catalogue, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """The caller's mistake, raised before anything runs or is recorded (it was an
    internal_error result, with the session lost), on both paths."""
    with SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(lambda request: {"ok": True})},
    ) as broker:
        with pytest.raises(error, match="session must be"):
            broker.call(_ECHO, **kwargs)  # the backend not started: the async path
        broker.call(_ECHO)
        with pytest.raises(error, match="session must be"):
            broker.call(_ECHO, **kwargs)  # the synchronous path
        assert len(broker.audit.tail(100)) == 2


async def test_a_session_environment_past_its_bound_refuses_the_call(
    make_broker: Callable[..., Any],
) -> None:
    """set_env keeps a session's environment within bounds; one filled through the API
    (``Broker.session_env``) is refused at the call, typed, before the backend (every
    sandboxed call carries it in one bounded control packet), and fits again once cut."""
    ran: list[Any] = []
    async with make_broker(lambda request: ran.append(request) or {"ok": True}) as broker:
        env = broker.session_env("default")
        env["BIG"] = "x" * (SESSION_ENV_MAX_BYTES + 1)
        result = await broker.call(_ECHO)
        assert not result.success and result.error is not None
        assert result.error.type == "resource_limit"
        assert result.error.details["reason"] == "env_too_large"
        assert not ran
        env["BIG"] = "fits"
        assert (await broker.call(_ECHO)).success
        assert ran[0].env["BIG"] == "fits"
