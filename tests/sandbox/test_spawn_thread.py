"""The sandbox's processes follow their owner *process*, not the thread that spawned them.

Linux's parent-death signal fires when the thread that forked a child exits; the fork-server
(zygote) and the launcher of a long-lived sandboxed program arm it, so each is spawned from
one long-lived thread (runtime/backends/sandbox/_spawner.py). A broker made, or first called,
in a thread that then ends (a worker thread, a ``concurrent.futures`` pool, an anyio worker)
keeps working from any other thread."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
import psutil
import pytest

from runtime.backends.sandbox._prespawn import spawn_zygote
from runtime.backends.sandbox.process import SandboxedProcess, spawn_sandboxed
from runtime.broker import SyncBroker
from tests._pythonpath import ROOT, python_path

pytestmark = pytest.mark.sandbox

T = TypeVar("T")
_SHELL = {"tool": "shell_exec", "arguments": {"command": "echo hi"}}


def _in_a_thread_that_ends(fn: Callable[[], T]) -> T:
    """``fn()`` on a fresh thread; returns once the kernel has seen that thread exit (a
    parent-death signal, if armed for it, has been sent by then)."""
    out: list[T] = []
    tids: list[int] = []

    def body() -> None:
        tids.append(threading.get_native_id())
        out.append(fn())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    _wait_thread_gone(tids[0])
    return out[0]


def _wait_thread_gone(tid: int) -> None:
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/self/task/{tid}"):
        assert time.monotonic() < deadline, "the thread never exited"
        time.sleep(0.005)


def _wait_serving(pid: int) -> None:
    """Until the zygote ``pid`` is in its loop (its selector's epoll descriptor is open),
    which it enters after arming its parent-death signal: a thread that ends after this
    is the one that signal is tied to (before, the kernel would tie it to another)."""
    deadline = time.monotonic() + 30
    while True:
        links = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        if "anon_inode:[eventpoll]" in links:
            return
        assert time.monotonic() < deadline, "the zygote never started serving"
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _still_alive(pid: int, for_s: float = 0.3) -> bool:
    """Alive now and a little later (a signal sent at the thread's exit lands at once, but
    the process may take a moment to show as a zombie)."""
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return False
        time.sleep(0.02)
    return True


def _zygote_pid(sync: SyncBroker) -> int | None:
    assert sync.broker is not None
    backend = sync.broker._backends.get("subprocess")
    return backend.zygote_pid if backend is not None else None  # type: ignore[attr-defined]


def test_a_zygote_spawned_by_a_thread_outlives_it() -> None:
    def spawn() -> tuple[socket.socket, subprocess.Popen[bytes]]:
        sock, proc = spawn_zygote()
        _wait_serving(proc.pid)
        return sock, proc

    sock, proc = _in_a_thread_that_ends(spawn)
    try:
        assert _still_alive(proc.pid)
    finally:
        sock.close()
        proc.kill()
        proc.wait()


def test_a_prespawned_broker_made_in_a_thread_that_ends(workspace: Path) -> None:
    sync = SyncBroker(workspace=workspace, prespawn_sandbox=True)

    def open_() -> int:
        sync.open()
        assert sync.broker is not None and sync.broker._prespawned is not None
        parts = sync.broker._prespawned._parts
        assert parts is not None
        _wait_serving(parts[1].pid)
        return parts[1].pid

    pid = _in_a_thread_that_ends(open_)
    try:
        assert _still_alive(pid)
        result = sync.call(_SHELL)
        assert result.success, result.error
        assert _zygote_pid(sync) == pid  # adopted: not dead and replaced
    finally:
        sync.close()
    assert not _alive(pid)


def test_a_broker_made_and_first_called_in_a_pool_that_ends(workspace: Path) -> None:
    """The prespawned zygote, and the first call, in a ``concurrent.futures`` pool whose
    threads then exit; later calls from this thread run on the same zygote."""
    sync = SyncBroker(workspace=workspace, prespawn_sandbox=True)
    with ThreadPoolExecutor(max_workers=1) as pool:
        tid = pool.submit(threading.get_native_id).result()
        pool.submit(sync.open).result()
        first = pool.submit(sync.call, _SHELL).result()
    _wait_thread_gone(tid)
    try:
        assert first.success, first.error
        pid = _zygote_pid(sync)
        assert pid is not None and _still_alive(pid)
        again = sync.call(_SHELL)
        assert again.success, again.error
        assert _zygote_pid(sync) == pid
    finally:
        sync.close()


def test_a_plain_broker_first_called_in_a_thread_that_ends(workspace: Path) -> None:
    """Without pre-spawning the zygote is spawned by the first sandboxed call."""
    with SyncBroker(workspace=workspace) as sync:
        first = _in_a_thread_that_ends(lambda: sync.call(_SHELL))
        assert first.success, first.error
        pid = _zygote_pid(sync)
        assert pid is not None and _still_alive(pid)
        again = sync.call(_SHELL)
        assert again.success, again.error
        assert _zygote_pid(sync) == pid


def test_a_sandboxed_program_spawned_by_an_anyio_worker_outlives_it() -> None:
    """``spawn_sandboxed`` from an anyio worker thread, which exits when idle (or, here,
    with its event loop): the program is still there for a caller on another thread."""

    async def spawn() -> tuple[SandboxedProcess, int]:
        def body() -> tuple[SandboxedProcess, int]:
            proc = spawn_sandboxed(["/bin/cat"], env={"PATH": "/usr/bin:/bin"}, mode="best_effort")
            # Running the program: past the launcher's arming of its parent-death signal.
            _echo(proc)
            return proc, threading.get_native_id()

        return await anyio.to_thread.run_sync(body)

    proc, tid = _in_a_thread_that_ends(lambda: anyio.run(spawn))
    _wait_thread_gone(tid)
    with proc:
        _echo(proc)


def _echo(proc: SandboxedProcess) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"ping\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"ping\n"


DRIVER = Path(__file__).resolve().parent / "owner_driver.py"


@pytest.mark.parametrize("mode", ["prespawned", "plain", "early"])
def test_the_zygote_dies_with_its_sigkilled_owner(mode: str, workspace: Path) -> None:
    """SIGKILL of the owner process ends its zygote, and everything the zygote made (the
    cloner, a spare call), by the parent-death signal alone: a ``sleep`` holds the owner's
    end of the control socket open, so no EOF tells the zygote. ``early``: the owner dies
    before the zygote has booted far enough to arm that signal."""
    owner = subprocess.Popen(
        [sys.executable, str(DRIVER), mode, str(workspace)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        cwd="/",
    )
    assert owner.stdout is not None
    holder = 0
    try:
        line = owner.stdout.readline().split()
        assert line[:1] == ["ready"], line
        zygote, holder = int(line[1]), int(line[2])
        server = psutil.Process(zygote)  # before the kill: its pid may be reaped soon after
        made = server.children(recursive=True)
        owner.send_signal(signal.SIGKILL)
        owner.wait()
        _gone, alive = psutil.wait_procs([server, *made], timeout=20)
        assert [p for p in alive if p.status() != psutil.STATUS_ZOMBIE] == []
        assert _alive(holder)  # still holding the socket: the signal did it, not an EOF
    finally:
        owner.kill()
        owner.wait()
        owner.stdout.close()
        if holder:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(holder).kill()
