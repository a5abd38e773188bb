"""The async path's wedge guard (runtime/broker/_inline.py): a backend that never answers
is cut off at the call's timeout plus the grace, on asyncio and trio; a backend whose runs
finish without suspending runs without the guard once learned, and the first of its calls
that suspends after all still answers, and puts the guard back for the calls after it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from runtime.backends.base import ExecRequest
from runtime.broker import _inline, core
from runtime.policy import Policy

MakeBroker = Callable[..., Any]

_POLICY = "[limits]\ntimeout_s = 0.2\n[categories]\ndata = 'allow'\n"
_CALL = {"tool": "echo", "arguments": {"text": "x"}}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "_BACKEND_GRACE_S", 0.05)


class _Handler:
    """Answers at once (no suspension) until ``wedge`` or ``suspend`` is set."""

    def __init__(self) -> None:
        self.wedge = False
        self.suspend = False

    def __call__(self, request: ExecRequest) -> Any:
        if self.wedge:
            return self._forever()
        if self.suspend:
            return self._later(request)
        return {"echo": request.arguments["text"]}

    async def _forever(self) -> Any:
        await anyio.sleep_forever()

    async def _later(self, request: ExecRequest) -> Any:
        await anyio.lowlevel.checkpoint()
        return {"echo": request.arguments["text"], "later": True}


@pytest.mark.anyio
async def test_a_wedged_backend_is_cut_off(make_broker: MakeBroker, short_grace: None) -> None:
    async def wedged(_: ExecRequest) -> Any:
        await anyio.sleep_forever()

    async with make_broker(wedged, policy=Policy.from_toml(_POLICY)) as broker:
        with anyio.fail_after(10):  # fails the test instead of hanging it
            result = await broker.call(_CALL)
        assert result.error is not None and result.error.type == "timeout"
        assert "did not return in time" in result.error.message
        assert not broker._runs.inline("mock")
        assert broker.audit.verify().ok


@pytest.mark.anyio
async def test_learned_inline_then_suspends_then_guarded_again(
    make_broker: MakeBroker, short_grace: None
) -> None:
    handler = _Handler()
    async with make_broker(handler, policy=Policy.from_toml(_POLICY)) as broker:
        for _ in range(_inline.LEARN):
            assert not broker._runs.inline("mock")
            assert (await broker.call(_CALL)).result == {"echo": "x"}
        assert broker._runs.inline("mock")
        assert (await broker.call(_CALL)).result == {"echo": "x"}  # without the guard
        handler.suspend = True
        result = await broker.call(_CALL)  # suspends: finished by hand, answered
        assert result.result == {"echo": "x", "later": True}
        assert not broker._runs.inline("mock")
        handler.suspend, handler.wedge = False, True
        with anyio.fail_after(10):
            result = await broker.call(_CALL)
        assert result.error is not None and result.error.type == "timeout"
        handler.wedge = False
        for _ in range(_inline.LEARN + 1):  # suspended once: never inline again
            assert (await broker.call(_CALL)).success
        assert not broker._runs.inline("mock")
        assert broker.audit.verify().ok


@pytest.mark.anyio
async def test_an_inline_backend_is_cancelled_while_it_suspends(make_broker: MakeBroker) -> None:
    """Cancellation reaches a learned-inline backend that suspends after all (the
    coroutine finished by hand passes the cancellation down) and is recorded."""
    handler = _Handler()
    async with make_broker(handler) as broker:
        for _ in range(_inline.LEARN):
            await broker.call(_CALL)
        assert broker._runs.inline("mock")
        handler.wedge = True
        with anyio.move_on_after(0.1) as scope:
            await broker.call({**_CALL, "call_id": "c-cancel"})
        assert scope.cancelled_caught
        last = broker.audit.tail(1)[0]
        assert (last.call_id, last.kind, last.outcome) == ("c-cancel", "completion", "cancelled")
        assert broker.audit.verify().ok


@pytest.mark.anyio
async def test_errors_of_the_first_step_and_after_it_are_the_backends(
    make_broker: MakeBroker,
) -> None:
    from runtime.errors import ToolFailed

    state = {"later": False}

    async def failing(_: ExecRequest) -> Any:
        if state["later"]:
            await anyio.lowlevel.checkpoint()
        raise ToolFailed("nope")

    async with make_broker(failing) as broker:
        for _ in range(_inline.LEARN + 1):
            result = await broker.call(_CALL)
            assert result.error is not None and result.error.type == "tool_error"
        state["later"] = True
        result = await broker.call(_CALL)
        assert result.error is not None and result.error.type == "tool_error"
