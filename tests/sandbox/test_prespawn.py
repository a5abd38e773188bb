"""``Broker(prespawn_sandbox=True)``: the fork-server's process is spawned at construction,
adopted by the first sandboxed call, and never outlives the broker when nothing adopts it
(runtime/backends/sandbox/_prespawn.py)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from runtime.backends.sandbox._prespawn import PrespawnedZygote
from runtime.broker import SyncBroker
from runtime.errors import ConfigError

pytestmark = pytest.mark.sandbox

_SHELL = {"tool": "shell_exec", "arguments": {"command": "echo hi"}}
# Refused before any backend (no wasm either: an unprivileged run may have no guests built).
_UNKNOWN = {"tool": "no_such_tool", "arguments": {}}


def _prespawned_pid(sync: SyncBroker) -> int:
    broker = sync.broker
    assert broker is not None and broker._prespawned is not None
    parts = broker._prespawned._parts
    assert parts is not None
    return parts[1].pid


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_the_first_sandboxed_call_adopts_the_prespawned_process(workspace: Path) -> None:
    with SyncBroker(workspace=workspace, prespawn_sandbox=True) as sync:
        pid = _prespawned_pid(sync)
        result = sync.call(_SHELL)
        assert result.success, result.error
        assert result.result is not None and result.result["stdout"] == "hi\n"
        backend = sync.broker._backends["subprocess"]  # type: ignore[union-attr]
        assert backend.zygote_pid == pid  # adopted, not a second one spawned
        assert sync.broker._prespawned is None  # type: ignore[union-attr]
        again = sync.call(_SHELL)
        assert again.success and backend.zygote_pid == pid
    assert _gone(pid)


def test_a_broker_without_a_sandboxed_call_ends_the_prespawned_process(workspace: Path) -> None:
    with SyncBroker(workspace=workspace, prespawn_sandbox=True) as sync:
        pid = _prespawned_pid(sync)
        broker = sync.broker  # alive below: its close ended the process, not its collection
        refused = sync.call(_UNKNOWN)
        assert refused.error is not None and refused.error.type == "tool_not_found"
        assert psutil.Process(pid).is_running()
    assert _gone(pid)
    assert broker is not None and broker._prespawned is None


def test_a_broker_that_fails_to_open_ends_the_prespawned_process(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids: list[int] = []
    real_init = PrespawnedZygote.__init__

    def record(self: PrespawnedZygote) -> None:
        real_init(self)
        assert self._parts is not None
        pids.append(self._parts[1].pid)

    monkeypatch.setattr(PrespawnedZygote, "__init__", record)
    with pytest.raises(ConfigError) as failed:  # its traceback keeps the broker alive
        SyncBroker(
            workspace=workspace, policy=workspace / "no-such-policy.toml", prespawn_sandbox=True
        ).open()
    assert len(pids) == 1  # spawned before the policy failed to load...
    assert _gone(pids[0])  # ...and ended with the broker that did not open
    assert failed.traceback


def test_a_prespawned_process_that_died_is_replaced(workspace: Path) -> None:
    """Dead before the call (take() sees it): the call runs on a zygote spawned then."""
    with SyncBroker(workspace=workspace, prespawn_sandbox=True) as sync:
        pid = _prespawned_pid(sync)
        os.kill(pid, signal.SIGKILL)
        while not _gone(pid):
            time.sleep(0.01)
        result = sync.call(_SHELL)
        assert result.success, result.error
        backend = sync.broker._backends["subprocess"]  # type: ignore[union-attr]
        assert backend.zygote_pid not in (None, pid)


def test_a_prespawned_process_that_dies_when_adopted_is_replaced(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Alive when take() checks it, dead before its init: start() spawns another."""
    killed: list[int] = []
    real_take = PrespawnedZygote.take

    def take_then_die(self: PrespawnedZygote) -> Any:
        parts = real_take(self)
        assert parts is not None
        os.kill(parts[1].pid, signal.SIGKILL)
        killed.append(parts[1].pid)
        return parts

    monkeypatch.setattr(PrespawnedZygote, "take", take_then_die)
    with SyncBroker(workspace=workspace, prespawn_sandbox=True) as sync:
        result = sync.call(_SHELL)
        assert result.success, result.error
        backend = sync.broker._backends["subprocess"]  # type: ignore[union-attr]
        assert len(killed) == 1 and backend.zygote_pid not in (None, killed[0])


def test_without_the_option_nothing_is_spawned_before_the_first_call(workspace: Path) -> None:
    before = {p.pid for p in psutil.Process().children()}
    with SyncBroker(workspace=workspace) as sync:
        assert sync.broker._prespawned is None  # type: ignore[union-attr]
        assert {p.pid for p in psutil.Process().children()} == before
        assert sync.call(_SHELL).success


def test_an_unadopted_process_is_killed_not_waited_for() -> None:
    """Never sent its init, it has nothing to clean up: SIGKILL at once, so that a refused
    call's exit does not wait for the zygote's boot to notice the closed socket."""
    zygote = PrespawnedZygote()
    assert zygote._parts is not None
    proc = zygote._parts[1]
    zygote.close()
    assert proc.returncode == -signal.SIGKILL
    zygote.close()  # idempotent
    assert zygote.take() is None
