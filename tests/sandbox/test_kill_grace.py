"""A call the broker ends (cancel, its timeout, the broker closing) gets SIGTERM to every
process of it, then the backend's ``grace_s``, then SIGKILL (DESIGN §3).

Hazard fixed here: pid 1 ended the namespace as soon as the tool process was reaped, and a
Python tool (shell_exec's runner) dies of the SIGTERM at once: every program it ran was
SIGKILLed within milliseconds, its SIGTERM handler cut short (a lock file left in the
workspace). Both reapers are checked: ``pid1.c`` and the Python one kept when it is not built.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from runtime.backends.sandbox import SandboxBackend, pid1
from runtime.errors import SandboxError
from tests.sandbox.helpers import SHELL, call, call_processes, run_with_backend

pytestmark = pytest.mark.sandbox

#: Takes its lock, then sleeps; on SIGTERM it takes a while to clean up, then exits.
_CLEANS_UP = """
import os, signal, sys, time
def cleanup(*_):
    time.sleep(0.3)
    os.unlink("lock")
    open("cleaned", "w").write("yes")
    sys.exit(0)
signal.signal(signal.SIGTERM, cleanup)
open("lock", "w").write("held")
time.sleep(60)
"""


@pytest.fixture(params=["pid1.c", "python"])
def reaper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The call's pid 1: the tiny reaper, or the Python one kept when it cannot be built."""
    if request.param == "python":

        def unbuilt(*_: Any) -> Path:
            raise SandboxError("no compiler (test)")

        monkeypatch.setattr(pid1, "build", unbuilt)
    yield str(request.param)


async def _cancelled_when(
    backend: SandboxBackend, workspace: Path, ready: Path, **arguments: Any
) -> float:
    """Start a SHELL call, cancel it once ``ready`` exists; seconds the cancel took (the
    backend reaps the call before it returns)."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(backend, SHELL, workspace, **arguments))
        for _ in range(400):
            if await anyio.Path(ready).exists():
                break
            await anyio.sleep(0.025)
        assert await anyio.Path(ready).exists(), "the program never started"
        started = time.monotonic()
        tg.cancel_scope.cancel()
    return time.monotonic() - started


def test_a_cancelled_calls_programs_get_the_grace(workspace: Path, reaper: str) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        assert ("pid1" in backend.load_errors) == (reaper == "python")
        assert backend.zygote_pid is not None
        zygote = psutil.Process(backend.zygote_pid)
        await _cancelled_when(
            backend, workspace, workspace / "lock", argv=["python3", "-c", _CLEANS_UP]
        )
        return call_processes(zygote.pid)

    assert run_with_backend(fn, pool=0, grace_s=3.0) == []
    assert not (workspace / "lock").exists()
    assert (workspace / "cleaned").read_text() == "yes"


def test_a_process_ignoring_sigterm_dies_at_the_end_of_the_grace(
    workspace: Path, reaper: str
) -> None:
    # Its own session too: the tool's end no longer ends the namespace, the grace does.
    # "ready" once both ignore it (a SIGTERM before would end them at once).
    command = "trap '' TERM; setsid sh -c 'trap \"\" TERM; touch ready; sleep 60' & sleep 60"

    async def fn(backend: SandboxBackend) -> Any:
        assert backend.zygote_pid is not None
        zygote = psutil.Process(backend.zygote_pid)
        took = await _cancelled_when(backend, workspace, workspace / "ready", command=command)
        return took, call_processes(zygote.pid)

    took, left = run_with_backend(fn, pool=0, grace_s=1.0)
    assert left == []
    assert 0.9 <= took < 8.0
