"""The per-call child never runs the zygote's code: found by the load tests.

A kill from the zygote (timeout, cancel, bad frame) can land just after C reaped its init;
Python then ran C's handler, ``os.kill`` raised ESRCH out of ``run_call`` and the forked copy
went on in the zygote's loop and its shutdown, which SIGKILLs every call in its copied table
— other calls of the same sandbox uid.
"""

from __future__ import annotations

import os
import signal
import socket

import pytest

from runtime.backends.sandbox import _setup, child, zygote
from tests.sandbox.helpers import bare_config


def test_forwarding_handler_tolerates_a_reaped_target() -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    # The pid is reaped: kill() fails with ESRCH; the handler must swallow exactly that.
    _setup.forward(pid, signal.SIGTERM)(signal.SIGTERM, None)


def test_an_exception_escaping_run_call_ends_the_forked_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(child, "run_call", broken)
    ours, theirs = socket.socketpair()
    z = zygote.Zygote(ours)
    z.cfg = bare_config()
    plan = child.CallPlan(
        call_id="c1", workspace=None, access="none", exec=False, limits={"pids": 8}
    )
    me = os.getpid()
    try:
        pid, cgroups = z._fork_child(plan, None, "t1", theirs.fileno())
    finally:
        if os.getpid() != me:  # the bug: the forked copy came back here
            os._exit(99)
    _, status = os.waitpid(pid, 0)
    ours.close()
    theirs.close()
    assert cgroups == []
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == child.EXIT_SETUP
