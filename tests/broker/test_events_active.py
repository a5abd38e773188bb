"""EventBus.active follows every change of the listeners (callbacks, subscriptions, close)."""

from __future__ import annotations

import anyio
import pytest

from runtime.broker.events import Event, EventBus


def test_active_follows_callbacks() -> None:
    bus = EventBus()
    assert not bus.active
    seen: list[Event] = []
    bus.add_callback(seen.append)
    assert bus.active
    bus.emit(Event("requested", "c1", "echo"))
    bus.remove_callback(seen.append)
    assert not bus.active
    assert [e.call_id for e in seen] == ["c1"]


@pytest.mark.anyio
async def test_active_follows_subscriptions_and_close() -> None:
    bus = EventBus()
    async with bus.subscribe() as stream:
        assert bus.active
        bus.emit(Event("completed", "c2", "echo"))
        with anyio.fail_after(5):
            assert (await stream.receive()).call_id == "c2"  # type: ignore[attr-defined]
    assert not bus.active
    async with bus.subscribe():
        assert bus.active
        bus.close()
        assert not bus.active
    assert not bus.active
