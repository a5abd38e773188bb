"""``Broker(on_event=async_fn)``: callbacks are called inline, so an async one only made a
coroutine nobody awaited: every event silently lost ("coroutine was never awaited"). An
async callback is now refused when it is given (TypeError naming the async iterator), before
the broker opens or makes anything; a synchronous one that returns an awaitable anyway has
it closed and is reported as a callback that raised."""

from __future__ import annotations

import functools
import gc
import logging
import warnings
from pathlib import Path
from typing import Any

import pytest

from runtime import Broker
from runtime.broker.events import Event, EventBus

CALL = {"tool": "json_parse", "arguments": {"text": "[1]"}}


async def _async_callback(event: Event) -> None:
    raise AssertionError("never called")


class _AsyncCallable:
    async def __call__(self, event: Event) -> None:
        raise AssertionError("never called")


ASYNC = {
    "async def": _async_callback,
    "async __call__": _AsyncCallable(),
    "partial of async def": functools.partial(_async_callback),
}


@pytest.mark.parametrize("kind", sorted(ASYNC))
def test_an_async_callback_is_refused_before_the_broker_opens(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    with pytest.raises(TypeError, match=r"is async: .*events\.subscribe\(\)"):
        Broker(workspace=ws, audit=tmp_path / "audit.db", on_event=ASYNC[kind])
    assert sorted(tmp_path.iterdir()) == []  # no workspace, no audit log


@pytest.mark.parametrize("kind", sorted(ASYNC))
def test_add_callback_refuses_it_too(kind: str) -> None:
    bus = EventBus()
    with pytest.raises(TypeError, match="is async"):
        bus.add_callback(ASYNC[kind])
    with pytest.raises(TypeError, match="must be callable"):
        bus.add_callback("not a function")  # type: ignore[arg-type]
    assert not bus.active


@pytest.mark.anyio
async def test_an_awaitable_returned_is_closed_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def returns_coroutine(event: Event) -> Any:
        return _async_callback(event)

    caplog.set_level(logging.ERROR, logger="runtime.events")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with Broker(
            workspace=tmp_path / "ws", audit=tmp_path / "audit.db", on_event=returns_coroutine
        ) as broker:
            broker.events.add_callback(lambda event: seen.append(event.kind))
            result = await broker.call(CALL)
        gc.collect()
    assert result.success, result.error
    assert seen == ["requested", "completed"]  # the synchronous callback got every event
    assert not [w for w in caught if "never awaited" in str(w.message)]
    reported = [r for r in caplog.records if "returned an awaitable" in str(r.exc_info)]
    assert len(reported) == 2  # one per event, as for a callback that raised
