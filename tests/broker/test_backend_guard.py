"""The async path's wedge guard: a backend that never answers is cut off at the call's
timeout plus the grace (``core._BACKEND_GRACE_S``), on asyncio and trio, and the call is a
``timeout`` with both audit records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from runtime.backends.base import ExecRequest
from runtime.broker import core
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


@pytest.mark.anyio
async def test_a_wedged_backend_is_cut_off(make_broker: MakeBroker, short_grace: None) -> None:
    async def wedged(_: ExecRequest) -> Any:
        await anyio.sleep_forever()

    async with make_broker(wedged, policy=Policy.from_toml(_POLICY)) as broker:
        with anyio.fail_after(10):  # fails the test instead of hanging it
            result = await broker.call(_CALL)
        assert result.error is not None and result.error.type == "timeout"
        assert "did not return in time" in result.error.message
        assert broker.audit.verify().ok
