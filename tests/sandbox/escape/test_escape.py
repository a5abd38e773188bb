"""Black-box escape attempts (attack classes A, C, D). Each mechanism is shown to matter.

Every attempt runs against the full sandbox (it must fail) and against a TEST-ONLY
configuration with the responsible mechanism(s) switched off (it must succeed, or at least
behave differently), so no test passes because the attempt was broken to begin with.
Where several walls stop the same attempt, each wall is also shown to stop it alone.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import OutputTooLarge, ResourceLimitExceeded, SandboxError, ToolTimeout
from tests.sandbox.helpers import (
    PROBE_EXEC,
    PROBE_NONE,
    PROBE_RW,
    SHELL,
    TOOLS,
    call,
    one,
    request,
    run_with_backend,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.escape]

FS_OFF = frozenset({"mountns", "landlock"})


def _off(*names: str) -> frozenset[str]:
    return frozenset(names)


# -- A. filesystem containment ---------------------------------------------------------


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns")],
    ids=["all-on", "mountns-only", "landlock-only"],
)
def test_read_outside_by_absolute_path(
    workspace: Path, canary: Path, disable: frozenset[str]
) -> None:
    res = one(PROBE_RW, workspace, disable, action="read", path=str(canary))
    assert res["ok"] is False


def test_read_outside_by_absolute_path_succeeds_without_walls(
    workspace: Path, canary: Path
) -> None:
    res = one(PROBE_RW, workspace, FS_OFF, action="read", path=str(canary))
    assert res == {"ok": True, "data": "CANARY\n"}


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns"), FS_OFF],
    ids=["all-on", "mountns-only", "landlock-only", "off"],
)
def test_dotdot_traversal(workspace: Path, disable: frozenset[str]) -> None:
    res = one(PROBE_RW, workspace, disable, action="read", rel=True, path="../outside/canary.txt")
    assert res["ok"] is (disable == FS_OFF)


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns"), FS_OFF],
    ids=["all-on", "mountns-only", "landlock-only", "off"],
)
def test_symlink_planted_in_workspace(
    workspace: Path, canary: Path, disable: frozenset[str]
) -> None:
    (workspace / "link").symlink_to(canary)
    res = one(PROBE_RW, workspace, disable, action="read", rel=True, path="link")
    assert res["ok"] is (disable == FS_OFF)


@pytest.mark.parametrize("disable", [frozenset(), FS_OFF], ids=["all-on", "off"])
def test_symlink_made_by_the_tool(workspace: Path, canary: Path, disable: frozenset[str]) -> None:
    os.chmod(workspace, 0o777)  # so that, walls off, plain permissions do not stop it
    res = one(
        PROBE_RW,
        workspace,
        disable,
        action="symlink_read",
        rel=True,
        path="mylink",
        target=str(canary),
    )
    assert res["ok"] is (disable == FS_OFF)


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns"), FS_OFF],
    ids=["all-on", "mountns-only", "landlock-only", "off"],
)
def test_proc_self_root(workspace: Path, canary: Path, disable: frozenset[str]) -> None:
    res = one(PROBE_RW, workspace, disable, action="read", path=f"/proc/self/root{canary}")
    assert res["ok"] is (disable == FS_OFF)


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns"), FS_OFF],
    ids=["all-on", "mountns-only", "landlock-only", "off"],
)
def test_write_outside(workspace: Path, canary: Path, disable: frozenset[str]) -> None:
    target = canary.parent / "planted.txt"
    res = one(PROBE_RW, workspace, disable, action="write", path=str(target), data="pwned")
    assert res["ok"] is (disable == FS_OFF)
    assert target.exists() is (disable == FS_OFF)


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("landlock"), _off("mountns"), FS_OFF],
    ids=["all-on", "mountns-only", "landlock-only", "off"],
)
def test_read_only_tool_cannot_write_the_workspace_via_proc(
    workspace: Path, disable: frozenset[str]
) -> None:
    # probe_none has no workspace at all: the host path of the workspace must fail too.
    os.chmod(workspace, 0o777)  # so that, walls off, plain permissions do not stop it
    res = one(PROBE_NONE, workspace, disable, action="write", path=str(workspace / "x"))
    assert res["ok"] is (disable == FS_OFF)


def _bound_below(path: str) -> set[str]:
    """Names directly under ``path`` that lead to the interpreter's read-only code, which is
    bound at its host path (a virtualenv inside the checkout lands under it), or to the
    probe's own tool folder: a folder tool's folder is bound read-only at its host path for
    the call to import it (``child.FolderTool``), and the probe is one (tests/sandbox/tools)."""
    from runtime.backends.sandbox.newroot import python_paths

    prefix = path.rstrip("/") + "/"
    bound = [*python_paths(), str(TOOLS)]
    return {p[len(prefix) :].split("/")[0] for p in bound if p.startswith(prefix)}


def test_home_and_host_dirs_are_absent(workspace: Path) -> None:
    for path in ("/root", "/home", "/run", "/var", "/etc", "/usr", str(Path.cwd())):
        res = one(PROBE_RW, workspace, action="listdir", path=path)
        # Absent, or holding nothing but the path to the bound interpreter code: none of the
        # host's own entries (the checkout's files, /root's dotfiles) is visible.
        if res["ok"]:
            assert set(res["entries"]) <= _bound_below(path), (path, res["entries"])
    checkout = one(PROBE_RW, workspace, action="listdir", path=str(Path.cwd()))
    assert "pyproject.toml" not in checkout.get("entries", [])


def test_home_is_visible_without_walls(workspace: Path) -> None:
    res = one(PROBE_RW, workspace, FS_OFF, action="listdir", path="/usr")
    assert res["ok"] is True


def test_shell_cannot_write_system_dirs(workspace: Path) -> None:
    res = one(SHELL, workspace, command="touch /usr/pwned; touch /etc/pwned; touch /pwned; ls /")
    assert res["exit_code"] != 0
    assert not Path("/usr/pwned").exists()


# -- D. isolation: processes, environment, network, syscalls ---------------------------


def test_host_processes_invisible(workspace: Path) -> None:
    assert one(PROBE_EXEC, workspace, action="pids")["pids"] == [1, 2]  # reaper and tool
    assert one(PROBE_RW, workspace, action="pids")["pids"] == [1]  # the tool is pid 1
    seen = one(PROBE_RW, workspace, _off("pidns", "mountns", "landlock"), action="pids")["pids"]
    assert os.getpid() in seen


def test_broker_environment_unreachable(workspace: Path) -> None:
    res = one(PROBE_RW, workspace, action="read", path=f"/proc/{os.getpid()}/environ")
    assert res["ok"] is False
    assert one(PROBE_RW, workspace, action="env")["environ"] == {
        "LANG": "C.UTF-8",
        "TOOL_ENV": "from-policy",
    }


class _Listener:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    self.received += conn.recv(100)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


NET_OFF = frozenset({"netns", "landlock", "seccomp"})


@pytest.mark.parametrize(
    ("disable", "stage", "err"),
    [
        (frozenset(), "socket", errno.EAFNOSUPPORT),
        (_off("landlock", "seccomp"), "connect", errno.ENETUNREACH),
        (_off("netns", "seccomp"), "connect", errno.EACCES),
        (_off("netns", "landlock"), "socket", errno.EAFNOSUPPORT),
    ],
    ids=["all-on", "netns-only", "landlock-only", "seccomp-only"],
)
def test_connect_to_loopback_listener(
    workspace: Path, disable: frozenset[str], stage: str, err: int
) -> None:
    listener = _Listener()
    try:
        res = one(PROBE_RW, workspace, disable, action="connect", port=listener.port)
    finally:
        listener.close()
    assert res["ok"] is False
    assert (res["stage"], res["errno"]) == (stage, err)
    assert listener.received == b""


def test_connect_succeeds_without_walls(workspace: Path) -> None:
    listener = _Listener()
    try:
        res = one(PROBE_RW, workspace, NET_OFF, action="connect", port=listener.port)
        deadline = time.monotonic() + 5
        while listener.received != b"hello" and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        listener.close()
    assert res == {"ok": True}
    assert listener.received == b"hello"


CLONE_NEWUSER = 0x10000000
# (name, x86_64 number, arguments): arguments chosen so that, without the filter, the call
# reaches the kernel and fails (or succeeds) in its own way — never with ENOSYS.
DENIED = [
    ("ptrace", 101, [16, 1]),  # PTRACE_ATTACH to pid 1
    ("process_vm_readv", 310, [1, 0, 0, 0, 0, 0]),
    ("mount", 165, [0, 0, 0, 0, 0]),
    ("umount2", 166, [0, 0]),
    ("pivot_root", 155, [0, 0]),
    ("chroot", 161, [0]),
    ("unshare", 272, [CLONE_NEWUSER]),
    ("setns", 308, [-1, 0]),
    ("clone-newuser", 56, [CLONE_NEWUSER | 0x200, 0, 0, 0, 0]),  # + CLONE_FS: EINVAL
    ("clone3", 435, [0, 0]),
    ("keyctl", 250, [0, 0]),
    ("add_key", 248, [0, 0, 0, 0, 0]),
    ("request_key", 249, [0, 0, 0, 0]),
    ("bpf", 321, [0, 0, 0]),
    ("perf_event_open", 298, [0, 0, -1, -1, 0]),
    ("userfaultfd", 323, [0]),
    ("io_uring_setup", 425, [1, 0]),
    ("io_uring_enter", 426, [-1, 0, 0, 0, 0, 0]),
    ("io_uring_register", 427, [-1, 0, 0, 0]),
    ("kexec_load", 246, [0, 0, 0, 0]),
    ("kexec_file_load", 320, [-1, -1, 0, 0, 0]),
    ("init_module", 175, [0, 0, 0]),
    ("finit_module", 313, [-1, 0, 0]),
    ("delete_module", 176, [0, 0]),
    ("personality", 135, [0xFFFFFFFF]),
    ("acct", 163, [0]),
    ("swapon", 167, [0, 0]),
    ("reboot", 169, [0, 0, 0, 0]),
    ("execve-in-python-tool", 59, [0, 0, 0]),
]


#: Kernels may be built without these (CONFIG_KEXEC*, CONFIG_MODULES); then the kernel
#: itself says ENOSYS and only the "on" half of the comparison is informative.
COMPILED_OUT = frozenset(
    {"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module"}
)


@pytest.mark.timeout(900)
def test_denied_syscalls(workspace: Path) -> None:
    async def fn(backend: Any) -> dict[str, Any]:
        out = {}
        for name, nr, args in DENIED:
            res = await call(backend, PROBE_RW, workspace, action="syscall", nr=nr, args=args)
            out[name] = res.result
        return out

    on = run_with_backend(fn)
    off = run_with_backend(fn, disable=_off("seccomp"))
    for name, _, _ in DENIED:
        assert on[name] == {"ok": False, "errno": errno.ENOSYS, "error": "ENOSYS"}, name
        if name not in COMPILED_OUT:
            assert off[name].get("errno") != errno.ENOSYS, (name, off[name])


def test_x32_abi_is_killed(workspace: Path) -> None:
    x32_getpid = 0x40000000 | 39
    with pytest.raises(SandboxError, match="signal 31"):
        one(PROBE_RW, workspace, action="syscall", nr=x32_getpid)
    res = one(PROBE_RW, workspace, _off("seccomp"), action="syscall", nr=x32_getpid)
    assert "ok" in res  # reached the kernel (which may or may not have x32) and returned


def test_i386_int80_is_killed(workspace: Path) -> None:
    with pytest.raises(SandboxError, match="signal 31"):
        one(PROBE_RW, workspace, action="int80")
    try:
        res: Any = one(PROBE_RW, workspace, _off("seccomp"), action="int80")
    except SandboxError as exc:  # no ia32 emulation on this kernel: SIGSEGV, not SIGSYS
        assert exc.details.get("signal") != 31
    else:
        assert res["ok"] is True


# -- C. resource exhaustion ------------------------------------------------------------


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("cgroup"), _off("rlimits")],
    ids=["all-on", "rlimits-only", "cgroup-only"],
)
def test_fork_bomb_is_capped(workspace: Path, disable: frozenset[str]) -> None:
    async def fn(backend: Any) -> Any:
        return backend.fingerprint(), (
            await call(backend, PROBE_RW, workspace, action="fork_bomb", n=60, limits={"pids": 16})
        ).result

    fp, res = run_with_backend(fn, disable=disable)
    if disable == _off("rlimits") and "cgroup_pids" not in fp.mechanisms:
        pytest.skip("no writable pids cgroup on this host (unprivileged)")
    assert res["forked"] < 16


def test_fork_bomb_runs_free_without_limits(workspace: Path) -> None:
    res = one(
        PROBE_RW,
        workspace,
        _off("rlimits", "cgroup"),
        action="fork_bomb",
        n=60,
        limits={"pids": 16},
    )
    assert res["forked"] == 60


@pytest.mark.parametrize(
    "disable",
    [frozenset(), _off("cgroup"), _off("rlimits")],
    ids=["all-on", "rlimits-only", "cgroup-only"],
)
def test_memory_bomb_is_capped(workspace: Path, disable: frozenset[str]) -> None:
    async def fn(backend: Any) -> Any:
        fp = backend.fingerprint()
        if disable == _off("rlimits") and "cgroup_memory" not in fp.mechanisms:
            return "skip"
        with pytest.raises(ResourceLimitExceeded):
            await call(
                backend, PROBE_RW, workspace, action="alloc", mb=600, limits={"memory_mb": 200}
            )
        return "ok"

    if run_with_backend(fn, disable=disable) == "skip":
        pytest.skip("no writable memory cgroup on this host (unprivileged)")


def test_memory_bomb_runs_free_without_limits(workspace: Path) -> None:
    res = one(
        PROBE_RW,
        workspace,
        _off("rlimits", "cgroup"),
        action="alloc",
        mb=600,
        limits={"memory_mb": 200},
    )
    assert res == {"ok": True, "mb": 600}


def _appears(path: Path, *, expected: bool) -> bool:
    """Whether a survivor wrote ``path``. Waiting is bounded generously when it is expected
    (a loaded machine is slow), and a fixed grace when it is not."""
    deadline = time.monotonic() + (20.0 if expected else 1.5)
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return path.exists()


@pytest.mark.parametrize("disable", [frozenset(), _off("pidns")], ids=["all-on", "pidns-off"])
def test_setsid_double_fork_survivor(workspace: Path, disable: frozenset[str]) -> None:
    marker = "/workspace/survivor.txt"
    res = one(PROBE_RW, workspace, disable, action="setsid_survivor", marker=marker, delay=0.5)
    assert res == {"ok": True}
    assert _appears(workspace / "survivor.txt", expected=bool(disable)) is bool(disable)


def test_shell_background_job_dies_with_the_call(workspace: Path) -> None:
    res = one(
        SHELL,
        workspace,
        command="(sleep 0.5; echo alive > bg.txt) >/dev/null 2>&1 & "
        "setsid sh -c 'sleep 0.5; echo alive > bg2.txt' >/dev/null 2>&1 & echo started",
    )
    assert res["stdout"] == "started\n"
    time.sleep(1.5)
    assert not (workspace / "bg.txt").exists()
    assert not (workspace / "bg2.txt").exists()


def test_timeout_kills_hung_survivors(workspace: Path) -> None:
    with pytest.raises(ToolTimeout):
        one(
            PROBE_RW,
            workspace,
            action="setsid_survivor",
            marker="/workspace/late.txt",
            delay=1.0,
            hang=True,
            limits={"timeout_s": 0.5},
        )
    time.sleep(1.5)
    assert not (workspace / "late.txt").exists()


def test_output_flood_is_capped(workspace: Path) -> None:
    with pytest.raises(OutputTooLarge):
        one(PROBE_RW, workspace, action="flood", bytes=5_000_000, limits={"output_bytes": 100_000})


def test_cpu_spin_past_the_timeout(workspace: Path) -> None:
    with pytest.raises(ToolTimeout):
        one(PROBE_RW, workspace, action="spin", seconds=60, limits={"timeout_s": 0.5, "cpu_s": 30})


def test_disk_fill_in_tmp_is_capped(workspace: Path) -> None:
    res = one(
        SHELL,
        workspace,
        command="head -c 50M /dev/zero > /tmp/big; echo $?",
        limits={"fsize_mb": 8, "memory_mb": 256},
    )
    assert res["stdout"].strip() != "0"


def test_kill_parent_init_is_refused(workspace: Path) -> None:
    res = one(PROBE_EXEC, workspace, action="kill_parent")
    assert res["ok"] is False
    assert res["error"] == "EPERM"


def test_a_single_process_call_cannot_reach_its_parent(workspace: Path) -> None:
    # The tool is pid 1: its parent, the zygote, has no pid in the call's namespace, and
    # the zygote's host pid names nothing there (or, if small, another process of the call).
    # kill(getppid() = 0, SIGKILL) is its own process group, which holds only the call:
    # the tool ends as if killed, nothing outside is touched.
    async def fn(backend: Any) -> Any:
        zygote = backend.zygote_pid
        by_pid = await call(backend, PROBE_RW, workspace, action="kill_pid", pid=zygote)
        with pytest.raises(SandboxError) as info:
            await call(backend, PROBE_RW, workspace, action="kill_parent")
        after = await call(backend, PROBE_RW, workspace, action="echo")
        sig = info.value.details.get("signal")
        return by_pid.result, sig, after.result, (zygote, backend.zygote_pid)

    by_pid, sig, after, (zygote, zygote_after) = run_with_backend(fn)
    assert by_pid == {"ok": False, "errno": errno.ESRCH, "error": "ESRCH"}
    assert sig == 9
    assert after["arguments"] == {"action": "echo"}
    assert zygote_after == zygote  # the same zygote served the call after


# -- D. set-id files and the zygote's memory (red-team findings) ---------------------------

_SET_ID = "cp /bin/sh sh1; chmod 4755 sh1; cp /bin/sh sh2; install -m 2755 /bin/sh sh2; " + (
    "python3 -c 'import os; os.open(\"sh3\", os.O_CREAT | os.O_WRONLY, 0o4755)'; "
    "mkdir -m 2755 d1; python3 mk4.py; true"
)
#: openat2 hides its mode in a struct seccomp cannot read. A set-group-ID mode without
#: group-exec survives the first write when the writer is in the file's group (the kernel
#: clears S_ISGID on write only with S_IXGRP set): a root-owned setgid file with content.
_OPENAT2_SET_ID = """
import ctypes, os, struct
how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, 0o2745, 0))
fd = ctypes.CDLL(None, use_errno=True).syscall(437, -100, b"sh4", how, 24)
if fd >= 0:
    os.write(fd, b"#!/bin/sh\\nid\\n")
"""


@pytest.mark.parametrize("disable", [frozenset(), _off("seccomp")], ids=["all-on", "seccomp-off"])
def test_no_set_id_file_reaches_the_host(workspace: Path, disable: frozenset[str]) -> None:
    """The workspace is the host's file system, owned by its owner's uid: a set-uid file made
    there runs as that owner (host root when root owns it) for any local user, outside every
    wall. chmod, install -m, open(O_CREAT, 04755), mkdir -m 2755, openat2 with 02745 then a
    write: no set-id bit is kept."""
    (workspace / "mk4.py").write_text(_OPENAT2_SET_ID)
    one(SHELL, workspace, disable, command=_SET_ID)
    made = {p.name: p.stat().st_mode for p in workspace.iterdir() if p.name in _MADE}
    set_id = sorted(name for name, mode in made.items() if mode & (0o4000 | 0o2000))
    if disable:
        assert set_id == ["d1", "sh1", "sh2", "sh3", "sh4"]  # it works without the rule
    else:
        assert set_id == []
        assert set(made) == {"sh1", "sh2"}  # created (cp), only their modes refused


_MADE = {"sh1", "sh2", "sh3", "sh4", "d1"}

_SCAN = """
import os, sys
pid, markers = sys.argv[1], open("markers.txt").read().split()
try:
    maps = open(f"/proc/{pid}/maps").read().splitlines()
    mem = open(f"/proc/{pid}/mem", "rb", 0)
except OSError as exc:
    sys.exit(f"denied: {exc.strerror}")
found = set()
for line in maps:
    span, perm = line.split()[:2]
    if "r" in perm:
        lo, hi = (int(x, 16) for x in span.split("-"))
        try:
            mem.seek(lo)
            data = mem.read(hi - lo)
        except OSError:
            continue
        found.update(m for m in markers if m.encode() in data)
print(" ".join(sorted(found)))
"""


@pytest.mark.parametrize(
    "disable", [frozenset(), _off("nondumpable")], ids=["all-on", "nondumpable-off"]
)
def test_a_program_cannot_read_the_tool_process_memory(
    workspace: Path, disable: frozenset[str]
) -> None:
    """The tool process is a copy of the zygote, whose heap holds what earlier calls sent it
    (their environments: an API key). A program the tool runs has its uid; it could read
    that heap through /proc/PPID/mem and find an earlier call's secret."""
    (workspace / "scan.py").write_text(_SCAN)
    secret = "sk-" + "7" * 8 + "-call-one"
    own = "from-" + "policy"  # this call's own TOOL_ENV value, in the tool's os.environ
    # Read from a file: in the command they would be in the shell's memory, not only the
    # tool's. $PPID is the shell's parent: the tool process.
    (workspace / "markers.txt").write_text(f"{secret} {own}\n")

    async def fn(backend: Any) -> Any:
        first = request(SHELL, workspace, {"command": "true"})
        await backend.run(dataclasses.replace(first, env={**first.env, "API_KEY": secret}))
        second = request(SHELL, workspace, {"command": "python3 scan.py $PPID; echo rc=$?"})
        second = dataclasses.replace(second, call_id="call_two")
        return (await backend.run(second)).result

    res = run_with_backend(fn, disable=disable)
    if disable:
        assert own in res["stdout"], res  # the parent's memory is readable without the wall
    else:
        assert "denied: Permission denied" in res["stderr"], res
        assert secret not in res["stdout"]


# -- C. filling the workspace's file system (red-team finding) -----------------------------

# Scaled down from the red team's 240 MiB and 30,000 files so that a small CI disk holds
# the run with room: 64 MiB, and 12,000 files (47 MiB at 4 KiB each), against 16 MiB.
_FILL = "for i in 1 2 3 4 5 6 7 8; do head -c 8M /dev/zero > f$i; sleep 0.1; done; echo filled"
_FILES = "mkdir d && cd d && i=0; while [ $i -lt 12000 ]; do : > n$i; i=$((i+1)); done; echo made"


@pytest.mark.parametrize("command", [_FILL, _FILES], ids=["bytes", "files"])
@pytest.mark.parametrize("disk_mb", [16, 4096], ids=["capped", "room"])
def test_filling_the_workspace_is_capped(workspace: Path, command: str, disk_mb: int) -> None:
    """RLIMIT_FSIZE bounds each file, not a tree of them: 240 MiB in 30 MiB files, or 30,000
    empty files (at 4 KiB each), filled the host's disk with no limit. disk_mb ends the call
    once the workspace's file system has filled past it; with room, the same call ends."""
    limits = {"fsize_mb": 64, "disk_mb": disk_mb, "timeout_s": 60}
    if disk_mb == 4096:
        res = one(SHELL, workspace, command=command, limits=limits)
        assert res["stdout"] in ("filled\n", "made\n"), res
        return
    with pytest.raises(ResourceLimitExceeded) as info:
        one(SHELL, workspace, command=command, limits=limits)
    assert info.value.details["limit"] == "disk_mb"
    assert info.value.details["filled_bytes"] > 16 * 1024 * 1024


@pytest.mark.parametrize("disable", [frozenset(), _off("seccomp")], ids=["all-on", "seccomp-off"])
def test_fallocate_is_not_supported(workspace: Path, disable: frozenset[str]) -> None:
    """fallocate reserves blocks without writing them, faster than the disk_mb watch looks:
    twenty 60 MiB reservations took the file system 1.2 GB past the limit in a few ms. It is
    'not supported'; posix_fallocate then writes the zeros itself (bounded like any write)."""
    res = one(
        SHELL,
        workspace,
        disable,
        command="fallocate -l 60M big; echo rc=$?; python3 -c 'import os; "
        'fd = os.open("small", os.O_CREAT | os.O_WRONLY); os.posix_fallocate(fd, 0, 1 << 20)\'',
    )
    blocks = (workspace / "big").stat().st_blocks * 512 if (workspace / "big").exists() else 0
    assert (workspace / "small").stat().st_size == 1 << 20  # written instead, either way
    if disable:
        assert "rc=0" in res["stdout"] and blocks >= 60 << 20
    else:
        assert "rc=1" in res["stdout"] and "not supported" in res["stderr"]
        assert blocks == 0


_OPENAT2 = """
import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for name, mode in ((b"o1", 0o4755), (b"o2", 0o2745), (b"o3", 0o644)):
    how = ctypes.create_string_buffer(struct.pack("QQQ", os.O_CREAT | os.O_WRONLY, mode, 0), 24)
    fd = libc.syscall(ctypes.c_long(437), ctypes.c_int(-100), ctypes.c_char_p(name), how, 24)
    print(ctypes.get_errno() if fd < 0 else "made")
"""


def test_programs_have_no_openat2(workspace: Path) -> None:
    """openat2 carries its mode in a struct BPF cannot read. It used to stay allowed for
    programs on the reasoning that the first write clears a set-id bit; the kernel clears
    S_ISGID on write only when S_IXGRP is set (or the writer is outside the file's group),
    so 02745 plus content kept its bit (test_no_set_id_file_reaches_the_host's sh4). Programs
    now get ENOSYS, as from any syscall not on their list (libc never needs openat2); the
    file toolkit's own Python process keeps it for RESOLVE_BENEATH."""
    (workspace / "o2.py").write_text(_OPENAT2)
    res = one(SHELL, workspace, command="python3 o2.py")
    assert res["stdout"].split() == [str(errno.ENOSYS)] * 3, res
    assert not {"o1", "o2", "o3"} & {p.name for p in workspace.iterdir()}
