"""The spawner thread (runtime/backends/sandbox/_spawner.py): one long-lived thread per
process runs every spawn, hands back its result or exception, ends what a caller stopped
waiting for, and is started afresh in a forked child."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import Future
from typing import Any

import pytest

from runtime.backends.sandbox import _spawner
from runtime.backends.sandbox._spawner import spawn_in_owner_thread
from runtime.errors import SandboxError
from tests._forked import in_a_forked_child
from tests._pythonpath import ROOT, python_path, run_python


def _nothing(_: object) -> None:
    raise AssertionError("nothing to discard")


def test_every_spawn_runs_on_one_thread_that_outlives_its_callers() -> None:
    idents: list[int] = []

    def caller() -> None:
        idents.append(spawn_in_owner_thread(threading.get_ident, _nothing))

    for _ in range(3):
        thread = threading.Thread(target=caller)
        thread.start()
        thread.join()
    idents.append(spawn_in_owner_thread(threading.get_ident, _nothing))
    assert len(set(idents)) == 1
    assert idents[0] != threading.get_ident()
    spawner = next(t for t in threading.enumerate() if t.ident == idents[0])
    assert spawner.daemon and spawner.is_alive()


def test_a_spawn_that_fails_raises_in_the_caller() -> None:
    def fail() -> None:
        raise OSError(24, "Too many open files")

    with pytest.raises(OSError, match="Too many open files"):
        spawn_in_owner_thread(fail, _nothing)
    assert spawn_in_owner_thread(lambda: 7, _nothing) == 7  # the thread lives on


def test_the_spawner_may_spawn_itself() -> None:
    """A spawn that spawns (on the spawner thread) runs at once rather than deadlocking."""
    inner = spawn_in_owner_thread(
        lambda: spawn_in_owner_thread(threading.get_ident, _nothing), _nothing
    )
    assert inner == spawn_in_owner_thread(threading.get_ident, _nothing)


class _Interrupted(Exception):
    pass


def test_what_a_caller_stopped_waiting_for_is_discarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The waiting caller is interrupted (KeyboardInterrupt, say) while the spawn runs: the
    spawn finishes, and ``discard`` ends what it made. (The wait raises as a signal handler
    would make it: handlers run only on the main thread, which the test may not be on.)"""
    started, release = threading.Event(), threading.Event()
    discarded: list[str] = []

    class InterruptedWait(Future[Any]):
        waited = False

        def result(self, timeout: float | None = None) -> Any:
            if self.waited:  # the discarding callback's
                return super().result(timeout)
            self.waited = True
            started.wait(10)
            raise _Interrupted

    def slow() -> str:
        started.set()
        release.wait(10)
        return "process"

    monkeypatch.setattr(_spawner, "Future", InterruptedWait)
    with pytest.raises(_Interrupted):
        spawn_in_owner_thread(slow, discarded.append)
    assert discarded == []
    release.set()
    deadline = time.monotonic() + 10
    while not discarded:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert discarded == ["process"]


def test_a_spawn_not_yet_started_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted before the spawner took it up: it never runs."""
    release = threading.Event()
    ran: list[str] = []

    class InterruptedWait(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            raise _Interrupted

    busy = threading.Thread(target=spawn_in_owner_thread, args=(lambda: release.wait(10), _nothing))
    busy.start()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(_spawner, "Future", InterruptedWait)
            with pytest.raises(_Interrupted):
                spawn_in_owner_thread(lambda: ran.append("spawn"), _nothing)
    finally:
        release.set()
        busy.join()
    assert spawn_in_owner_thread(lambda: "after", _nothing) == "after"
    assert ran == []


def test_a_forked_child_starts_its_own_spawner() -> None:
    """After fork only the forking thread exists: the child's first spawn starts a new
    spawner thread (instead of queueing for one that is gone, forever)."""
    parent_spawner = spawn_in_owner_thread(threading.get_ident, _nothing)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            ident = spawn_in_owner_thread(threading.get_ident, _nothing)
            ok = ident not in (threading.get_ident(), None) and _spawner._state.ident == ident
            os.write(w, b"ok" if ok else b"bad")
        finally:
            os._exit(0)
    os.close(w)
    try:
        deadline = time.monotonic() + 20
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "the child's spawn never ran"
            time.sleep(0.01)
        assert os.read(r, 16) == b"ok"
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(r)
    assert spawn_in_owner_thread(threading.get_ident, _nothing) == parent_spawner


def test_a_caller_interrupted_just_after_queueing_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interruption lands as the job's ``put`` returns, before the wait: the job is
    queued, so it is cancelled or what it made is ended (it was left behind, unowned)."""
    jobs = _spawner._jobs()
    made: list[str] = []
    discarded: list[str] = []

    class InterruptedPut:
        def put(self, job: Any) -> None:
            jobs.put(job)
            raise _Interrupted

    def spawn() -> str:
        made.append("process")
        return "process"

    with monkeypatch.context() as patch:
        patch.setattr(_spawner, "_jobs", InterruptedPut)
        with pytest.raises(_Interrupted):
            spawn_in_owner_thread(spawn, discarded.append)
    # One thread, in order: once this has run, the job above has run or been skipped.
    assert spawn_in_owner_thread(lambda: "after", _nothing) == "after"
    assert made == discarded


def test_a_sandboxed_program_cancelled_before_its_spawn_leaves_no_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``spawn_sandboxed`` interrupted while its job waits for the spawner: the job is
    cancelled, and the launch plan (cgroups, a scratch directory) was never made, rather
    than made on the caller's thread and left behind."""
    from runtime.backends.sandbox import process

    class Plan:
        cleaned = False

        def cleanup(self) -> None:
            self.cleaned = True

    plans: list[Plan] = []

    def plan_process(*_args: object, **_kwargs: object) -> Plan:
        plans.append(Plan())
        return plans[-1]

    class InterruptedWait(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            raise _Interrupted

    release = threading.Event()
    busy = threading.Thread(target=spawn_in_owner_thread, args=(lambda: release.wait(10), _nothing))
    busy.start()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(process, "plan_process", plan_process)
            patch.setattr(_spawner, "Future", InterruptedWait)
            with pytest.raises(_Interrupted):
                process.spawn_sandboxed(["true"], env={})
    finally:
        release.set()
        busy.join()
    assert spawn_in_owner_thread(lambda: "after", _nothing) == "after"
    assert [plan for plan in plans if not plan.cleaned] == []


def test_a_signal_handler_spawning_while_its_thread_starts_the_spawner_fails_fast() -> None:
    """The handler runs on the thread that holds the lock while starting the spawner thread
    (in a fresh child: no spawner yet): it gets a typed error at once, where it waited for
    that lock for ever; the spawn underneath then runs on the one spawner thread."""

    def child() -> str:
        inner: list[str] = []

        def handler(signum: int, frame: object) -> None:
            try:
                inner.append(spawn_in_owner_thread(lambda: "inner ran", _nothing))
            except SandboxError as exc:
                inner.append(f"SandboxError {exc.details}")

        signal.signal(signal.SIGUSR1, handler)
        start = threading.Thread.start

        def start_with_a_signal(self: threading.Thread) -> None:
            signal.raise_signal(signal.SIGUSR1)  # the handler runs here, in _jobs' lock
            start(self)

        threading.Thread.start = start_with_a_signal  # type: ignore[method-assign]
        outer = spawn_in_owner_thread(lambda: "outer ran", _nothing)
        threading.Thread.start = start  # type: ignore[method-assign]
        spawners = [t for t in threading.enumerate() if t.name == "runtime-sandbox-spawner"]
        again = spawn_in_owner_thread(lambda: "again", _nothing)  # no longer starting
        return f"{inner} {outer} {len(spawners)} {again}"

    report = in_a_forked_child(child, timeout_s=20)
    assert report == "[\"SandboxError {'reason': 'reentrant'}\"] outer ran 1 again"


_AT_SHUTDOWN = """
import os, sys
from runtime.backends.sandbox._spawner import spawn_in_owner_thread
from runtime.errors import SandboxError

class AtShutdown:
    def __del__(self):
        try:
            got = spawn_in_owner_thread(lambda: "spawned", print)
        except SandboxError as exc:
            got = f"SandboxError {exc.details}"
        os.write(1, f"{sys.is_finalizing()} {got}".encode())

if STARTED:
    assert spawn_in_owner_thread(int, print) == 0  # the spawner thread runs
at_shutdown = AtShutdown()  # a global of __main__: collected as the interpreter finalizes
"""


@pytest.mark.parametrize("started", [True, False], ids=["spawner-running", "no-spawner-yet"])
def test_a_spawn_during_interpreter_shutdown_fails_fast(started: bool) -> None:
    """Once the interpreter finalizes, the (daemon) spawner thread never runs a job again,
    nor does one started then: the spawn fails at once rather than waiting for ever."""
    proc = subprocess.run(
        [sys.executable, "-c", f"STARTED = {started}\n{_AT_SHUTDOWN}"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=30,
        check=False,
    )
    assert proc.stdout == "True SandboxError {'reason': 'shutdown'}", proc.stderr
    assert proc.returncode == 0, proc.stderr


def test_a_spawn_in_an_atexit_handler_runs() -> None:
    """``atexit`` handlers run before finalization: the spawner still serves them."""
    script = (
        "import atexit, os\n"
        "from runtime.backends.sandbox._spawner import spawn_in_owner_thread\n"
        "atexit.register(lambda: os.write(1, spawn_in_owner_thread(lambda: b'ran', print)))\n"
    )
    proc = run_python(script)
    assert proc.stdout == "ran"


def test_the_idle_spawner_keeps_nothing_of_the_last_spawn() -> None:
    """What a spawn made is the caller's: once dropped it is collected, not kept alive by
    the spawner thread's frame until the next spawn (a process object left unclosed)."""

    class Made:
        pass

    made = spawn_in_owner_thread(Made, _nothing)
    gone = threading.Event()
    weakref.finalize(made, gone.set)
    del made
    gc.collect()
    assert gone.wait(5)
