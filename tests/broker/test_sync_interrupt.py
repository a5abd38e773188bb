"""A SyncBroker call interrupted by Ctrl-C (a KeyboardInterrupt raised in the calling thread)
is recorded as cancelled, never as a success, and the interrupt propagates; on the
event-loop path the call's task is cancelled too, so that it does not run on unseen."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import pytest

from runtime.backends.mock import MockBackend
from runtime.broker import SyncBroker
from runtime.catalogue import Catalogue

_ECHO = {"tool": "echo", "arguments": {"text": "hi"}}


def _completions(broker: Any) -> list[tuple[str | None, str | None]]:
    return [(r.outcome, r.error_type) for r in broker.audit.tail(100) if r.kind == "completion"]


def _broker(tmp_path: Path, catalogue: Catalogue, handler: Any) -> SyncBroker:
    """A broker whose one backend is a mock running ``handler``, audited in tmp_path."""
    return SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(handler)},
    )


def test_interrupt_on_the_sync_path_is_recorded_cancelled(
    tmp_path: Path, catalogue: Catalogue
) -> None:
    calls = 0

    def handler(request: Any) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise KeyboardInterrupt  # as a SIGINT handler raises it mid-call
        return {"ok": True}

    with _broker(tmp_path, catalogue, handler) as broker:
        assert broker.call(_ECHO).success  # starts the backend (async path)
        with pytest.raises(KeyboardInterrupt):
            broker.call(_ECHO)  # the synchronous path
        assert broker.call(_ECHO).success  # the broker lives on
        assert _completions(broker) == [
            ("success", None),
            ("cancelled", "internal_error"),
            ("success", None),
        ]
        assert broker.audit.verify().ok


@pytest.fixture
def alarm_interrupt() -> Iterator[None]:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("alarm_interrupt")
def test_interrupt_while_waiting_on_the_loop_cancels_the_call(
    tmp_path: Path, catalogue: Catalogue
) -> None:
    started = threading.Event()
    cancelled = threading.Event()

    async def handler(request: Any) -> dict[str, Any]:  # async: the call runs on the loop
        if request.arguments.get("text") != "slow":
            return {"ok": True}
        started.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return {"ok": True}

    with _broker(tmp_path, catalogue, handler) as broker:
        assert broker.call(_ECHO).success
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            broker.call({"tool": "echo", "arguments": {"text": "slow"}})
        assert started.is_set()
        assert cancelled.wait(5), "the call's task ran on after the interrupt"
        assert time.monotonic() - t0 < 10
        deadline = time.monotonic() + 5
        while len(_completions(broker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _completions(broker)[-1][0] == "cancelled"
