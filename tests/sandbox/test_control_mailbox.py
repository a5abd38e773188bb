"""The control channel's exit reports reach their waiters, threads and loop tasks alike,
whoever happens to read the socket (no zygote here: the test writes the reports)."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from anyio.from_thread import start_blocking_portal

from runtime.backends.sandbox._channels import (
    CallChannel,
    ControlChannel,
    DeadlinePassed,
    loop_waker,
    wait_fd,
)
from runtime.errors import SandboxError
from runtime.frames import encode_frame


@pytest.fixture
def pair() -> Iterator[tuple[ControlChannel, socket.socket]]:
    ours, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = ControlChannel(ours)
    yield channel, zygote
    channel.close()
    zygote.close()


def _report(zygote: socket.socket, call_id: int) -> None:
    zygote.send(encode_frame({"type": "exit", "id": call_id, "code": 0}))


def _wait_until(predicate: Any) -> None:
    end = time.monotonic() + 30
    while not predicate():
        assert time.monotonic() < end, "condition never held"
        time.sleep(0.01)


def test_threads_get_their_own_reports_in_any_order(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    channel, zygote = pair
    got: dict[int, Any] = {}

    def wait(call_id: int) -> None:
        got[call_id] = channel.wait_for_sync(call_id, time.monotonic() + 30)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(1, 9)]
    for th in threads:
        th.start()
    # One of them reads; the others follow.
    _wait_until(lambda: channel.mail.reading and len(channel.mail.following) == 7)
    for call_id in range(8, 0, -1):
        _report(zygote, call_id)
    for th in threads:
        th.join(30)
    assert {k: v["id"] for k, v in got.items()} == {i: i for i in range(1, 9)}
    assert channel.mail.inbox == {} and channel.mail.following == {}
    assert not channel.mail.reading


def test_a_follower_that_gives_up_passes_its_turn_on(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    channel, zygote = pair
    outcome: dict[str, Any] = {}

    def impatient() -> None:
        try:
            channel.wait_for_sync(1, time.monotonic() + 0.5)
        except DeadlinePassed as exc:
            outcome["impatient"] = exc

    def patient() -> None:
        outcome["patient"] = channel.wait_for_sync(2, time.monotonic() + 30)

    first = threading.Thread(target=impatient)
    first.start()
    _wait_until(lambda: channel.mail.reading)  # the impatient one leads...
    second = threading.Thread(target=patient)
    second.start()
    _wait_until(lambda: 2 in channel.mail.following)  # ...the patient one follows
    first.join(30)
    assert isinstance(outcome["impatient"], DeadlinePassed)
    # The patient one reads now, or nobody would.
    _wait_until(lambda: channel.mail.reading and not channel.mail.following)
    _report(zygote, 2)
    second.join(30)
    assert outcome["patient"]["id"] == 2


def test_a_woken_follower_that_leaves_hands_the_reading_on(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    channel, _zygote = pair
    woken: list[int] = []
    mail = channel.mail
    assert mail.take_or_lead(1, None) == (None, True)
    assert mail.take_or_lead(2, lambda: woken.append(2)) == (None, False)
    assert mail.take_or_lead(3, lambda: woken.append(3)) == (None, False)
    mail.stop_leading()
    assert woken == [2]  # 2 may read now...
    mail.unfollow(2, lambda: None)  # ...but leaves instead (cancelled, say)
    assert woken == [2, 3]
    assert mail.following == {} and not mail.reading


def test_a_thread_reader_wakes_a_waiting_task(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    ours, zygote = pair
    with start_blocking_portal() as portal:

        async def make() -> ControlChannel:
            return ControlChannel(ours.sock, loop_waker(anyio.lowlevel.current_token()))

        channel = portal.call(make)
        future = portal.start_task_soon(channel.wait_for, 1)
        _wait_until(lambda: channel.mail.reading)  # the task reads first
        got: list[Any] = []
        thread = threading.Thread(
            target=lambda: got.append(channel.wait_for_sync(2, time.monotonic() + 30))
        )
        thread.start()
        _wait_until(lambda: 2 in channel.mail.following)
        _report(zygote, 2)  # filed by the task, which wakes the thread
        thread.join(30)
        assert got[0]["id"] == 2
        # And the other way round: the thread leads, the task follows.
        second = threading.Thread(
            target=lambda: got.append(channel.wait_for_sync(3, time.monotonic() + 30))
        )
        _report(zygote, 1)
        assert future.result(30)["id"] == 1
        second.start()
        _wait_until(lambda: channel.mail.reading)
        future = portal.start_task_soon(channel.wait_for, 4)
        _wait_until(lambda: 4 in channel.mail.following)
        _report(zygote, 4)
        assert future.result(30)["id"] == 4
        _report(zygote, 3)
        second.join(30)
        assert got[1]["id"] == 3


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_loop_waker_runs_a_callback_on_the_loop_without_waiting(backend: str) -> None:
    ran: list[int] = []

    async def main() -> None:
        waker = loop_waker(anyio.lowlevel.current_token())
        done = anyio.Event()

        def from_thread() -> None:
            waker(lambda: (ran.append(threading.get_ident()), done.set()))

        thread = threading.Thread(target=from_thread)
        thread.start()
        thread.join(30)  # returned without the loop having run the callback yet
        assert ran == []
        with anyio.fail_after(30):
            await done.wait()
        assert ran == [threading.get_ident()]

    anyio.run(main, backend=backend)


def test_close_wakes_a_blocked_reader_and_closes_after_it(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    channel, _zygote = pair
    outcome: list[BaseException] = []

    def reader() -> None:
        try:
            channel.wait_for_sync(1, time.monotonic() + 60)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    _wait_until(lambda: channel.mail.reading)
    channel.close()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome[0], SandboxError)
    assert channel.sock.fileno() == -1
    with pytest.raises(SandboxError, match="gone"):
        channel.wait_for_sync(1, time.monotonic() + 1)


def test_a_passed_deadline_still_takes_what_is_already_there() -> None:
    ours, child = socket.socketpair()
    channel = CallChannel(ours, max_frame=1024)
    try:
        past = time.monotonic() - 1
        assert not wait_fd(ours.fileno(), select.POLLIN, past)
        with pytest.raises(DeadlinePassed):
            channel.receive_sync(past)
        child.send(encode_frame({"type": "result", "value": 1}))
        assert wait_fd(ours.fileno(), select.POLLIN, past)
        assert channel.receive_sync(past) == {"type": "result", "value": 1}
        child.close()
        assert channel.receive_sync(past) is None  # EOF, however late
    finally:
        channel.close()
        child.close()


@pytest.mark.anyio
async def test_a_task_waiting_on_a_closed_channel_gets_a_sandbox_error() -> None:
    ours, zygote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = ControlChannel(ours)
    try:
        channel.close()
        with pytest.raises(SandboxError, match="gone"):
            await channel.wait_for(1)
    finally:
        zygote.close()


def test_each_report_is_decoded_from_its_own_packet_only(
    pair: tuple[ControlChannel, socket.socket],
) -> None:
    # The reports share one receive buffer: a short packet after a long one must not be
    # completed from the long one's leftover bytes.
    channel, zygote = pair
    long = encode_frame({"type": "exit", "id": 1, "padding": "x" * 5000})
    zygote.send(long)
    assert channel.wait_for_sync(1, time.monotonic() + 30)["padding"] == "x" * 5000
    zygote.send(long[:100])  # a header announcing 5,000-odd bytes, 96 of them sent
    with pytest.raises(SandboxError, match="malformed"):
        channel.wait_for_sync(2, time.monotonic() + 30)
    zygote.send(b"\x00")  # shorter than a header
    with pytest.raises(SandboxError, match="malformed"):
        channel.wait_for_sync(2, time.monotonic() + 30)
    _report(zygote, 2)
    assert channel.wait_for_sync(2, time.monotonic() + 30) == {"type": "exit", "id": 2, "code": 0}


def test_a_call_frame_begun_before_the_spawn_arrives_whole() -> None:
    # The broker writes the call frame before the zygote hears of the call, as far as the
    # socket buffer takes it; the rest follows once the conversation starts.
    from runtime.frames import FrameDecoder

    ours, child = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    channel = CallChannel(ours, max_frame=1 << 20)
    big = {"type": "call", "arguments": {"text": "x" * 300_000}}
    small = {"type": "call", "arguments": {"path": "a.txt"}}
    try:
        channel.begin(big)
        assert channel._unsent  # it did not all fit: nothing blocked
        got: list[dict[str, Any]] = []
        decoder = FrameDecoder(max_size=1 << 20)

        def read() -> None:
            while not got:
                got.extend(decoder.feed(child.recv(65536)))

        reader = threading.Thread(target=read)
        reader.start()
        assert channel.flush_sync(time.monotonic() + 30)
        reader.join(30)
        assert got == [big]
        channel.begin(small)  # fits: all written at once, nothing left to flush
        assert not channel._unsent
        assert decoder.feed(child.recv(65536)) == [small]
        assert channel.flush_sync(time.monotonic() + 30)
    finally:
        channel.close()
        child.close()


def test_the_zygotes_receive_buffer_is_not_in_its_copies() -> None:
    # 1 MiB the fork-server receives into: untouched until filled, and not inherited by
    # the cloner or any call (no page tables to copy and tear down for it).
    import ctypes
    import os

    from runtime.backends.sandbox.zygote import _packet_buffer

    buffer = _packet_buffer()
    start = ctypes.addressof(ctypes.c_char.from_buffer(buffer))

    def mapped() -> bool:
        with open("/proc/self/maps") as maps:
            for line in maps:
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                if low <= start < high:
                    return True
        return False

    assert mapped()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the copy
        os._exit(0 if not mapped() else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@pytest.mark.anyio
async def test_closing_the_channel_wakes_a_task_waiting_on_the_loop() -> None:
    # The broker's close ends the backend on the loop while a cancelled call's task waits
    # for its exit report: the descriptor closed under that wait left it waiting 30 s.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = ControlChannel(ours)
    try:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:

                async def close_soon() -> None:
                    await anyio.wait_all_tasks_blocked()
                    channel.close()

                tg.start_soon(close_soon)
                with pytest.raises(SandboxError):
                    await channel.wait_for(1)
        assert channel.sock.fileno() == -1  # closed once the waiter left
    finally:
        theirs.close()
