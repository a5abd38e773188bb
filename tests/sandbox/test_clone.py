"""The call's pid 1: cloned by the zygote straight into its namespaces, then the tiny reaper.

A user namespace is owned by its creator's effective uid, and that owner has every
capability in it from outside. So the call's namespaces must be owned by the unprivileged
sandbox uid (or, unprivileged, by the broker's own uid), never by host root; the zygote
must be fully root again after the clone; and every id of the call's processes must be the
sandbox uid as seen from the host.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import stat
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from runtime.backends.sandbox import SandboxBackend, _linux, child, pid1, zygote
from runtime.backends.sandbox.backend import SANDBOX_UID
from runtime.errors import SandboxError
from tests.sandbox.helpers import (
    PROBE_EXEC,
    PROBE_RW,
    bare_config,
    call,
    call_processes,
    run_with_backend,
    spare_processes,
)

pytestmark = pytest.mark.sandbox

NS_GET_OWNER_UID = 0xB704  # _IO(0xb7, 0x4): the owner uid of a user namespace


def _owner(pid: int) -> int:
    fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = bytearray(4)
        fcntl.ioctl(fd, NS_GET_OWNER_UID, buf)
        return int(struct.unpack("I", buf)[0])
    finally:
        os.close(fd)


def _host_ids(pid: int) -> tuple[set[int], set[int]]:
    p = psutil.Process(pid)
    return set(p.uids()), set(p.gids())


def test_namespaces_are_owned_by_the_sandbox_uid_and_the_zygote_stays_root(
    workspace: Path,
) -> None:
    expected = SANDBOX_UID if os.geteuid() == 0 else os.geteuid()

    async def fn(backend: SandboxBackend) -> Any:
        # A spare waits after each call: its pid 1 and tool are the call's processes.
        await call(backend, PROBE_RW, workspace, action="identity")
        assert backend.zygote_pid is not None
        zygote = psutil.Process(backend.zygote_pid)
        procs = await spare_processes(backend.zygote_pid)
        assert procs
        own_ns = os.readlink("/proc/self/ns/user")
        seen = []
        for p in procs:
            assert os.readlink(f"/proc/{p.pid}/ns/user") != own_ns
            seen.append((_owner(p.pid), _host_ids(p.pid)))
        return seen, set(zygote.uids()), set(zygote.gids())

    seen, zyg_uids, zyg_gids = run_with_backend(fn, pool=2)
    for owner, (uids, gids) in seen:
        assert owner == expected
        # Real, effective and saved: no id of host root is left in a call's process.
        assert uids == {expected}
        assert gids == {SANDBOX_UID if os.geteuid() == 0 else os.getegid()}
    assert zyg_uids == {os.geteuid()}  # the clone's borrowed effective uid was given back
    assert zyg_gids == {os.getegid()}


NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace owning a namespace


def _seccomp_on(pid: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        return "Seccomp:\t2" in f.read()


def test_every_namespace_of_a_call_is_owned_by_its_user_namespace(workspace: Path) -> None:
    # The clone makes the user and pid namespaces, the call's pid 1 unshares the others:
    # each must be new and owned by the call's user namespace, as if the clone made them.
    def inspect(pid: int, zygote: int) -> list[tuple[str, bool, bool]]:
        user = os.stat(f"/proc/{pid}/ns/user").st_ino
        seen = []
        for ns in ("mnt", "net", "ipc", "uts", "pid"):
            fd = os.open(f"/proc/{pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
            try:
                owner_fd = fcntl.ioctl(fd, NS_GET_USERNS)
            finally:
                os.close(fd)
            try:
                owner = os.fstat(owner_fd).st_ino
            finally:
                os.close(owner_fd)
            ours = os.stat(f"/proc/{pid}/ns/{ns}").st_ino
            seen.append((ns, owner == user, ours != os.stat(f"/proc/{zygote}/ns/{ns}").st_ino))
        return seen

    async def fn(backend: SandboxBackend) -> Any:
        await call(backend, PROBE_RW, workspace, action="identity")
        assert backend.zygote_pid is not None
        zygote = backend.zygote_pid
        # The spare waiting for the next call; it may still be setting up: wait (bounded)
        # for its seccomp filter, the last step of its set-up.
        (spare,) = call_processes(zygote)
        with anyio.fail_after(20):
            while True:
                if _seccomp_on(spare.pid):
                    return inspect(spare.pid, zygote)
                await anyio.sleep(0.02)

    seen = run_with_backend(fn, pool=2)
    assert len(seen) == 5
    assert all(owned and fresh for _ns, owned, fresh in seen), seen


def test_clone_is_fork_with_namespaces() -> None:
    """The raw clone returns the child's pid, 0 in the child, and the child is a real
    process in the new namespace (here: only a new uts namespace, under a user one)."""
    before = os.readlink("/proc/self/ns/uts")
    pid = _linux.clone(_linux.CLONE_NEWUSER | _linux.CLONE_NEWUTS)
    if pid == 0:
        code = 3
        try:
            code = 0 if os.readlink("/proc/self/ns/uts") != before else 4
        finally:
            os._exit(code)  # never back into pytest in this copy
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0


def test_clone_reports_the_kernels_errno() -> None:
    with pytest.raises(OSError) as info:
        _linux.clone(_linux.CLONE_NEWUSER | 0x00000200)  # CLONE_FS: refused with a new user ns
    assert info.value.errno == 22  # EINVAL


# -- the tiny pid 1 (pid1.c) ---------------------------------------------------------------


def _run_pid1(script: str) -> int:
    """Run pid1 as the exec'd parent of a shell's background job (its 'tool')."""
    binary = pid1.build()
    proc = subprocess.run(["/bin/sh", "-c", script, "sh", str(binary)], check=False, timeout=30)
    return proc.returncode


def test_pid1_exits_with_the_tools_status() -> None:
    assert _run_pid1('sh -c "exit 7" & exec "$1" $! -1') == 7
    assert _run_pid1('sh -c "kill -9 \\$\\$" & exec "$1" $! -1') == 128 + signal.SIGKILL


def test_pid1_forwards_sigterm_to_its_target() -> None:
    # pid1 is the shell's pid after exec: the helper signals it, pid1 passes it on.
    script = 'sleep 30 & s=$!; (sleep 0.3; kill -TERM $$) & exec "$1" $s $s'
    assert _run_pid1(script) == 128 + signal.SIGTERM


def test_pid1_refuses_bad_arguments() -> None:
    assert _run_pid1('exec "$1"') == child.EXIT_PROTOCOL
    assert _run_pid1('exec "$1" x -1') == child.EXIT_PROTOCOL
    assert _run_pid1('exec "$1" 1 -1') == child.EXIT_PROTOCOL  # not its child


def test_pid1_memfd_is_sealed() -> None:
    fd = pid1.load(str(pid1.build()))
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"x")
        assert os.get_inheritable(fd) is False
    finally:
        os.close(fd)


def test_pid1_load_refuses_a_non_elf(tmp_path: Path) -> None:
    bogus = tmp_path / "pid1"
    bogus.write_bytes(b"#!/bin/sh\n")
    with pytest.raises(OSError, match="not an ELF"):
        pid1.load(str(bogus))


def test_the_calls_pid1_is_the_tiny_reaper_and_hides_its_proc_entries(workspace: Path) -> None:
    # A tool that may run programs keeps the reaper (a Python-only one is pid 1 itself).
    async def fn(backend: SandboxBackend) -> Any:
        assert "pid1" not in backend.load_errors
        comm = await call(backend, PROBE_EXEC, workspace, action="read", path="/proc/1/comm")
        root = await call(backend, PROBE_EXEC, workspace, action="listdir", path="/proc/1/root")
        environ = await call(backend, PROBE_EXEC, workspace, action="read", path="/proc/1/environ")
        ident = await call(backend, PROBE_EXEC, workspace, action="identity")
        return comm.result, root.result, environ.result, ident.result

    comm, root, environ, ident = run_with_backend(fn)
    assert comm == {"ok": True, "data": "memfd:runtime-p\n"}
    assert root["ok"] is False
    assert environ["ok"] is False
    assert (ident["pid"], ident["ppid"]) == (2, 1)


def test_pid1_cache_falls_back_to_a_private_tmp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")  # no usable ~/.cache
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    found = pid1.cache_dir()
    assert found == tmp_path / f"runtime-{os.geteuid()}" / "sandbox"
    assert stat.S_IMODE(os.stat(found.parent).st_mode) == 0o700


def test_pid1_cache_refuses_a_dir_others_can_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / f"runtime-{os.geteuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)  # as if made by someone else for us to use
    with pytest.raises(SandboxError, match="no private cache"):
        pid1.cache_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="the effective-uid switch is for a root zygote")
def test_the_root_zygote_gets_its_ids_and_parent_death_signal_back() -> None:
    ours, theirs = socket.socketpair()
    z = zygote.Zygote(ours)
    z.cfg = bare_config(host_uid=SANDBOX_UID, host_gid=SANDBOX_UID, drop_root=True)
    before = _linux.get_pdeathsig()
    _linux.prctl(1, signal.SIGUSR2)  # PR_SET_PDEATHSIG, as the zygote sets SIGKILL
    try:
        pid = z._clone(_linux.CLONE_NEWUSER | _linux.CLONE_NEWUTS)
        if pid == 0:
            os._exit(0)  # never back into pytest in this copy
        os.waitpid(pid, 0)
        assert os.getresuid() == (0, 0, 0)
        assert os.getresgid() == (0, 0, 0)
        assert _linux.get_pdeathsig() == signal.SIGUSR2
    finally:
        _linux.prctl(1, before)
        ours.close()
        theirs.close()


def _spare_group_owners(zygote_pid: int) -> dict[str, tuple[int, int]]:
    """Owners of the files of the spares' memory groups (named s<n>; a finished call's c<n>
    may be going away meanwhile)."""
    base = f"/sys/fs/cgroup/memory/runtime-sandbox-{zygote_pid}"
    owners: dict[str, tuple[int, int]] = {}
    for name in os.listdir(base):
        if name.startswith("s"):
            for f in ("cgroup.procs", "memory.limit_in_bytes"):
                st = os.stat(f"{base}/{name}/{f}")
                owners[f] = (st.st_uid, st.st_gid)
    assert owners
    return owners


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are made only by a root zygote")
def test_the_call_joins_its_cgroups_itself_and_only_procs_is_handed_over(
    workspace: Path,
) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        mechanisms = backend.fingerprint().mechanisms
        if "cgroup_memory" not in mechanisms or "cgroup_pids" not in mechanisms:
            pytest.skip("no writable cgroup v1 memory+pids hierarchy here")
        res = await call(backend, PROBE_RW, workspace, action="read", path="/proc/self/cgroup")
        assert backend.zygote_pid is not None
        return res.result, backend.zygote_pid, _spare_group_owners(backend.zygote_pid)

    res, zpid, owners = run_with_backend(fn, pool=2)
    lines = res["data"].splitlines()
    for ctrl in ("memory", "pids"):
        (line,) = [ln for ln in lines if ln.split(":")[1] == ctrl]
        assert f"/runtime-sandbox-{zpid}/" in line  # the tool runs in the call's group
    assert owners == {
        "cgroup.procs": (SANDBOX_UID, SANDBOX_UID),
        "memory.limit_in_bytes": (0, 0),
    }
