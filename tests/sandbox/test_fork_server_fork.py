"""The fork-server is the process's that started it: a child of ``os.fork()`` neither uses
nor ends it (``runtime/broker/sync.py``).

A sandboxed call in the child of a SyncBroker used to hang (it waited for the parent's loop
thread). Now the child's call is refused, its close ends nothing of the parent's (the
fork-server serves the parent on), and a child still alive at the parent's close does not
keep the fork-server from ending at once (ControlChannel.close shuts the socket down: the
child's copy of the descriptor does not hold it open)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from runtime.broker import SyncBroker
from tests._forked import in_a_forked_child

pytestmark = [pytest.mark.sandbox, pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")]

SHELL = {"tool": "shell_exec", "arguments": {"command": "echo hi"}}
FORKED = "a broker does not survive fork(): open a new one in the child"


def _sleeping_child(body_first: object) -> int:
    """Fork a child that runs ``body_first()`` and then idles (holding whatever descriptors
    it still has) until killed; its pid once the body is done."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.write(w, str(body_first()).encode())  # type: ignore[operator]
            time.sleep(60)
        finally:
            os._exit(0)
    os.close(w)
    try:
        assert os.read(r, 4096).decode() == "done"
    finally:
        os.close(r)
    return pid


def test_a_forked_child_leaves_the_parents_fork_server_alone(workspace: Path) -> None:
    sb = SyncBroker(workspace=workspace, audit=workspace.parent / "audit.db")
    sb.open()
    try:
        assert sb.call(SHELL).success
        zygote = sb.broker._backends["subprocess"].zygote_pid  # type: ignore[union-attr]
        assert zygote is not None

        def child() -> str:
            result = sb.call(SHELL)
            assert result.error is not None and result.error.message == FORKED, result
            sb.close()
            return "done"

        assert in_a_forked_child(child, timeout_s=30) == "done"
        assert psutil.pid_exists(zygote)
        assert sb.call(SHELL).success  # the same fork-server still serves the parent

        # A child alive at the parent's close holds no copy of the control socket.
        pid = _sleeping_child(lambda: "done")
        try:
            t0 = time.monotonic()
            sb.close()
            took = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        assert took < 4.0, f"close waited {took:.1f} s for the fork-server (5 s: killed)"
        assert not psutil.pid_exists(zygote) or psutil.Process(zygote).status() == "zombie"
    finally:
        sb.close()
