"""The fork-server's control socket: a spawn too large for one packet is refused alone (the
channel and the zygote live on), and a fork-server that is gone is started again by the
next call, a bounded number of times, the restart noted in that call's usage.

Found by a red-team run: one set_env of 128 KiB made every later sandboxed call of the broker
fail ("the fork-server is gone", then "not started") until the broker was restarted, the
zygote left running, orphaned: a SOCK_SEQPACKET send above the socket's send buffer fails
with EMSGSIZE, which was taken for a dead peer.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from anyio.from_thread import start_blocking_portal

from runtime.backends.sandbox import SandboxBackend
from runtime.backends.sandbox import backend as backend_module
from runtime.backends.sandbox._profile import plan_profile
from runtime.errors import ResourceLimitExceeded, SandboxError
from tests.sandbox.helpers import ALL, PROBE_RW, READ_FILE, request, run_with_backend

pytestmark = pytest.mark.sandbox

#: Past ``net.core.wmem_default`` (212,992 on Linux by default), the packet bound.
_HUGE = "x" * (300 * 1024)


def _big(workspace: Path) -> Any:
    req = request(READ_FILE, workspace, {"path": "hello.txt"})
    req.env = {**req.env, "NOTE": _HUGE}
    return req


def _kill(pid: int) -> None:
    """SIGKILL the zygote and wait until it is gone (up to 30 s: under load, one with many
    calls to end takes a while)."""
    process = psutil.Process(pid)
    os.kill(pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_a_spawn_too_large_for_the_control_socket_is_refused_alone(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> None:
        pid = backend.zygote_pid
        with pytest.raises(ResourceLimitExceeded) as exc:
            await backend.run(_big(workspace))
        assert exc.value.details["reason"] == "env_too_large"
        assert exc.value.details["env_variables"] == 3
        assert exc.value.details["env_bytes"] > len(_HUGE)
        assert "environment" in exc.value.message
        # The channel is open, the same zygote serves the next calls.
        for _ in range(2):
            done = await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
            assert done.result["content"] == "hello\n"
            assert "sandbox_restarted" not in done.usage
        assert backend.zygote_pid == pid

    run_with_backend(fn)


def test_a_spawn_too_large_is_refused_alone_on_the_sync_path(workspace: Path) -> None:
    with start_blocking_portal() as portal:
        backend = SandboxBackend(preload=ALL)
        portal.call(backend.start)
        try:
            pid = backend.zygote_pid
            with pytest.raises(ResourceLimitExceeded, match="environment"):
                backend.run_sync(_big(workspace))
            ok = backend.run_sync(request(READ_FILE, workspace, {"path": "hello.txt"}))
            assert ok.result["content"] == "hello\n"
            assert backend.zygote_pid == pid
        finally:
            portal.call(backend.aclose)


def test_the_spawn_carries_the_environment_once(tmp_path: Path) -> None:
    """The profile string held the whole plan, environment included, so the spawn message
    was twice the environment: it now holds a digest, which still tells environments
    apart (and the zygote makes the same string from the plan it receives)."""
    backend = SandboxBackend()
    req = request(READ_FILE, tmp_path, {})
    req.env = {"NOTE": "y" * 50_000}
    opened = backend._open(req)
    opened.channel.close()
    opened.theirs.close()
    spawn = opened.spawn
    assert "y" * 100 not in spawn["profile"]
    assert spawn["profile"] == plan_profile(spawn["plan"])
    other = request(READ_FILE, tmp_path, {})
    other.env = {"NOTE": "y" * 49_999 + "z"}
    reopened = backend._open(other)
    reopened.channel.close()
    reopened.theirs.close()
    assert reopened.spawn["profile"] != spawn["profile"]


def test_a_killed_zygote_is_started_again_by_the_next_call(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> None:
        old = backend.zygote_pid
        assert old is not None
        _kill(old)
        done = await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
        assert done.result["content"] == "hello\n"
        note = done.usage["sandbox_restarted"]
        assert note["restarts"] == 1 and "exited" in note["reason"]
        assert backend.zygote_pid not in (None, old)
        after = await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
        assert "sandbox_restarted" not in after.usage

    run_with_backend(fn)


def test_a_killed_zygote_is_started_again_on_the_sync_path(workspace: Path) -> None:
    with start_blocking_portal() as portal:
        backend = SandboxBackend(preload=ALL)
        portal.call(backend.start)
        try:
            old = backend.zygote_pid
            assert old is not None
            _kill(old)
            done = backend.run_sync(request(READ_FILE, workspace, {"path": "hello.txt"}))
            assert done.result["content"] == "hello\n"
            assert done.usage["sandbox_restarted"]["restarts"] == 1
            assert backend.zygote_pid not in (None, old)
        finally:
            portal.call(backend.aclose)


def test_a_zygote_found_gone_at_the_spawn_is_restarted_and_the_call_runs(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gone between the check before the call and its spawn: the spawn was not delivered,
    nothing of the call ran, so it runs once more on a fork-server started again."""

    async def fn(backend: SandboxBackend) -> None:
        old = backend.zygote_pid
        assert old is not None
        real = backend._gone
        checks = iter([False])  # the first look misses the death
        monkeypatch.setattr(backend, "_gone", lambda: next(checks, None) or real())
        assert backend._ctl is not None
        backend._ctl.sock.shutdown(2)  # as a dead peer: every send fails with EPIPE
        done = await backend.run(request(PROBE_RW, workspace, {"action": "identity"}))
        assert done.usage["sandbox_restarted"]["restarts"] == 1
        assert backend.zygote_pid != old
        assert not psutil.pid_exists(old) or psutil.Process(old).status() == psutil.STATUS_ZOMBIE

    run_with_backend(fn)


def test_restarts_are_bounded(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_module, "_MAX_RESTARTS", 2)

    async def fn(backend: SandboxBackend) -> None:
        for i in range(3):
            pid = backend.zygote_pid
            assert pid is not None
            _kill(pid)
            if i < 2:
                done = await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
                assert done.usage["sandbox_restarted"]["restarts"] == i + 1
                continue
            with pytest.raises(SandboxError, match="restarted 2 times") as exc:
                await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
            assert exc.value.details["reason"] == "fork_server_restarts"
        # The window has room again later: the next call starts it.
        backend._restarts = [t - 3600 for t in backend._restarts]
        done = await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
        assert done.result["content"] == "hello\n"

    run_with_backend(fn)


def test_a_closed_backend_is_not_started_again(workspace: Path) -> None:
    async def main() -> None:
        backend = SandboxBackend(preload=ALL)
        await backend.start()
        await backend.aclose()
        with pytest.raises(SandboxError, match="closed"):
            await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))
        assert backend.zygote_pid is None
        never = SandboxBackend(preload=ALL)
        with pytest.raises(SandboxError, match="not started"):
            await never.run(request(READ_FILE, workspace, {"path": "hello.txt"}))

    anyio.run(main)
