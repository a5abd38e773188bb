"""One copy of the zygote per call: a Python tool that runs no programs is its call's pid 1.

The kernel protects a pid namespace's init: it drops the signals the init has no handler
for, from inside the namespace (kill of itself, raise, abort) and from an ancestor (the
zygote's timeout SIGTERM); SIGKILL only gets through from outside. ``sigexit.c`` and
``pid1.self_kill_filter`` make such a tool end on a fatal signal as any process would,
reported as pid1.c reports a killed tool (exit 128 + n).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.backends.sandbox import SandboxBackend, _linux, child, pid1
from runtime.errors import SandboxError, ToolTimeout
from tests.sandbox.helpers import (
    PROBE_EXEC,
    PROBE_RW,
    bare_config,
    call,
    call_processes,
    run_with_backend,
)

pytestmark = pytest.mark.sandbox


def _cfg(**changes: Any) -> child.ChildConfig:
    return bare_config(**{"host_uid": 1000, "host_gid": 1000, **changes})


def _plan(exec_: bool) -> child.CallPlan:
    return child.CallPlan(
        call_id="c", workspace=None, access="none", exec=exec_, limits={}, env={}, masks={}
    )


def test_which_calls_are_one_process() -> None:
    def installer() -> int:
        return 0

    with_handler = _cfg(sigexit=installer)
    assert child.single_process(with_handler, _plan(exec_=False))
    # A tool that runs programs keeps the reaper (a shell's jobs and their orphans).
    assert not child.single_process(with_handler, _plan(exec_=True))
    # Without sigexit a pid-1 tool could not die of a signal: keep the reaper...
    assert not child.single_process(_cfg(), _plan(exec_=False))
    # ...unless it is not an init at all (test-only: no pid namespace).
    assert child.single_process(_cfg(disable=frozenset({"pidns"})), _plan(exec_=False))


def _ends(action: Callable[[], None]) -> tuple[int | None, int | None]:
    """Run ``action`` in a forked child behind sigexit and the self-kill filter:
    (exit code, killing signal)."""
    install = pid1.load_sigexit(str(pid1.build()))
    program = pid1.self_kill_filter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            # Its own process group: should the filter fail, kill(0, ...) hits only us.
            os.setsid()
            _linux.prctl(38, 1)  # no_new_privs, needed for an unprivileged filter
            if install() != 0:
                os._exit(90)
            _linux.seccomp_load_bpf(program)
            action()
            os._exit(91)
        finally:
            os._exit(92)
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status), None
    return None, os.WTERMSIG(status)


def test_sigexit_turns_each_fatal_signal_into_its_exit_status() -> None:
    for sig in (signal.SIGTERM, signal.SIGSEGV, signal.SIGABRT, signal.SIGXCPU, signal.SIGUSR1):
        assert _ends(lambda s=sig: os.kill(os.getpid(), s)) == (128 + sig, None)
    # A real fault too (not only a sent signal): the handler ends the process, no loop.
    assert _ends(lambda: os.abort()) == (128 + signal.SIGABRT, None)


def test_the_self_kill_filter_traps_a_sigkill_of_pid_1_or_the_group() -> None:
    # Here (not an init) pid 1 is the host's init: the trap ends us before anything is sent.
    assert _ends(lambda: os.kill(1, signal.SIGKILL)) == (128 + signal.SIGKILL, None)
    assert _ends(lambda: os.kill(0, signal.SIGKILL)) == (128 + signal.SIGKILL, None)
    # A SIGKILL of our own pid (not 1 here) is the kernel's, as for any process.
    assert _ends(lambda: os.kill(os.getpid(), signal.SIGKILL)) == (None, signal.SIGKILL)

    def kill_a_child() -> None:
        pid = os.fork()
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os._exit(7 if os.WTERMSIG(status) == signal.SIGKILL else 8)

    assert _ends(kill_a_child) == (7, None)  # other processes are signalled as before


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGSEGV])
def test_a_pid_1_tool_dies_of_a_signal_it_sends_itself(workspace: Path, sig: int) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        assert "sigexit" not in backend.load_errors
        ident = await call(backend, PROBE_RW, workspace, action="identity")
        with pytest.raises(SandboxError, match=f"signal {int(sig)}"):
            await call(backend, PROBE_RW, workspace, action="signal", signal=int(sig))
        return ident.result["pid"]

    assert run_with_backend(fn) == 1


def test_a_pid_1_tool_ignoring_sigterm_is_killed_at_the_end_of_the_grace(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        assert backend.zygote_pid is not None
        zygote = psutil.Process(backend.zygote_pid)
        with pytest.raises(ToolTimeout):
            await call(
                backend,
                PROBE_RW,
                workspace,
                action="ignore_term_and_sleep",
                seconds=60,
                limits={"timeout_s": 0.5},
            )
        # pool=0: nothing of the call may be left once run() returned.
        return call_processes(zygote.pid)

    assert run_with_backend(fn, pool=0) == []


def test_a_pid_1_tool_that_forks_leaves_nothing_behind(workspace: Path) -> None:
    # Its orphans are its own children; its exit, being pid 1's, ends them all.
    async def fn(backend: SandboxBackend) -> Any:
        assert backend.zygote_pid is not None
        zygote = psutil.Process(backend.zygote_pid)
        res = await call(
            backend,
            PROBE_RW,
            workspace,
            action="setsid_survivor",
            marker="/workspace/late.txt",
            delay=0.5,
        )
        return res.result, call_processes(zygote.pid)

    res, left = run_with_backend(fn, pool=0)
    assert res == {"ok": True}
    assert left == []
    time.sleep(1.0)
    assert not (workspace / "late.txt").exists()


def test_tools_that_run_programs_keep_the_reaper(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        return (await call(backend, PROBE_EXEC, workspace, action="pids")).result

    assert run_with_backend(fn) == {"pids": [1, 2]}


def test_sigexit_is_not_confused_with_a_library_loaded_through_proc_self_fd() -> None:
    # dlopen hands back an already loaded library of the same *name*: a library another
    # loader opened as /proc/self/fd/N (the wasm native helper does) must not stand in for
    # sigexit when sigexit's memfd gets the same number N. In a forked child: the name
    # stays taken for the life of the process, and this one runs the other tests.
    path = str(pid1.build())
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            import _json  # any shared object without sigexit's symbol

            fd = os.open(str(_json.__file__), os.O_RDONLY | os.O_CLOEXEC)
            ctypes.CDLL(f"/proc/self/fd/{fd}")
            os.close(fd)
            probe = os.open("/dev/null", os.O_RDONLY)  # the next number: the memfd's
            os.close(probe)
            if probe != fd:
                code = 2  # precondition failed: the names would not collide
            else:
                pid1.load_sigexit(path)
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
