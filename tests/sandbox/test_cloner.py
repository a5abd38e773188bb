"""The fork-server's cloner: a copy of the zygote that makes every clone, the zygote reaps.

The calls are cloned with CLONE_PARENT, so they are the zygote's children (reaped there,
with their rusage); the zygote tells the cloner's answers (the pid) and the exits apart,
whichever comes first.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.backends.sandbox import SandboxBackend, zygote
from runtime.frames import HEADER, decode_body
from tests.sandbox.helpers import PROBE_RW, call, call_processes, cloners, run_with_backend

pytestmark = pytest.mark.sandbox


def _frames(sock: socket.socket) -> list[dict[str, Any]]:
    sock.setblocking(False)
    out = []
    while True:
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return out
        (size,) = HEADER.unpack_from(data)
        out.append(decode_body(data[HEADER.size : HEADER.size + size]))


def test_one_cloner_and_every_call_is_the_zygotes_child(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, PROBE_RW, workspace, action="identity")
        assert backend.zygote_pid is not None
        zyg = psutil.Process(backend.zygote_pid)
        found = cloners(zyg.pid)
        calls = call_processes(zyg.pid)
        same_ns = [
            os.readlink(f"/proc/{c.pid}/ns/{ns}") == os.readlink(f"/proc/{zyg.pid}/ns/{ns}")
            for c in found
            for ns in ("user", "pid", "mnt", "net")
        ]
        return len(found), [p.ppid() == zyg.pid for p in calls], same_ns

    count, parents, same_ns = run_with_backend(fn, pool=2)
    assert count == 1
    assert parents and all(parents)  # CLONE_PARENT: the spares are the zygote's children
    assert all(same_ns)  # the cloner itself is not sandboxed: it is the fork-server


def test_the_cloner_dying_ends_the_zygote_and_the_backend_recovers(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, PROBE_RW, workspace, action="identity")
        assert backend.zygote_pid is not None
        first = backend.zygote_pid
        (cloner,) = cloners(first)
        cloner.kill()
        psutil.Process(first).wait(timeout=30)  # the zygote ends: it can make no call
        # The next call starts a new fork-server, as after the zygote's own death, and runs.
        again = await call(backend, PROBE_RW, workspace, action="identity")
        assert again.usage["sandbox_restarted"]["restarts"] == 1
        return first, backend.zygote_pid, again.result

    first, second, again = run_with_backend(fn)
    assert second != first
    assert again["pid"] == 1


def _bare_zygote() -> tuple[zygote.Zygote, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return zygote.Zygote(ours), theirs


def test_an_exit_reaped_before_the_cloners_answer_is_reported_after_it() -> None:
    z, broker = _bare_zygote()
    try:
        z.pending[1] = zygote._Pending([], call_id=7)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        z._exited(4242, 3 << 8, ru, 12.5)  # exit status 3, before the pid was known
        assert _frames(broker) == []
        z.cloned({"seq": 1, "pid": 4242})
        (report,) = _frames(broker)
        assert (report["type"], report["id"], report["code"]) == ("exit", 7, 3)
        assert report["reaped_at"] == 12.5
        assert z.calls == {} and z.pending == {} and z.early == {}
    finally:
        z.ctl.close()
        broker.close()


def test_a_kill_before_the_cloners_answer_reaches_the_pid_it_names() -> None:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the stand-in for a call's pid 1
        time.sleep(30)
        os._exit(0)
    z, broker = _bare_zygote()
    try:
        z.pending[1] = zygote._Pending([], call_id=9)
        z.kill({"id": 9, "grace_s": 5})
        z.cloned({"seq": 1, "pid": pid})
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        assert z.calls[pid].kill_at is not None  # SIGKILL follows after the grace
    finally:
        z.ctl.close()
        broker.close()


def test_a_failed_clone_is_a_spawn_failure() -> None:
    z, broker = _bare_zygote()
    try:
        z.pending[1] = zygote._Pending([], call_id=11)
        z.cloned({"seq": 1, "error": "OSError: no room"})
        (frame,) = _frames(broker)
        assert frame == {"type": "spawn_failed", "id": 11, "message": "OSError: no room"}
        assert z.calls == {}
    finally:
        z.ctl.close()
        broker.close()


def test_an_oversized_request_leaves_its_mask_targets_out() -> None:
    """The backstop before a clone request is sent: past the one-packet bound it goes
    without the mask targets (the child walks the tree itself), never refused whole."""
    plan = {"call_id": "c1", "masks": {"hide": ["**/*.pem"], "targets": [[["a.pem"], "hide"]]}}
    body: dict[str, object] = {"plan": plan, "tool": "t"}
    assert zygote._drop_targets(body)
    assert body["plan"] == {"call_id": "c1", "masks": {"hide": ["**/*.pem"]}}
    assert "targets" in plan["masks"]  # the caller's plan is left as it was
    assert not zygote._drop_targets(body)
    assert not zygote._drop_targets({"plan": {"masks": None}})
