"""Unit tests of the sandbox backend: calls, mapping of outcomes, hostile children, teardown."""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from runtime.backends.sandbox import (
    DISABLE_NAMES,
    HostCapabilities,
    SandboxBackend,
    child,
    probe_host,
    walls,
)
from runtime.errors import (
    OutputTooLarge,
    ResourceLimitExceeded,
    SandboxError,
    ToolFailed,
    ToolTimeout,
)
from runtime.models import ToolSpec
from runtime.toolkit import result_size
from tests.sandbox.helpers import (
    HOSTILE_CHILDREN,
    LIST_FILES,
    PROBE_EXEC,
    PROBE_NONE,
    PROBE_RO,
    PROBE_RW,
    READ_FILE,
    SHELL,
    TOOLS,
    WRITE_FILE,
    call,
    call_processes,
    one,
    request,
    run_with_backend,
    spare_processes,
)

pytestmark = pytest.mark.sandbox


def test_probe_host_reports_mechanisms() -> None:
    caps = probe_host()
    data = caps.as_dict()
    assert data["user_namespaces"] is True
    assert data["landlock_abi"] >= 1
    assert data["seccomp_filter"] is True
    assert data["missing_required"] == []
    for key in ("cgroup_version", "cgroup_writable", "pivot_root", "idmapped_mounts", "is_root"):
        assert key in data


def test_missing_required_names_each_mechanism() -> None:
    caps = HostCapabilities(
        arch_supported=True,
        is_root=False,
        user_namespaces=False,
        user_namespaces_error="EPERM",
        pivot_root=False,
        idmapped_mounts=False,
        landlock_abi=0,
        seccomp=True,
        seccomp_filter=False,
        cgroup_version=None,
    )
    assert caps.missing_required() == ("userns", "landlock", "seccomp")


def test_constructor_validates() -> None:
    with pytest.raises(ValueError, match="unknown mechanisms"):
        SandboxBackend(disable=frozenset({"everything"}))
    with pytest.raises(ValueError, match="mode"):
        SandboxBackend(mode="lax")  # type: ignore[arg-type]
    assert "landlock" in DISABLE_NAMES
    with pytest.raises(ValueError, match="state_dirs"):
        SandboxBackend(state_dirs=("../etc",))


def test_fingerprint_lists_active_and_disabled() -> None:
    async def fn(backend: SandboxBackend) -> Any:
        return backend.fingerprint()

    fp = run_with_backend(fn)
    assert {"userns", "mountns", "pidns", "netns", "landlock", "seccomp", "rlimits"} <= set(
        fp.mechanisms
    )
    assert fp.mode == "strict"
    fp_off = run_with_backend(fn, disable=frozenset({"landlock"}), mode="best_effort")
    assert "landlock" not in fp_off.mechanisms
    assert "landlock" in fp_off.missing
    assert fp_off.mode == "best_effort"


def test_idmap_is_missing_only_for_a_root_broker() -> None:
    """The idmapped workspace mount is used only when the broker is root. An unprivileged
    broker's fingerprint listed it as missing in every audit record, though it needs none:
    ``missing`` must name only what applies to this broker and is absent."""
    caps = {"landlock_abi": 7, "missing_required": []}
    unprivileged = SandboxBackend()
    unprivileged._caps = {**caps, "is_root": False}
    fp = unprivileged._make_fingerprint([], [])
    assert "idmap" not in fp.missing and "idmap" not in fp.mechanisms
    root = SandboxBackend()
    root._caps = {**caps, "is_root": True}
    assert "idmap" in root._make_fingerprint([], []).mechanisms
    root_off = SandboxBackend(disable=frozenset({"mountns"}), mode="best_effort")
    root_off._caps = {**caps, "is_root": True}
    assert "idmap" in root_off._make_fingerprint([], []).missing

    async def fn(backend: SandboxBackend) -> Any:
        return backend.fingerprint()

    started = run_with_backend(fn)  # this host, as this user (the suite runs as both)
    assert "idmap" not in started.missing
    assert ("idmap" in started.mechanisms) == (os.geteuid() == 0)


def test_read_file_through_the_sandbox(workspace: Path) -> None:
    assert one(READ_FILE, workspace, path="hello.txt") == {"content": "hello\n", "size": 6}


def test_list_files(workspace: Path) -> None:
    assert one(LIST_FILES, workspace)["entries"] == ["data.bin", "hello.txt"]


def test_write_file_lands_owned_by_the_broker_user(workspace: Path) -> None:
    assert one(WRITE_FILE, workspace, path="new.txt", content="hi") == {"written": 2}
    st = (workspace / "new.txt").stat()
    assert st.st_uid == os.getuid()
    assert (workspace / "new.txt").read_text() == "hi"


def test_read_only_workspace_refuses_writes(workspace: Path) -> None:
    res = one(PROBE_RO, workspace, action="write", path="/workspace/x")
    assert res["ok"] is False
    assert res["error"] in ("EROFS", "EACCES")
    assert not (workspace / "x").exists()


def test_no_workspace_means_no_workspace(workspace: Path) -> None:
    res = one(PROBE_NONE, workspace, action="listdir", path="/workspace")
    assert res["ok"] is False


def test_identity_inside(workspace: Path) -> None:
    res = one(PROBE_EXEC, workspace, action="identity")
    assert res == {"uid": 1000, "gid": 1000, "pid": 2, "ppid": 1, "hostname": "sandbox"}


def test_identity_inside_a_single_process_call(workspace: Path) -> None:
    # A tool that runs no programs is its call's pid 1; its parent (the zygote) is outside
    # the call's pid namespace, so it has no pid there.
    res = one(PROBE_RW, workspace, action="identity")
    assert res == {"uid": 1000, "gid": 1000, "pid": 1, "ppid": 0, "hostname": "sandbox"}


def test_environment_is_the_policy_environment_only(workspace: Path) -> None:
    os.environ["RUNTIME_TEST_SECRET"] = "s3cret"
    try:
        res = one(PROBE_RW, workspace, action="env")
    finally:
        del os.environ["RUNTIME_TEST_SECRET"]
    assert res["environ"] == {"LANG": "C.UTF-8", "TOOL_ENV": "from-policy"}


def test_only_the_frame_socket_is_open(workspace: Path) -> None:
    fds = one(PROBE_RW, workspace, action="fds")["fds"]
    # 0-2 are /dev/null, one frame socket, and the fd listdir itself opened.
    assert len(fds) == 5
    assert fds[:3] == [0, 1, 2]


@pytest.mark.parametrize(
    "disable", [frozenset(), frozenset({"cgroup"})], ids=["all-on", "no-cgroup"]
)
def test_rlimits_are_applied(workspace: Path, disable: frozenset[str]) -> None:
    async def fn(backend: Any) -> Any:
        limits = {"cpu_s": 7, "nofile": 50, "pids": 20}
        outcome = await call(backend, PROBE_RW, workspace, action="rlimits", limits=limits)
        return backend.fingerprint(), outcome.result

    fp, res = run_with_backend(fn, disable=disable)
    assert res["RLIMIT_CPU"] == [7, 8]
    assert res["RLIMIT_NOFILE"] == [50, 50]
    # With a pids cgroup, RLIMIT_NPROC is a backstop above it (the cgroup refuses first and
    # counts the refusal); without one it is the limit.
    nproc = 20 + walls.NPROC_MARGIN if "cgroup_pids" in fp.mechanisms else 20
    assert res["RLIMIT_NPROC"] == [nproc, nproc]


def test_runtime_state_dir_is_hidden(workspace: Path) -> None:
    (workspace / ".runtime").mkdir()
    (workspace / ".runtime" / "audit.db").write_text("secret")
    res = one(PROBE_RW, workspace, action="listdir", path="/workspace/.runtime")
    assert res == {"ok": True, "entries": []}
    res = one(PROBE_RW, workspace, action="write", path="/workspace/.runtime/planted")
    assert res["ok"] is False
    assert sorted(os.listdir(workspace / ".runtime")) == ["audit.db"]


def test_exec_tool_runs_a_shell(workspace: Path) -> None:
    res = one(SHELL, workspace, command="echo out; echo err >&2; echo made > made.txt; exit 3")
    assert res == {"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "truncated": False}
    assert (workspace / "made.txt").read_text() == "made\n"
    assert (workspace / "made.txt").stat().st_uid == os.getuid()


def test_exec_tool_output_is_truncated(workspace: Path) -> None:
    res = one(SHELL, workspace, command="head -c 3000000 /dev/zero", limits={"output_bytes": 65536})
    assert res["truncated"] is True
    assert len(res["stdout"]) == 65536 // 4


def test_tool_failed_maps_to_tool_error(workspace: Path) -> None:
    with pytest.raises(ToolFailed, match="nope"):
        one(PROBE_RW, workspace, action="fail", message="nope")


def test_exception_maps_to_tool_error_naming_the_type(workspace: Path) -> None:
    with pytest.raises(ToolFailed, match="ValueError: bad"):
        one(PROBE_RW, workspace, action="raise", message="bad")


def test_non_serialisable_result(workspace: Path) -> None:
    with pytest.raises(ToolFailed, match="not serialisable"):
        one(PROBE_RW, workspace, action="nonserialisable")


def test_result_over_the_output_cap(workspace: Path) -> None:
    with pytest.raises(OutputTooLarge) as info:
        one(PROBE_RW, workspace, action="flood", bytes=200_000, limits={"output_bytes": 10_000})
    # Worded and previewed as the broker's own check: the result's canonical JSON.
    assert info.value.message == "probe: result of 200011 bytes exceeds the limit of 10000 bytes"
    assert info.value.details["size"] == 200_011
    assert info.value.details["preview"].startswith('{"data":"xxx')
    assert len(info.value.details["preview"]) <= 1024


def test_the_output_cap_is_on_the_results_json_as_the_broker_counts_it(workspace: Path) -> None:
    """The child compared its msgpack frame with the cap: a result of 9,980 bytes of JSON
    (cap 10,000) was refused as 10,001 bytes, with a Python repr for a preview, and one of
    floats (9 bytes of msgpack, 2 of JSON each) at a third of the cap too."""
    cap = {"output_bytes": 10_000}
    at_cap = one(PROBE_RW, workspace, action="flood", bytes=10_000 - 11, limits=cap)
    assert result_size(at_cap) == 10_000
    floats = one(PROBE_RW, workspace, action="floats", count=4_500, limits=cap)
    assert result_size(floats) <= 10_000 and len(floats["floats"]) == 4_500
    with pytest.raises(OutputTooLarge) as info:
        one(PROBE_RW, workspace, action="flood", bytes=10_000 - 10, limits=cap)
    assert info.value.details["size"] == 10_001
    assert info.value.message == "probe: result of 10001 bytes exceeds the limit of 10000 bytes"
    # Past the cap, a result of floats is sized by its JSON too, not its frame.
    with pytest.raises(OutputTooLarge) as info:
        one(PROBE_RW, workspace, action="floats", count=6_000, limits=cap)
    assert info.value.details["size"] == result_size({"floats": [0.0] * 6_000})
    assert info.value.details["preview"].startswith('{"floats":[0,0,')


@pytest.mark.parametrize(("args", "error", "match"), HOSTILE_CHILDREN)
def test_hostile_child_gives_typed_errors(
    workspace: Path, args: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        one(PROBE_RW, workspace, **args)


@pytest.mark.parametrize("tool", [PROBE_RW, PROBE_EXEC], ids=["single", "reaper"])
def test_a_set_up_error_frame_is_bounded_and_typed(workspace: Path, tool: Any) -> None:
    """Red-team finding P2: a set-up error frame the tool sent (exiting as the set-up
    does, so it still reads as one) went raw into the result: 1.5 MB of phase and message
    against the 1 MiB output cap, an errno of any type, a bytes repr in the message. The
    phase is now a string of at most 64 characters, the message at most 2000, the errno
    an int or absent."""
    forged = {"action": "setup_error", "code": child.EXIT_SETUP}

    async def fn(backend: Any) -> list[SandboxError]:
        errors = []
        for fields in (
            {"phase": "P", "message": "M", "errno": "E" * 5000, "times": 520_000},
            {"phase": {"a": [b"x"]}, "message": b"\xff", "errno": float("nan")},
            {"phase": "landlock", "message": "[Errno 1] Operation not permitted", "errno": 1},
        ):
            with pytest.raises(SandboxError) as info:
                await call(backend, tool, workspace, **forged, **fields)
            errors.append(info.value)
        return errors

    huge, odd, plain = run_with_backend(fn)
    assert huge.message.startswith("sandbox set-up failed at PPP")
    assert len(huge.message) <= 2100
    assert huge.details["phase"] == "P" * 64
    assert "errno" not in huge.details
    assert odd.message == "sandbox set-up failed at unknown"
    assert odd.details["phase"] == "unknown" and "errno" not in odd.details
    assert plain.message == "sandbox set-up failed at landlock: [Errno 1] Operation not permitted"
    assert plain.details["errno"] == 1


def test_silence_times_out(workspace: Path) -> None:
    with pytest.raises(ToolTimeout):
        one(PROBE_RW, workspace, action="sleep", seconds=60, limits={"timeout_s": 0.5})


def test_cpu_limit(workspace: Path) -> None:
    with pytest.raises(ResourceLimitExceeded) as info:
        one(PROBE_RW, workspace, action="spin", limits={"cpu_s": 1, "timeout_s": 30})
    assert info.value.details["limit"] == "cpu_s"


def test_memory_limit(workspace: Path) -> None:
    with pytest.raises(ResourceLimitExceeded):
        one(PROBE_RW, workspace, action="alloc", mb=1024, limits={"memory_mb": 256})


@pytest.mark.parametrize("tool", [PROBE_RW, PROBE_EXEC, WRITE_FILE], ids=lambda t: t.name)
def test_a_call_frame_too_large_for_the_memory_limit_is_a_memory_limit(
    workspace: Path, tool: Any
) -> None:
    """Red-team finding Q6: a 900 KB argument under memory_mb 16 ran the call's process out
    of address space while it decoded its call frame, before the tool ran; the MemoryError
    escaped to the fork-server's last resort (exit 125) and the call was 'sandbox set-up
    failed'. It is the call's memory limit, as when the tool itself runs out; the next
    call, with room, works."""
    if tool is WRITE_FILE:
        arguments: dict[str, Any] = {"path": "m.txt", "content": "x" * 900_000}
    else:
        arguments = {"action": "echo", "pad": "x" * 900_000}

    async def fn(backend: SandboxBackend) -> Any:
        with pytest.raises(ResourceLimitExceeded, match="exceeded its 16 MiB memory limit") as info:
            await call(backend, tool, workspace, **arguments, limits={"memory_mb": 16})
        assert info.value.details["limit"] == "memory_mb"
        return await call(backend, tool, workspace, **arguments, limits={"memory_mb": 256})

    assert run_with_backend(fn).result is not None
    if tool is WRITE_FILE:
        assert (workspace / "m.txt").stat().st_size == 900_000


def test_broker_requests_round_trip(workspace: Path) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def handler(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        seen.append((op, payload))
        return {"status": 200, "body": "pong"}

    async def fn(backend: SandboxBackend) -> Any:
        req = request(PROBE_RW, workspace, {"action": "broker", "op": "http", "payload": {"u": 1}})
        req.broker_requests = handler
        return (await backend.run(req)).result

    assert run_with_backend(fn) == {"status": 200, "body": "pong"}
    assert seen == [("http", {"u": 1})]


def test_broker_requests_without_a_channel(workspace: Path) -> None:
    with pytest.raises(ToolFailed, match="no channel to the broker"):
        one(PROBE_RW, workspace, action="broker", op="http")


def test_usage_is_reported(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        return await call(backend, READ_FILE, workspace, path="hello.txt")

    outcome = run_with_backend(fn)
    assert outcome.usage["cpu_ms"] > 0
    assert outcome.usage["max_rss_kb"] > 0
    assert outcome.usage["wall_ms"] > 0
    assert outcome.fingerprint is not None


def _leftovers(zygote_pid: int) -> list[psutil.Process]:
    return call_processes(zygote_pid)


def test_concurrent_calls_and_nothing_left_behind(workspace: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))

    async def fn(backend: SandboxBackend) -> Any:
        results: list[Any] = []

        async def one_call(i: int) -> None:
            out = await call(backend, PROBE_RW, workspace, action="write", path=f"/workspace/f{i}")
            results.append(out.result)

        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(one_call, i)
        assert backend.zygote_pid is not None
        return results, _leftovers(backend.zygote_pid), backend.zygote_pid

    results, left, zpid = run_with_backend(fn, pool=0)
    assert results == [{"ok": True}] * 16
    assert left == []
    assert not psutil.pid_exists(zpid) or psutil.Process(zpid).status() == psutil.STATUS_ZOMBIE
    assert len(os.listdir("/proc/self/fd")) == fds_before
    assert sorted(p.name for p in workspace.iterdir() if p.name.startswith("f")) == sorted(
        f"f{i}" for i in range(16)
    )


def test_timeout_leaves_no_process(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        with pytest.raises(ToolTimeout):
            await call(
                backend,
                SHELL,
                workspace,
                command="sleep 100 & sleep 100",
                limits={"timeout_s": 0.5},
            )
        assert backend.zygote_pid is not None
        return _leftovers(backend.zygote_pid)

    assert run_with_backend(fn, pool=0) == []


def test_cancelled_call_is_torn_down(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        with anyio.move_on_after(0.5):
            await call(backend, PROBE_RW, workspace, action="sleep", seconds=100)
        assert backend.zygote_pid is not None
        left = _leftovers(backend.zygote_pid)
        # The backend is still usable afterwards.
        again = await call(backend, READ_FILE, workspace, path="hello.txt")
        return left, again.result

    left, again = run_with_backend(fn, pool=0)
    assert left == []
    assert again["size"] == 6


def test_run_before_start_is_a_sandbox_error(workspace: Path) -> None:
    async def main() -> None:
        backend = SandboxBackend()
        with pytest.raises(SandboxError, match="not started"):
            await backend.run(request(READ_FILE, workspace, {"path": "hello.txt"}))

    anyio.run(main)


def test_cgroup_directories_are_removed(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, READ_FILE, workspace, path="hello.txt")
        return backend.zygote_pid

    zpid = run_with_backend(fn)
    for ctrl in ("memory", "pids"):
        assert not Path(f"/sys/fs/cgroup/{ctrl}/runtime-sandbox-{zpid}").exists()


def test_spares_serve_one_call_each_and_die_with_the_backend(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        first = await call(backend, PROBE_RW, workspace, action="write", path="/tmp/state")
        second = await call(backend, PROBE_RW, workspace, action="read", path="/tmp/state")
        third = await call(backend, PROBE_RW, workspace, action="identity")
        assert backend.zygote_pid is not None
        spares = await spare_processes(backend.zygote_pid)
        return first.result, second.result, third.result, spares

    first, second, third, spares = run_with_backend(fn, pool=4)
    assert first == {"ok": True}
    assert second["ok"] is False  # the previous call's /tmp is gone with its child
    assert third["pid"] == 1  # a fresh pid namespace: the tool is its pid 1
    assert spares  # a spare is waiting for the next call of this profile...
    gone = [p for p in spares if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert gone == []  # ...and is killed when the backend closes


def test_zygote_death_is_a_sandbox_error_and_start_recovers(workspace: Path) -> None:
    """A fork-server that dies while a call runs fails that call (it may have run: it is not
    sent again), and start() brings up a new one. One found dead before a call is started
    again by that call (tests/sandbox/test_fork_server_restart.py): killed just before the
    call, as this test once did, which of the two happened was up to the machine's load
    (under load the death was seen first and the call ran: 'DID NOT RAISE')."""

    async def fn(backend: SandboxBackend) -> Any:
        zygote = backend.zygote_pid
        assert zygote is not None
        failed: list[BaseException] = []

        async def sleeper() -> None:
            try:
                await call(backend, PROBE_RO, workspace, action="sleep", seconds=5)
            except SandboxError as exc:
                failed.append(exc)

        # A new process under the zygote: the call's own (cloned cold), or the spare cloned
        # to replace the one that took it (cloned once a call is handed out). Either way the
        # call was delivered before the kill.
        spares = {p.pid for p in call_processes(zygote)}
        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            for _ in range(3000):  # a poll, not a timing assertion
                if any(p.pid not in spares for p in call_processes(zygote)):
                    break
                await anyio.sleep(0.01)
            os.kill(zygote, signal.SIGKILL)
        assert len(failed) == 1, failed
        await backend.start()
        return (await call(backend, READ_FILE, workspace, path="hello.txt")).result

    assert run_with_backend(fn)["size"] == 6


def test_without_user_namespaces_the_other_walls_hold(workspace: Path, canary: Path) -> None:
    """best_effort on a host without user namespaces, simulated (test-only switch)."""

    async def fn(backend: SandboxBackend) -> Any:
        inside = await call(backend, PROBE_RW, workspace, action="read", rel=True, path="hello.txt")
        outside = await call(backend, PROBE_RW, workspace, action="read", path=str(canary))
        ident = await call(backend, PROBE_RW, workspace, action="identity")
        return backend.fingerprint(), inside.result, outside.result, ident.result

    fp, inside, outside, ident = run_with_backend(
        fn, disable=frozenset({"userns"}), mode="best_effort"
    )
    assert {"userns", "mountns", "pidns", "netns"} <= set(fp.missing)
    assert {"landlock", "seccomp", "rlimits"} <= set(fp.mechanisms)
    assert inside == {"ok": True, "data": "hello\n"}
    assert outside["ok"] is False
    assert ident["uid"] != 0


def _replace_tree(workspace: Path) -> None:
    workspace.rename(workspace.with_name("ws-old"))
    workspace.mkdir()
    (workspace / "hello.txt").write_text("new tree\n")


def test_spare_is_not_used_for_a_replaced_workspace(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, READ_FILE, workspace, path="hello.txt")  # leaves a spare behind
        _replace_tree(workspace)
        return (await call(backend, READ_FILE, workspace, path="hello.txt")).result

    assert run_with_backend(fn, pool=4)["content"] == "new tree\n"


def test_a_ready_spare_is_not_used_once_its_tree_was_replaced(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, READ_FILE, workspace, path="hello.txt")
        await _spare_ready(backend.zygote_pid)  # ready, stamped with the old tree
        _replace_tree(workspace)
        return (await call(backend, READ_FILE, workspace, path="hello.txt")).result

    assert run_with_backend(fn, pool=4)["content"] == "new tree\n"


@pytest.mark.parametrize("replaced", [False, True])
def test_a_long_call_frame_reaches_a_spare_or_the_next_child_whole(
    workspace: Path, replaced: bool
) -> None:
    """A frame longer than a socket buffer, through a ready spare (tree unchanged) or the
    call's next child (tree replaced: the spare is dismissed)."""
    content = "".join(f"{i:07d}\n" for i in range(40_000))  # 320 KB

    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, WRITE_FILE, workspace, path="small.txt", content="x")
        await _spare_ready(backend.zygote_pid)
        if replaced:
            _replace_tree(workspace)
        return await call(backend, WRITE_FILE, workspace, path="big.txt", content=content)

    outcome = run_with_backend(fn, pool=4)
    assert outcome.result is not None
    assert (workspace / "big.txt").read_text() == content
    if replaced:
        assert not (workspace.with_name("ws-old") / "big.txt").exists()


# -- integration with the built-in tools (added when the sandbox met the real catalogue) ------


def _builtin(name: str) -> Any:
    from runtime.catalogue import Catalogue

    return Catalogue().get(name)


def _run_builtin(name: str, workspace: Path, arguments: dict[str, Any]) -> Any:
    spec = _builtin(name)

    async def main() -> Any:
        backend = SandboxBackend(preload=[spec])
        await backend.start()
        try:
            return await backend.run(request(spec, workspace, arguments))
        finally:
            await backend.aclose()

    return anyio.run(main)


def test_python_tools_read_package_data_after_pivot_root(tmp_path: Path) -> None:
    """zoneinfo reads tzdata's files lazily: the interpreter's code is bound read-only."""
    out = _run_builtin("current_time", tmp_path, {"timezone": "Europe/Paris"})
    assert out.result["timezone"] == "Europe/Paris"


def test_typed_errors_cross_the_pipe(tmp_path: Path) -> None:
    """shell_exec raises ToolTimeout inside the sandbox: the result says timeout."""
    with pytest.raises(ToolTimeout) as info:
        _run_builtin("shell_exec", tmp_path, {"command": "sleep 5", "timeout_s": 1})
    assert "did not finish" in info.value.message


def test_command_template_tool_runs_in_the_sandbox(tmp_path: Path) -> None:
    import json

    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "count_lines.json").write_text(
        json.dumps(
            {
                "name": "count_lines",
                "description": "Count lines of a workspace file.",
                "category": "custom",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
                "backend": "subprocess",
                "command": ["wc", "-l", "--", "{path}"],
                "sandbox": {"workspace": "ro", "exec": True},
            }
        )
    )
    from runtime.catalogue import Catalogue

    spec = Catalogue(builtins=False, folders=[folder]).get("count_lines")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("a\nb\nc\n")

    async def main() -> Any:
        backend = SandboxBackend(preload=[spec])
        await backend.start()
        try:
            return await backend.run(request(spec, ws, {"path": "f.txt"}))
        finally:
            await backend.aclose()

    out = anyio.run(main)
    assert out.result["exit_code"] == 0
    assert out.result["stdout"].strip() == "3 f.txt"


def test_cgroup_counters_are_read_from_the_v1_files(tmp_path: Path) -> None:
    from runtime.backends.sandbox import cgroups

    memory = tmp_path / "memory" / "c1"
    pids = tmp_path / "pids" / "c1"
    memory.mkdir(parents=True)
    pids.mkdir(parents=True)
    (memory / "memory.max_usage_in_bytes").write_text("7340032\n")
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    (memory / "memory.failcnt").write_text("5\n")
    (pids / "pids.events").write_text("max 3\n")
    assert cgroups.stats([str(memory), str(pids)]) == {
        "peak_memory_bytes": 7340032,
        "oom_kills": 2,
        "memory_failcnt": 5,
        "pids_max_hits": 3,
    }
    # A group whose files are gone or garbled reports what it can, never raises.
    (memory / "memory.failcnt").write_text("garbled\n")
    (pids / "pids.events").unlink()
    assert cgroups.stats([str(memory), str(pids)]) == {
        "peak_memory_bytes": 7340032,
        "oom_kills": 2,
    }


def test_pids_limit_hits_are_in_the_usage() -> None:
    """The pids cgroup's count of refused forks was read and never reported: a call that
    hit the limit was a success with "Cannot fork" in its stderr, nothing in its usage or
    audit record. It is the usage's ``pids_limit_hits`` (the call stays a success)."""
    from runtime.backends.sandbox import _outcome

    assert _outcome.usage({"pids_max_hits": 3}, 0.0)["pids_limit_hits"] == 3
    assert "pids_limit_hits" not in _outcome.usage({"pids_max_hits": 0}, 0.0)


@pytest.mark.parametrize("tool", [PROBE_RW, PROBE_EXEC], ids=["one-process", "reaper"])
@pytest.mark.parametrize(
    "disable", [frozenset(), frozenset({"rlimits"})], ids=["all-on", "cgroup-only"]
)
def test_a_fork_refused_by_the_pids_cgroup_is_counted(
    workspace: Path, tool: ToolSpec, disable: frozenset[str]
) -> None:
    """With every wall on, RLIMIT_NPROC was set to pids.max and the kernel checks it first:
    it refused the fork, and the usage never said the limit was hit. The cgroup refuses
    first now (RLIMIT_NPROC a backstop above it), and the call forks exactly as many
    processes as with the cgroup alone."""

    async def fn(backend: Any) -> Any:
        outcome = await call(
            backend, tool, workspace, action="fork_bomb", n=60, limits={"pids": 16}
        )
        return backend.fingerprint(), outcome

    fp, outcome = run_with_backend(fn, disable=disable)
    if "cgroup_pids" not in fp.mechanisms:
        pytest.skip("no writable pids cgroup on this host (unprivileged)")
    assert outcome.result["forked"] < 16
    assert outcome.usage["pids_limit_hits"] >= 1


async def _spare_ready(zygote_pid: int, old: frozenset[int] = frozenset()) -> None:
    """Until a spare waits under the zygote (a poll, not a timing assertion), and a moment
    more for the zygote to take the cloner's answer that names it. With ``old``, a spare
    other than those processes: the one that served the call just made may not have
    exited yet, and would be counted for its own replacement."""
    for _ in range(3000):
        if _ready_spares(zygote_pid, old):
            break
        await anyio.sleep(0.01)
    await anyio.sleep(0.2)


def _held_mount_namespaces(pid: int) -> list[str]:
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("mnt:["):
            held.append(target)
    return held


def test_a_calls_mount_namespace_is_let_go_after_its_report(workspace: Path) -> None:
    # The zygote holds each spare-served call's mount namespace so that the call's exit
    # does not wait for its unmounting; the janitor closes it after the report.
    import time

    async def fn(backend: SandboxBackend) -> Any:
        for _ in range(4):
            await call(backend, READ_FILE, workspace, path="hello.txt")
        assert backend.zygote_pid is not None
        zygote = backend.zygote_pid
        # While a spare-served call runs, its namespace is held (the only one: the spare
        # waiting for the next call is not).
        # The spare the READ_FILE calls left (the same profile) serves the echo; wait for
        # the one cloned after it, not for the echo's own process, which may not have
        # exited yet under load: the sleep call was then cloned cold, and no namespace was
        # held during it ('assert during' failed with [] once in five unprivileged runs).
        await _spare_ready(zygote)
        served = frozenset(p.pid for p in call_processes(zygote))
        await call(backend, PROBE_RO, workspace, action="echo")
        await _spare_ready(zygote, served)
        during: list[list[str]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: call(backend, PROBE_RO, workspace, action="sleep", seconds=3))
            deadline = time.monotonic() + 30
            while not during and time.monotonic() < deadline:
                await anyio.sleep(0.01)
                if held := _held_mount_namespaces(zygote):
                    during.append(held)
        assert during and len(during[0]) == 1
        for _ in range(3000):  # up to ~30 s: a poll, not a timing assertion
            held = _held_mount_namespaces(zygote)
            if not held:
                break
            await anyio.sleep(0.01)
        return held

    assert run_with_backend(fn, pool=2) == []


def test_a_spare_warms_the_tool_of_the_call_before_it_and_leaves_no_scratch(
    workspace: Path,
) -> None:
    from tests.sandbox.helpers import WARMED, WARMED_EXEC, WARMED_FAILING

    async def fn(backend: SandboxBackend) -> Any:
        assert backend.zygote_pid is not None
        results = {}
        for spec in (WARMED, WARMED_EXEC, WARMED_FAILING):
            # The first call is cold (no spare yet); it makes the zygote fork a spare of
            # this profile, told to warm this tool; the second call is that spare's, once
            # the zygote has it (on a loaded machine a call can come before the clone).
            first = (await call(backend, spec, workspace, action="report")).result
            await _spare_ready(backend.zygote_pid)
            second = (await call(backend, spec, workspace, action="report")).result
            results[spec.name] = [first, second]
        return results

    # The warmed tools are the test's own code, imported by the fork-server as a built-in
    # tool is (a user's folder tool is imported by each call, and has no warm-up).
    results = run_with_backend(fn, pool=4, trusted_folders=[TOOLS])
    cold, warm = results["warmed"]
    assert cold["runs"] == []
    assert warm["runs"] == [
        {"workspace": "/tmp/.runtime-warm-up", "sample": "warm", "writable": False}
    ]
    # The scratch workspace is gone before the call. (Its /tmp is its own, but may hold the
    # mount points of the interpreter's trees: a checkout under /tmp is bound there.)
    assert ".runtime-warm-up" not in warm["tmp"]
    # A tool that runs programs is not warmed (its /tmp and processes are the call's).
    assert [r["runs"] for r in results["warmed_exec"]] == [[], []]
    # A warm-up that fails costs only the warming: the spare serves its call.
    failing_cold, failing_warm = results["warmed_failing"]
    assert failing_cold["runs"] == []
    assert failing_warm["runs"] == [
        {"workspace": "/tmp/.runtime-warm-up", "sample": "warm", "writable": True}
    ]
    assert ".runtime-warm-up" not in failing_warm["tmp"]


def _ready_spares(zygote_pid: int, old: frozenset[int] = frozenset()) -> int:
    """Spares waiting for a call: processes under the zygote with nothing running in them
    but the wait (every call here has ended when this is read), not counting ``old``."""
    alive = 0
    for proc in call_processes(zygote_pid):
        if proc.pid in old:
            continue
        with contextlib.suppress(psutil.NoSuchProcess):
            alive += proc.status() != psutil.STATUS_ZOMBIE
    return alive


@pytest.mark.parametrize(("pool", "most"), [(8, 4), (2, 2)])
def test_concurrent_calls_of_a_profile_keep_more_spares_ready_within_the_pool(
    workspace: Path, pool: int, most: int
) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        assert backend.zygote_pid is not None
        alone = []
        for _ in range(3):  # one call at a time: one spare is enough
            await call(backend, PROBE_RO, workspace, action="echo")
            alone.append(await _settled_spares(backend.zygote_pid))
        for _ in range(6):  # four at a time: the profile's depth grows
            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(lambda: call(backend, PROBE_RO, workspace, action="echo"))
        return alone, await _settled_spares(backend.zygote_pid)

    alone, after = run_with_backend(fn, pool=pool)
    assert alone == [1, 1, 1]
    assert 2 <= after <= most


async def _settled_spares(zygote_pid: int) -> int:
    """The ready spares, once the count has held still for a moment (spares asked for are
    still being cloned right after a call)."""
    last, same = -1, 0
    for _ in range(600):  # a poll, not a timing assertion
        now = _ready_spares(zygote_pid)
        same = same + 1 if now == last else 0
        if same >= 10:
            return now
        last = now
        await anyio.sleep(0.02)
    return last


def test_a_runtime_reserving_more_than_memory_mb_starts(workspace: Path) -> None:
    """A process may reserve address space it does not use: node's V8 reserves ~700 MiB
    before running a line, and died under memory_mb 512 ("Failed to reserve virtual memory
    for CodeRange") while RLIMIT_AS was memory_mb. What it allocates is still bounded:
    RLIMIT_DATA (per process) and the memory cgroup (per call, where the host gives one)."""
    script = (
        "import mmap, sys\n"
        "m = mmap.mmap(-1, 1 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,"
        " prot=0)\n"  # PROT_NONE: a reservation, nothing to access
        "print('reserved')\n"
        "try:\n"
        "    b = bytearray(300 << 20)\n"
        "    print('allocated')\n"
        "except MemoryError:\n"
        "    print('refused')\n"
    )
    (workspace / "r.py").write_text(script)
    res = one(SHELL, workspace, command="/usr/bin/python3 -I -S r.py", limits={"memory_mb": 128})
    assert res["stdout"].split() == ["reserved", "refused"], res


@pytest.mark.skipif(
    not os.readlink("/usr/bin/awk").startswith("/etc/alternatives/")
    if os.path.islink("/usr/bin/awk")
    else True,
    reason="this host's awk is not a Debian alternative",
)
def test_commands_behind_debian_alternatives_run(workspace: Path) -> None:
    """/usr/bin/awk, which, cc, java… are symlinks through /etc/alternatives on Debian: the
    sandbox binds that directory read-only, or they were all "not found"."""
    res = one(SHELL, workspace, command="echo a b | awk '{print $2}'; touch /etc/alternatives/x")
    assert res["stdout"] == "b\n", res
    assert "Read-only file system" in res["stderr"], res


def test_programs_may_reset_their_own_ids_and_no_more(workspace: Path) -> None:
    """glibc's posix_spawn with POSIX_SPAWN_RESETIDS, as GNU make runs a recipe line, calls
    setresuid(-1, getuid(), -1) in the child: seccomp refused it (ENOSYS) and make failed
    every such line ("make: echo: Function not implemented"). The id calls are allowed to
    exec'd programs; without capabilities the kernel keeps them to the process's own ids."""
    code = (
        "import os\n"
        "os.setresuid(-1, os.getuid(), -1); os.setresgid(-1, os.getgid(), -1)\n"
        "print('own ids ok')\n"
        "try:\n"
        "    os.setresuid(0, 0, 0)\n"
        "except OSError as exc:  # EINVAL: 0 is not mapped; EPERM: no capability\n"
        "    print('root refused' if exc.errno in (1, 22) else exc)\n"
    )
    (workspace / "ids.py").write_text(code)
    res = one(SHELL, workspace, command="/usr/bin/python3 -I -S ids.py")
    assert res["stdout"].split("\n")[:2] == ["own ids ok", "root refused"], res


@pytest.mark.skipif(not os.path.exists("/usr/bin/make"), reason="make is not installed")
def test_make_runs_a_recipe(workspace: Path) -> None:
    (workspace / "Makefile").write_text("all:\n\techo made\n")
    res = one(SHELL, workspace, command="make -s")
    assert res == {"stdout": "made\n", "stderr": "", "exit_code": 0, "truncated": False}, res


@pytest.mark.skipif(not glob.glob("/etc/java-*"), reason="no Debian JDK configuration here")
def test_java_finds_its_configuration(workspace: Path) -> None:
    """Debian's JDK links conf/java.security into /etc/java-N-openjdk: bound read-only for
    tools that run programs, or every JVM failed with "Error loading java.security file"."""
    conf = glob.glob("/etc/java-*/security/java.security")
    assert conf
    res = one(SHELL, workspace, command=f"head -c 20 {conf[0]} >/dev/null && echo read")
    assert res["stdout"] == "read\n", res


@pytest.mark.skipif(not os.path.exists("/usr/bin/node"), reason="node is not installed")
def test_node_collects_within_memory_mb(workspace: Path) -> None:
    """V8 sized its heap from the host's RAM (4 GiB here), grew it past memory_mb instead of
    collecting, and died (std::bad_alloc) on a program whose live data fits: tools that
    run programs get NODE_OPTIONS (and JAVA_TOOL_OPTIONS) saying the call's memory."""
    (workspace / "g.js").write_text(
        "const live = [];\n"
        "for (let i = 0; i < 800000; i++) live.push({ i, s: 'y' + i });\n"
        "let keep = [];\n"
        "for (let r = 0; r < 30; r++) {\n"
        "  const a = [];\n"
        "  for (let i = 0; i < 300000; i++) a.push({ i, s: 'x' + i });\n"
        "  keep = a;\n"
        "}\n"
        "console.log('collected', live.length + keep.length);\n"
    )
    res = one(SHELL, workspace, command="node g.js", limits={"memory_mb": 256, "timeout_s": 60})
    assert res["stdout"] == "collected 1100000\n", res


def test_the_runtime_hints_follow_memory_mb_and_yield_to_the_policy(workspace: Path) -> None:
    res = one(
        SHELL,
        workspace,
        command='echo "$NODE_OPTIONS|$JAVA_TOOL_OPTIONS"',
        limits={"memory_mb": 200},
    )
    assert res["stdout"] == "--max-old-space-size=150|-XX:MaxRAM=200m -XX:MaxRAMPercentage=50\n"

    async def plans(backend: SandboxBackend) -> tuple[dict[str, str], dict[str, str]]:
        req = request(SHELL, workspace, {"command": "true"})
        own = dataclasses.replace(req, env={**req.env, "NODE_OPTIONS": "--max-old-space-size=64"})
        reader = request(PROBE_RW, workspace, {"action": "env"})
        return backend._plan(own)["env"], backend._plan(reader)["env"]

    own, reader = run_with_backend(plans)
    assert own["NODE_OPTIONS"] == "--max-old-space-size=64"  # the policy's own value wins
    assert "NODE_OPTIONS" not in reader  # a tool that runs no programs gets none


def test_posix_shared_memory_and_the_host_name_work(workspace: Path) -> None:
    """multiprocessing's Pool and Queue need sem_open (/dev/shm, now the call's private
    /tmp: it failed with ENOENT); the uts name "sandbox" resolves (InetAddress.getLocalHost
    and ``hostname -f`` failed on a DNS lookup)."""
    (workspace / "mp.py").write_text(
        "import multiprocessing as mp\n"
        "def sq(x):\n"
        "    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with mp.Pool(2) as p:\n"
        "        print('pool', sum(p.map(sq, range(10))))\n"
        "    q = mp.Queue(); q.put(3); print('queue', q.get())\n"
    )
    res = one(SHELL, workspace, command="/usr/bin/python3 -I mp.py; getent hosts sandbox")
    assert res["stdout"].split() == ["pool", "285", "queue", "3", "127.0.1.1", "sandbox"], res


@pytest.mark.skipif(not os.path.isdir("/etc/maven"), reason="no Debian maven here")
def test_maven_finds_its_configuration(workspace: Path) -> None:
    """Debian's maven links its conf/ and bin/m2.conf into /etc/maven: mvn could not start
    (NoSuchFileException: /usr/share/maven/bin/m2.conf)."""
    res = one(SHELL, workspace, command="mvn -o -v", limits={"timeout_s": 60})
    assert "Apache Maven" in res["stdout"], res


def test_programs_may_lower_their_own_priority_and_no_more(workspace: Path) -> None:
    """nice, renice, taskset, ionice and chrt failed with "Function not implemented" (nice
    exited 125 without running its command). Exec'd programs may set their own processes'
    niceness, CPU affinity, I/O priority and a non-real-time policy; RLIMIT_NICE and
    RLIMIT_RTPRIO are 0 and there is no capability, so the kernel refuses any raise."""
    code = (
        "import errno, os, resource\n"
        "limit = resource.getrlimit\n"
        "print(limit(resource.RLIMIT_NICE), limit(resource.RLIMIT_RTPRIO))\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))\n"
        "os.sched_setparam(0, os.sched_param(0))\n"
        "print('own scheduling ok')\n"
        "def refused(f, *a):\n"
        "    try:\n"
        "        f(*a)\n"
        "    except OSError as exc:\n"
        "        return exc.errno in (errno.EPERM, errno.EACCES)\n"
        "    return False\n"
        "fifo = refused(os.sched_setscheduler, 0, os.SCHED_FIFO, os.sched_param(1))\n"
        "nice = os.getpriority(os.PRIO_PROCESS, 0)\n"
        "down = refused(os.setpriority, os.PRIO_PROCESS, 0, nice - 1)\n"
        "print('raise refused' if fifo and down else (fifo, down))\n"
    )
    (workspace / "prio.py").write_text(code)
    res = one(
        SHELL,
        workspace,
        command="nice; nice -n 5 sh -c 'echo ran; nice'; /usr/bin/python3 -I -S prio.py",
    )
    lines = res["stdout"].split("\n")
    assert lines[1] == "ran" and int(lines[2]) == min(19, int(lines[0]) + 5), res
    assert lines[3:6] == ["(0, 0) (0, 0)", "own scheduling ok", "raise refused"], res


@pytest.mark.skipif(
    not (os.path.exists("/usr/bin/taskset") and os.path.exists("/usr/bin/ionice")),
    reason="util-linux's taskset and ionice are not installed",
)
def test_taskset_ionice_and_renice_run(workspace: Path) -> None:
    res = one(
        SHELL,
        workspace,
        command="taskset -c 0 true && ionice -c3 true && ionice -c2 -n7 true && "
        "renice -n 3 -p $$ >/dev/null && nice && ionice -c1 true || echo rt refused",
    )
    assert res["stdout"].split() == ["3", "rt", "refused"], res


def test_fifos_may_be_made_and_device_nodes_not(workspace: Path) -> None:
    """mkfifo failed with "Function not implemented" (and valgrind, which makes FIFOs for
    vgdb): mknod/mknodat are allowed for a FIFO; any other node type stays refused."""
    code = (
        "import errno, os, stat\n"
        "os.mkfifo('f2')\n"
        "os.mknod('f3', stat.S_IFIFO | 0o600)\n"
        "print(stat.S_ISFIFO(os.stat('f2').st_mode), stat.S_ISFIFO(os.stat('f3').st_mode))\n"
        "for mode in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO | stat.S_ISUID):\n"
        "    try:\n"
        "        os.mknod('n', mode | 0o600, os.makedev(1, 3))\n"
        "    except OSError as exc:\n"
        "        print(errno.errorcode[exc.errno])\n"
    )
    (workspace / "nodes.py").write_text(code)
    res = one(
        SHELL,
        workspace,
        command="mkfifo ff && test -p ff && echo fifo; mknod x c 1 3 || echo device refused; "
        "/usr/bin/python3 -I -S nodes.py",
    )
    assert res["stdout"].split("\n")[:5] == [
        "fifo",
        "device refused",
        "True True",
        "ENOSYS",
        "ENOSYS",
    ], res
    assert res["stdout"].split("\n")[5] == "EPERM", res
    assert not (workspace / "x").exists() and not (workspace / "n").exists()
