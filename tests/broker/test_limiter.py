"""The broker's concurrency limiter: never more than ``total`` holders, on both paths."""

from __future__ import annotations

import threading
import time

import anyio
import pytest

from runtime.broker.limiter import Slots


def test_sync_holders_never_exceed_total() -> None:
    slots = Slots(2)
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal peak
        for _ in range(50):
            with slots.acquire_sync():
                with lock:
                    peak = max(peak, slots.in_use)
                time.sleep(0.0005)

    threads = [threading.Thread(target=work) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert peak == 2
    assert slots.in_use == 0


def test_a_waiter_resumes_when_a_slot_frees() -> None:
    slots = Slots(1)
    got = threading.Event()

    def waiter() -> None:
        with slots.acquire_sync():
            got.set()

    with slots.acquire_sync():
        thread = threading.Thread(target=waiter)
        thread.start()
        assert not got.wait(0.05)  # blocked while the slot is held
    assert got.wait(10)
    thread.join(timeout=10)
    assert slots.in_use == 0


def test_async_and_sync_share_the_slots() -> None:
    slots = Slots(1)

    async def main() -> None:
        entered = anyio.Event()

        async def holder() -> None:
            async with slots.acquire_async():
                entered.set()
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await entered.wait()
            assert slots.in_use == 1
            with anyio.move_on_after(0.02) as scope:  # cancelled while waiting: holds nothing
                async with slots.acquire_async():
                    pytest.fail("a second holder got in")
            assert scope.cancelled_caught
        assert slots.in_use == 0
        with slots.acquire_sync():
            assert slots.in_use == 1

    anyio.run(main)
    assert slots.in_use == 0


def test_at_least_one_slot() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Slots(0)


@pytest.mark.anyio
async def test_async_waiters_take_freed_slots_and_cancelled_ones_hold_none() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    assert not slots.try_acquire()
    with anyio.move_on_after(0.02):
        await slots.wait_async()  # every slot taken: cancelled while polling
    assert slots.in_use == 1
    slots.release()
    await slots.wait_async()
    assert slots.in_use == 1
    slots.release()
    assert slots.in_use == 0
