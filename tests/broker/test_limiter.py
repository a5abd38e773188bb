"""The broker's concurrency limiter: never more than ``total`` holders, on both paths."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator
from contextlib import nullcontext
from typing import Any

import anyio
import pytest

from runtime.broker.limiter import Slots, queue_scope
from runtime.errors import ResourceLimitExceeded


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


# -- queued waiters: woken, not polling; FIFO; keys in turn; bounded -------------------------


class _Resumes:
    """Awaits a coroutine and counts how often the event loop resumes it: a waiter that polls
    is resumed at every poll, one that sleeps until it is handed a slot only once more."""

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.steps = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        gen = self.coro.__await__()
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            self.steps += 1
            try:
                yielded = gen.throw(thrown) if thrown is not None else gen.send(sent)
            except StopIteration as stop:
                return stop.value
            try:
                sent, thrown = (yield yielded), None
            except BaseException as exc:  # handed on to the coroutine
                sent, thrown = None, exc


@pytest.mark.anyio
async def test_a_blocked_async_waiter_is_not_resumed_until_a_slot_is_handed_to_it() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    waiting = _Resumes(slots.wait_async())
    got = anyio.Event()

    async def waiter() -> None:
        await waiting
        got.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert waiting.steps == 1
        # The loop runs on (other tasks, timers) while the slot stays taken: a polling
        # waiter (every 2 ms) would be resumed again and again here.
        for _ in range(20):
            await anyio.sleep(0.005)
        assert waiting.steps == 1
        assert slots.waiting == 1
        slots.release()  # handed over: in_use stays 1
        await got.wait()
    assert waiting.steps == 2
    assert slots.in_use == 1 and slots.waiting == 0
    slots.release()
    assert slots.in_use == 0


async def _queue_in_order(
    slots: Slots, tg: Any, order: list[str], names: list[tuple[str, Any]]
) -> None:
    """Start one waiter per (name, key) in that order; each records its name when served
    and releases at once. Returns when all wait."""

    async def one(name: str, key: Any) -> None:
        with queue_scope(key, None) if key is not None else nullcontext():
            await slots.wait_async()
        order.append(name)
        slots.release()

    for name, key in names:
        tg.start_soon(one, name, key)
        await anyio.wait_all_tasks_blocked()  # queued before the next one starts


@pytest.mark.anyio
async def test_async_waiters_are_served_first_come_first_served() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    order: list[str] = []
    async with anyio.create_task_group() as tg:
        await _queue_in_order(slots, tg, order, [(str(i), None) for i in range(6)])
        assert slots.waiting == 6
        assert not slots.try_acquire()  # a newcomer does not overtake the queue
        slots.release()
    assert order == [str(i) for i in range(6)]
    assert slots.in_use == 0


@pytest.mark.anyio
async def test_queue_keys_are_served_in_turn() -> None:
    """Session b's one call waits for one call of a, not for all of a's queue."""
    slots = Slots(1)
    assert slots.try_acquire()
    order: list[str] = []
    names = [(f"a{i}", "a") for i in range(5)] + [("b0", "b"), ("b1", "b"), ("c0", "c")]
    async with anyio.create_task_group() as tg:
        await _queue_in_order(slots, tg, order, names)
        slots.release()
    assert order == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]
    assert slots.in_use == 0 and slots.waiting == 0


@pytest.mark.anyio
async def test_a_key_past_its_bound_fails_at_once_and_others_still_queue() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    served: list[str] = []

    async def one(key: str) -> None:
        with queue_scope(key, 2):
            await slots.wait_async()
        served.append(key)
        slots.release()

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(one, "a")
        await anyio.wait_all_tasks_blocked()
        with queue_scope("a", 2), pytest.raises(ResourceLimitExceeded) as caught:
            await slots.wait_async()
        assert caught.value.error_type == "resource_limit"
        assert caught.value.details["limit"] == "max_queued"
        assert caught.value.details["queued"] == 2
        tg.start_soon(one, "b")  # another key has its own bound
        await anyio.wait_all_tasks_blocked()
        assert slots.waiting == 3
        with queue_scope("a", 0), pytest.raises(ResourceLimitExceeded):
            slots.wait_sync()  # the sync path has the same bound
        slots.release()
    assert sorted(served) == ["a", "a", "b"]
    assert slots.in_use == 0


@pytest.mark.anyio
async def test_all_keys_together_past_the_total_bound_fail_at_once() -> None:
    """Many keys (sessions), each under its own bound, cannot queue without end."""
    slots = Slots(1)
    assert slots.try_acquire()
    served: list[str] = []

    async def one(key: str, total: int | None = 3) -> None:
        with queue_scope(key, 2, total):
            await slots.wait_async()
        served.append(key)
        slots.release()

    async with anyio.create_task_group() as tg:
        for key in ("a", "b", "c"):
            tg.start_soon(one, key)
        await anyio.wait_all_tasks_blocked()
        assert slots.waiting == 3
        with queue_scope("d", 2, 3), pytest.raises(ResourceLimitExceeded) as caught:
            await slots.wait_async()
        assert caught.value.error_type == "resource_limit"
        assert caught.value.details["limit"] == "max_queued_total"
        assert caught.value.details["queued"] == 3
        with queue_scope("d", 2, 3), pytest.raises(ResourceLimitExceeded):
            slots.wait_sync()  # the sync path has the same bound
        tg.start_soon(one, "d", None)  # without a total bound the same call waits
        await anyio.wait_all_tasks_blocked()
        assert slots.waiting == 4
        slots.release()
    assert sorted(served) == ["a", "b", "c", "d"]
    assert slots.in_use == 0 and slots.waiting == 0


@pytest.mark.anyio
async def test_a_key_that_filled_the_total_bound_makes_room_for_another() -> None:
    """One key's calls fill max_queued_total: a call of a key with nothing queued is not
    refused; the newest call of the long queue is, in its place (red team: one client
    locked every other session out)."""
    slots = Slots(1)
    assert slots.try_acquire()
    served: list[str] = []
    refused: list[str] = []

    async def one(key: str, label: str) -> None:
        try:
            with queue_scope(key, 8, 3):
                await slots.wait_async()
        except ResourceLimitExceeded as exc:
            assert exc.details["limit"] == "max_queued_total"
            refused.append(label)
            return
        served.append(label)
        slots.release()

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(one, "hog", f"hog{i}")
            await anyio.wait_all_tasks_blocked()
        assert slots.waiting == 3
        tg.start_soon(one, "victim", "victim")
        await anyio.wait_all_tasks_blocked()
        assert refused == ["hog2"]  # the newest of the long queue
        assert slots.waiting == 3
        # Queues of 2 and 1 now: the victim's second call is refused itself.
        with queue_scope("victim", 8, 3), pytest.raises(ResourceLimitExceeded):
            slots.wait_sync()
        slots.release()
    assert served == ["hog0", "victim", "hog1"]
    assert slots.in_use == 0 and slots.waiting == 0


@pytest.mark.anyio
async def test_a_waiter_cancelled_as_it_is_handed_a_slot_passes_it_on() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    second = anyio.Event()

    async def first() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await slots.wait_async()
            try:  # (anyio lets a woken task take its slot; the cancellation comes next)
                await anyio.sleep_forever()
            finally:
                slots.release()

    async def then() -> None:
        await slots.wait_async()
        second.set()

    scopes: list[anyio.CancelScope] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.wait_all_tasks_blocked()
        tg.start_soon(then)
        await anyio.wait_all_tasks_blocked()
        slots.release()  # handed to first, which has not run yet ...
        scopes[0].cancel()  # ... and is cancelled before it does
        await second.wait()
    assert slots.in_use == 1 and slots.waiting == 0
    slots.release()
    assert slots.in_use == 0


@pytest.mark.anyio
async def test_a_release_in_another_thread_wakes_an_async_waiter() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    got = anyio.Event()

    async def waiter() -> None:
        await slots.wait_async()
        got.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        await anyio.to_thread.run_sync(slots.release)
        await got.wait()
    assert slots.in_use == 1
    slots.release()


def test_sync_waiters_are_served_first_come_first_served() -> None:
    slots = Slots(1)
    assert slots.try_acquire()
    order: list[int] = []

    def one(i: int) -> None:
        with slots.acquire_sync():
            order.append(i)

    threads = []
    for i in range(5):
        thread = threading.Thread(target=one, args=(i,))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 60  # a hang guard, not a speed check
        while slots.waiting < i + 1:  # queued before the next one starts
            assert time.monotonic() < deadline
            time.sleep(0.001)
    slots.release()
    for thread in threads:
        thread.join(timeout=60)
    assert order == list(range(5))
    assert slots.in_use == 0 and slots.waiting == 0
