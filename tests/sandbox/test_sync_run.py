"""``SandboxBackend.run_sync``: a call driven blocking in the calling thread (the SyncBroker
fast path) gives the outcomes ``run`` gives, and shares the zygote with the event loop."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import psutil
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from runtime.backends.sandbox import SandboxBackend
from runtime.backends.sandbox._channels import CallChannel
from runtime.broker import SyncBroker
from runtime.errors import OutputTooLarge, PolicyDenied, SandboxError, ToolFailed, ToolTimeout
from tests.sandbox.helpers import (
    ALL,
    HOSTILE_CHILDREN,
    PROBE_RW,
    READ_FILE,
    SHELL,
    call_processes,
    request,
)

pytestmark = pytest.mark.sandbox


@contextmanager
def started(**kwargs: Any) -> Iterator[tuple[BlockingPortal, SandboxBackend]]:
    """A backend started on an event loop in another thread (as SyncBroker runs it)."""
    with start_blocking_portal() as portal:
        backend = SandboxBackend(preload=ALL, **kwargs)
        portal.call(backend.start)
        try:
            yield portal, backend
        finally:
            portal.call(backend.aclose)


def _sync(backend: SandboxBackend, tool: Any, workspace: Path, **arguments: Any) -> Any:
    limits = arguments.pop("limits", {})
    return backend.run_sync(request(tool, workspace, arguments, **limits))


def _leftovers(backend: SandboxBackend) -> list[psutil.Process]:
    assert backend.zygote_pid is not None
    # Not the fork-server's cloner: it lives as long as the zygote (zygote.CLONER_NAME).
    return call_processes(backend.zygote_pid)


def test_sync_and_async_runs_give_the_same_result(workspace: Path) -> None:
    with started() as (portal, backend):
        assert backend.sync_capable
        sync = _sync(backend, READ_FILE, workspace, path="data.bin")

        async def on_loop() -> Any:
            assert not backend.sync_capable  # the loop's own thread must not block
            return await backend.run(request(READ_FILE, workspace, {"path": "data.bin"}))

        on_the_loop = portal.call(on_loop)
    assert sync.result == on_the_loop.result
    assert sync.result["content"] == "a" * 4096
    assert sync.usage["cpu_ms"] > 0 and sync.usage["wall_ms"] > 0
    assert sync.fingerprint == on_the_loop.fingerprint


def test_not_sync_capable_before_start(workspace: Path) -> None:
    backend = SandboxBackend()
    assert not backend.sync_capable
    with pytest.raises(SandboxError, match="not started"):
        backend.run_sync(request(READ_FILE, workspace, {"path": "hello.txt"}))


@pytest.mark.parametrize(("args", "error", "match"), HOSTILE_CHILDREN)
def test_hostile_children_give_the_same_typed_errors(
    workspace: Path, args: dict[str, Any], error: type[Exception], match: str
) -> None:
    with started(pool=0) as (_portal, backend):
        with pytest.raises(error, match=match):
            _sync(backend, PROBE_RW, workspace, **args)
        assert _leftovers(backend) == []


def test_output_cap(workspace: Path) -> None:
    with started() as (_portal, backend), pytest.raises(OutputTooLarge):
        _sync(
            backend,
            PROBE_RW,
            workspace,
            action="flood",
            bytes=200_000,
            limits={"output_bytes": 10_000},
        )


def test_timeout_ends_and_reaps_the_whole_call(workspace: Path) -> None:
    with started(pool=0) as (_portal, backend):
        with pytest.raises(ToolTimeout) as info:
            _sync(
                backend,
                SHELL,
                workspace,
                command="sleep 100 & sleep 100",
                limits={"timeout_s": 0.5},
            )
        assert info.value.details["limit_s"] == 0.5
        assert _leftovers(backend) == []
        # The backend (and the control socket's reading) carries on.
        assert _sync(backend, READ_FILE, workspace, path="hello.txt").result["size"] == 6


def test_an_exception_in_the_calling_thread_still_reaps(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # KeyboardInterrupt arrives in whatever the thread is doing: here, waiting for the result.
    def interrupted(self: CallChannel, deadline: float) -> Any:
        raise KeyboardInterrupt

    with started(pool=0) as (_portal, backend):
        monkeypatch.setattr(CallChannel, "receive_sync", interrupted)
        with pytest.raises(KeyboardInterrupt):
            _sync(backend, PROBE_RW, workspace, action="sleep", seconds=100)
        assert _leftovers(backend) == []
        monkeypatch.undo()
        assert _sync(backend, READ_FILE, workspace, path="hello.txt").result["size"] == 6


def test_broker_requests_are_answered_on_the_event_loop(workspace: Path) -> None:
    threads: list[int] = []

    async def handler(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        threads.append(threading.get_ident())
        await anyio.lowlevel.checkpoint()  # a real await: it runs as a task of the loop
        return {"status": 200, "body": payload}

    with started() as (portal, backend):
        loop_thread = portal.call(threading.get_ident)
        req = request(PROBE_RW, workspace, {"action": "broker", "op": "http", "payload": {"u": 1}})
        req.broker_requests = handler
        assert backend.run_sync(req).result == {"status": 200, "body": {"u": 1}}
    assert threads == [loop_thread]


def test_a_refused_broker_request_is_the_calls_error(workspace: Path) -> None:
    async def handler(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        raise PolicyDenied("egress to example.org denied", rule="network")

    with started() as (_portal, backend):
        req = request(PROBE_RW, workspace, {"action": "broker", "op": "http", "payload": {}})
        req.broker_requests = handler
        with pytest.raises(PolicyDenied, match=r"example\.org"):
            backend.run_sync(req)


def test_a_broker_request_is_bounded_by_the_calls_timeout(workspace: Path) -> None:
    async def handler(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(60)
        return {}

    with started(pool=0) as (_portal, backend):
        req = request(
            PROBE_RW,
            workspace,
            {"action": "broker", "op": "http", "payload": {}},
            timeout_s=0.5,
        )
        req.broker_requests = handler
        with pytest.raises(ToolTimeout):
            backend.run_sync(req)
        assert _leftovers(backend) == []


def test_broker_request_without_a_channel(workspace: Path) -> None:
    with started() as (_portal, backend), pytest.raises(ToolFailed, match="no channel"):
        _sync(backend, PROBE_RW, workspace, action="broker", op="http")


def test_threads_and_loop_tasks_share_the_zygote(workspace: Path) -> None:
    """Exit reports of concurrent calls, some run by threads and some by loop tasks, each
    reach their caller whoever reads the control socket (the mailbox's leader)."""
    errors: list[BaseException] = []
    results: list[Any] = []

    def thread_calls(i: int) -> None:
        try:
            for j in range(3):
                path = f"/workspace/t{i}{j}"
                out = _sync(backend, PROBE_RW, workspace, action="write", path=path)
                results.append(out.result)
        except BaseException as exc:
            errors.append(exc)

    async def loop_calls() -> None:
        async def one(i: int) -> None:
            req = request(PROBE_RW, workspace, {"action": "write", "path": f"/workspace/a{i}"})
            results.append((await backend.run(req)).result)

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(one, i)

    with started(pool=2) as (portal, backend):
        threads = [threading.Thread(target=thread_calls, args=(i,)) for i in range(6)]
        for th in threads:
            th.start()
        portal.call(loop_calls)
        for th in threads:
            th.join(120)
        assert errors == []
        assert results == [{"ok": True}] * 24
        assert backend._ctl is not None
        assert backend._ctl.mail.inbox == {}
        assert backend._ctl.mail.following == {}
        assert not backend._ctl.mail.reading
    names = {p.name for p in workspace.iterdir()}
    assert {f"t{i}{j}" for i in range(6) for j in range(3)} <= names
    assert {f"a{i}" for i in range(6)} <= names


def test_a_zygote_killed_under_a_call_is_a_sandbox_error(workspace: Path) -> None:
    with started(pool=0) as (_portal, backend):
        pid = backend.zygote_pid
        assert pid is not None
        killer = threading.Timer(0.5, os.kill, (pid, signal.SIGKILL))
        killer.start()
        try:
            with pytest.raises(SandboxError):
                _sync(backend, PROBE_RW, workspace, action="sleep", seconds=100)
        finally:
            killer.cancel()


def test_closing_the_backend_ends_a_blocked_thread_and_then_its_socket(workspace: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    outcome: list[BaseException | Any] = []

    def blocked() -> None:
        try:
            outcome.append(_sync(backend, PROBE_RW, workspace, action="sleep", seconds=100))
        except BaseException as exc:
            outcome.append(exc)

    with start_blocking_portal() as portal:
        backend = SandboxBackend(preload=ALL, pool=0)
        portal.call(backend.start)
        ctl = backend._ctl
        assert ctl is not None
        thread = threading.Thread(target=blocked)
        thread.start()
        time.sleep(1.0)  # the thread is blocked in the call (no bound on timing is checked)
        portal.call(backend.aclose)
        thread.join(60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], SandboxError)
    assert ctl.sock.fileno() == -1  # closed once the thread let go of it
    assert len(os.listdir("/proc/self/fd")) == fds_before


def test_sync_broker_runs_sandboxed_calls_without_the_portal(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SyncBroker(workspace=workspace) as broker:
        first = broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}})
        assert first.success, first.error  # starts the sandbox on the loop
        portal = broker._portal
        assert portal is not None
        hops: list[Any] = []
        real = portal.call

        def counting(func: Any, *args: Any) -> Any:
            hops.append(func)
            return real(func, *args)

        monkeypatch.setattr(portal, "call", counting)
        for _ in range(3):
            result = broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}})
            assert result.success, result.error
            assert result.result["content"] == "hello\n"
            assert result.backend == "subprocess"
        timed_out = broker.call(
            {"tool": "shell_exec", "arguments": {"command": "sleep 30", "timeout_s": 1}}
        )
        assert hops == []
        monkeypatch.undo()
    assert timed_out.error is not None and timed_out.error.type == "timeout"


@pytest.mark.parametrize(
    "ended", [anyio.RunFinishedError(), concurrent.futures.CancelledError()], ids=repr
)
def test_a_broker_request_when_the_loop_has_ended_is_a_sandbox_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, ended: BaseException
) -> None:
    async def handler(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {}

    def gone(*args: Any, **kwargs: Any) -> Any:
        raise ended

    with started(pool=0) as (_portal, backend):
        monkeypatch.setattr(anyio.from_thread, "run", gone)
        req = request(PROBE_RW, workspace, {"action": "broker", "op": "http", "payload": {}})
        req.broker_requests = handler
        with pytest.raises(SandboxError, match="event loop has ended"):
            backend.run_sync(req)
        monkeypatch.undo()
        assert _leftovers(backend) == []
