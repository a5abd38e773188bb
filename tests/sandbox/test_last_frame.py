"""A call's last frame (its result, its error) is its outcome, whenever its processes exit.

Red-team finding Q5: a write_file whose result frame had arrived, the file written, was
reported as ``timeout`` when the exit report came after the deadline, and a retried append
then wrote its data twice; a tool that sent its result and then slept held the call until
its timeout. Now a call is a timeout only when no last frame came by its deadline, and
after a last frame its processes have ``_EXIT_AFTER_FRAME_S`` to exit before they are
ended (at the deadline at the latest, as before). Both drivers: ``run`` on the event loop,
``run_sync`` in the calling thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from runtime.backends.base import ExecOutcome, ExecRequest
from runtime.backends.sandbox import SandboxBackend
from runtime.backends.sandbox import backend as sandbox_backend
from runtime.backends.sandbox._channels import CallChannel
from runtime.errors import ToolTimeout
from tests.sandbox.helpers import ALL, PROBE_EXEC, PROBE_RO, PROBE_RW, call_processes, request

pytestmark = pytest.mark.sandbox

DRIVERS = ["run", "run_sync"]
EARLY = {"ok": True, "early": True}  # the probe's result_then_sleep result


@contextmanager
def started() -> Iterator[tuple[BlockingPortal, SandboxBackend]]:
    """A backend on an event loop in another thread (as SyncBroker runs it), no spares."""
    with start_blocking_portal() as portal:
        backend = SandboxBackend(preload=ALL, pool=0)
        portal.call(backend.start)
        try:
            yield portal, backend
        finally:
            portal.call(backend.aclose)


def drive(portal: BlockingPortal, backend: SandboxBackend, driver: str, req: ExecRequest) -> Any:
    if driver == "run_sync":
        return backend.run_sync(req)
    return portal.call(backend.run, req)


def leftovers(backend: SandboxBackend) -> list[Any]:
    assert backend.zygote_pid is not None
    return call_processes(backend.zygote_pid)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("tool", [PROBE_RW, PROBE_EXEC], ids=["single", "reaper"])
def test_a_result_before_the_deadline_is_the_outcome(
    workspace: Path, driver: str, tool: Any
) -> None:
    """The result frame comes at once; the process then sleeps past the deadline, which
    comes before ``_EXIT_AFTER_FRAME_S``: the call's outcome is the result (before:
    timeout), and its processes are gone. The deadline leaves a cold call (no spares) time
    to be set up and send its frame on a loaded machine: 0.5 s did not, once, with two full
    suites running on the 2 cores (the frame came after the deadline: a timeout)."""
    deadline = sandbox_backend._EXIT_AFTER_FRAME_S * 0.75
    req = request(tool, workspace, {"action": "result_then_sleep"}, timeout_s=deadline)
    with started() as (portal, backend):
        t0 = time.monotonic()
        outcome: ExecOutcome = drive(portal, backend, driver, req)
        elapsed = time.monotonic() - t0
        assert outcome.result == EARLY
        assert elapsed < 10.0
        assert leftovers(backend) == []


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("tool", [PROBE_RW, PROBE_EXEC], ids=["single", "reaper"])
def test_the_exit_after_a_result_is_awaited_a_short_while(
    workspace: Path, driver: str, tool: Any
) -> None:
    """A tool that sends its result and sleeps no longer holds its call until the 15 s
    timeout (before: a timeout after 15 s): it is ended ``_EXIT_AFTER_FRAME_S`` (2 s)
    after the result, plus the kill's grace, and the result is the outcome."""
    req = request(tool, workspace, {"action": "result_then_sleep"}, timeout_s=15.0)
    with started() as (portal, backend):
        t0 = time.monotonic()
        outcome: ExecOutcome = drive(portal, backend, driver, req)
        elapsed = time.monotonic() - t0
        assert outcome.result == EARLY
        assert sandbox_backend._EXIT_AFTER_FRAME_S <= elapsed < 9.0
        assert leftovers(backend) == []
        # The backend carries on.
        echo = drive(portal, backend, driver, request(tool, workspace, {"action": "echo"}))
        assert echo.result["arguments"] == {"action": "echo"}


@pytest.mark.parametrize("driver", DRIVERS)
def test_no_frame_by_the_deadline_is_a_timeout_that_says_what_may_be_applied(
    workspace: Path, driver: str
) -> None:
    """A call with no last frame by its deadline is a timeout. For a tool that may write
    the workspace, what it did may or may not be there: the message says so, and
    ``details.effect`` is ``unknown``; a tool that may not write gets the plain message."""
    with started() as (portal, backend):
        errors = []
        for tool in (PROBE_RW, PROBE_RO):
            req = request(tool, workspace, {"action": "sleep", "seconds": 100}, timeout_s=0.5)
            with pytest.raises(ToolTimeout) as info:
                drive(portal, backend, driver, req)
            errors.append(info.value)
        assert leftovers(backend) == []
    writing, reading = errors
    assert "may or may not have been applied" in writing.message
    assert writing.details["effect"] == "unknown"
    assert writing.details["limit_s"] == 0.5
    assert reading.message == "the call exceeded its 0.5 s timeout"
    assert "effect" not in reading.details


def test_a_result_in_the_socket_at_the_deadline_is_read_on_the_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run``: the call's task did not read the result the child sent (here it never
    reads: a busy loop may not run it before the deadline). At the deadline the frame the
    socket holds is read, as ``run_sync``'s last poll reads it, and is the outcome, not a
    timeout."""

    async def never(self: CallChannel) -> dict[str, Any] | None:
        await anyio.sleep_forever()
        return None

    monkeypatch.setattr(CallChannel, "receive", never)
    req = request(PROBE_RW, workspace, {"action": "result_then_sleep"}, timeout_s=0.5)
    with started() as (portal, backend):
        outcome = portal.call(backend.run, req)
        assert outcome.result == EARLY
        assert leftovers(backend) == []
        # Nothing there at the deadline: a timeout.
        silent = request(PROBE_RW, workspace, {"action": "sleep", "seconds": 100}, timeout_s=0.5)
        with pytest.raises(ToolTimeout):
            portal.call(backend.run, silent)
