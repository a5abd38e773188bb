"""A closed broker refuses calls with a result that says so, and starts nothing; a broker
is entered once.

Before: a call of a backend not yet started, made after ``aclose``, started that backend (for
the sandbox, a fork-server and its cloner) and then failed on the closed audit log; nothing
ever ended the backend it started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.backends.mock import MockBackend

pytestmark = pytest.mark.anyio

MakeBroker = Callable[..., Any]


class _Counting(MockBackend):
    def __init__(self) -> None:
        super().__init__(lambda r: {"ok": True})
        self.starts = 0

    async def start(self) -> None:
        self.starts += 1
        await super().start()


async def test_call_after_aclose_starts_no_backend(make_broker: MakeBroker) -> None:
    backend = _Counting()
    broker = make_broker(backend=backend)
    async with broker:
        pass
    result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
    assert result.error is not None and result.error.type == "internal_error"
    assert "closed" in result.error.message
    assert backend.starts == 0
    await broker.aclose()  # still a no-op


async def test_call_after_aclose_of_a_started_backend(make_broker: MakeBroker) -> None:
    backend = _Counting()
    broker = make_broker(backend=backend)
    async with broker:
        assert (await broker.call({"tool": "echo", "arguments": {"text": "a"}})).success
    result = await broker.call({"tool": "echo", "arguments": {"text": "b"}})
    assert result.error is not None and result.error.type == "internal_error"
    assert "closed" in result.error.message
    assert len(backend.requests) == 1  # the second call did not run


async def test_a_closed_broker_cannot_be_entered_again(make_broker: MakeBroker) -> None:
    # `async with broker:` a second time succeeded, and every call in it was then an
    # internal_error ("the broker is closed"): its backends and audit log are gone.
    backend = _Counting()
    broker = make_broker(backend=backend)
    async with broker:
        assert (await broker.call({"tool": "echo", "arguments": {"text": "hi"}})).success
    with pytest.raises(RuntimeError, match=r"is closed .* make a new Broker"):
        async with broker:
            pytest.fail("entered a closed broker")
    with pytest.raises(RuntimeError, match="cannot be opened again"):
        await broker.__aenter__()
    assert backend.starts == 1


async def test_an_open_broker_cannot_be_entered_again(make_broker: MakeBroker) -> None:
    # A second `async with broker:` was accepted, and the end of the inner block closed
    # the broker under the outer one: its next call was internal_error "the broker is
    # closed". The second enter also replaced the start lock of the backends.
    backend = _Counting()
    broker = make_broker(backend=backend)
    async with broker:
        lock = broker._start_lock
        with pytest.raises(RuntimeError, match=r"already open: enter it once"):
            async with broker:
                pytest.fail("entered an open broker")
        assert broker._start_lock is lock
        assert (await broker.call({"tool": "echo", "arguments": {"text": "hi"}})).success
    assert backend.starts == 1


async def test_a_failed_enter_leaves_the_broker_unopened(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An enter that fails has not opened the broker: the next one is not "already open".
    from runtime.broker import core

    def fail() -> None:
        raise OSError("no accelerator")

    broker = make_broker(backend=_Counting())
    with monkeypatch.context() as patch:
        patch.setattr(core._speedups, "module", fail)
        with pytest.raises(OSError, match="no accelerator"):
            await broker.__aenter__()
    async with broker:
        assert (await broker.call({"tool": "echo", "arguments": {"text": "hi"}})).success
