"""The launcher of a long-lived sandboxed process: one linear set-up, then ``execve``.

Started by :mod:`runtime.backends.sandbox.process` as ``python -I -S -c BOOT PKG_ROOT`` with
the plan (JSON) in the environment variable :data:`SPEC_ENV`; stdin/stdout/stderr are the
broker's pipes and reach the program unchanged. It imports only the standard library and the
sandbox's own phase modules (``_linux``, ``_setup``, ``newroot``, ``landlock``, ``walls``):
with ``-S`` no site-packages are on the path, and nothing of the broker's state is loaded.

Process tree (the one-shot call's, ``child.py``, with the program in place of the tool)::

    broker ── L  (this: joins the cgroup, clones the read-only trees, drops to the sandbox
                   uid, unshares, maps ids; then stays outside as the handle)
               └── I  pid 1 of the new pid namespace: new root, pivot_root, reaper
                    └── T  no_new_privs, capabilities, rlimits, Landlock, seccomp LAST, execve

A failing step prints the phase and errno on stderr and exits :data:`EXIT_SETUP`: the
program never starts behind half a wall. SIGTERM to L reaches every process of the
namespace; L's death (even SIGKILL) kills I by its parent-death signal, and with pid 1 the
kernel kills the whole namespace (setsid and double-fork survivors included).

Hazard: the spec holds the program's environment (secrets, maybe). It travels in L's
environment, readable only by the broker's uid and root; L drops it before anything else and
the program (in its own pid namespace, without ptrace) cannot reach L.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import signal
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, cast

from runtime.backends.sandbox import _linux, landlock, newroot, walls
from runtime.backends.sandbox._setup import Phase, SetupFailed, exit_code, forward, write

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

__all__ = ["EXIT_SETUP", "SANDBOX_UID", "SCRATCH", "SPEC_ENV", "main"]

SPEC_ENV = "RUNTIME_SANDBOX_PROCESS_SPEC"
#: Exit code when a set-up step failed (the message is on stderr).
EXIT_SETUP = 125
#: The program's uid/gid inside its user namespace (the call sandbox's).
SANDBOX_UID = 1000
#: Inside the new root: the private, size-capped tmpfs that is the program's HOME and TMPDIR.
SCRATCH = "/tmp"
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 1, 4, 38


@dataclass(frozen=True, slots=True)
class _Plan:
    """The attributes ``newroot.build`` reads of a call plan: no workspace, system dirs."""

    access: str = "none"
    exec: bool = True
    # No workspace is bound, so there is nothing for path masks to hide.
    masks: None = None


@dataclass(frozen=True, slots=True)
class _Limits:
    memory_mb: int
    pids: int
    nofile: int
    fsize_mb: int


def _die(message: str) -> NoReturn:
    with contextlib.suppress(OSError):
        os.write(2, f"runtime sandbox launcher: {message}\n".encode(errors="replace"))
    os._exit(EXIT_SETUP)


def _stdio_to_null() -> None:
    """stdin/stdout become /dev/null: the program's pipes stay with the program alone, so EOF
    on the broker's side means the program's end closed."""
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1):
        os.dup2(null, fd)
    os.close(null)


def _trees(paths: list[str]) -> dict[str, int]:
    """Detached read-only clones of what the program needs outside the system dirs."""
    fds: dict[str, int] = {}
    attrs = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
    for path in paths:
        fd = _linux.open_tree(path, _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC)
        fds[path] = fd
        _linux.mount_setattr(fd, attrs)
    return fds


def main() -> NoReturn:
    """L: the whole set-up, in order. Never returns."""
    raw = os.environ.pop(SPEC_ENV, None)
    if raw is None:
        _die(f"{SPEC_ENV} is not set")
    try:
        spec: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        _die(f"bad spec: {exc}")
    del raw
    namespaces = bool(spec["userns"])
    binds = [str(p) for p in spec["binds"]]
    fds: dict[str, int] = {}
    try:
        # -- hygiene: default signals; no handle of the broker survives but stdio.
        with Phase("fds"):
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
                signal.signal(sig, signal.SIG_DFL)
            os.closerange(3, 1 << 20)
        # -- cgroup v1 memory + pids (root only; the broker made and sized them).
        with Phase("cgroup"):
            for procs in spec["cgroup_procs"]:
                write(procs, str(os.getpid()))
        # -- read-only trees: as root cloned before the uid drop (the sandbox uid may not
        # traverse, say, /root/.pyenv); unprivileged they are cloned after unsharing.
        if namespaces and spec["drop_root"]:
            with Phase("trees"):
                fds = _trees(binds)
        # -- identity: never host root. Dropping uid clears dumpable and pdeathsig.
        with Phase("drop_uid"):
            if spec["drop_root"]:
                os.setgroups([])
                os.setresgid(spec["host_gid"], spec["host_gid"], spec["host_gid"])
                os.setresuid(spec["host_uid"], spec["host_uid"], spec["host_uid"])
            _linux.prctl(_PR_SET_DUMPABLE, 1)
            _linux.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            # The broker may have died before pdeathsig was armed: then nobody would kill us.
            if os.getppid() != spec["parent"]:
                _die("the broker is gone")
        host_uid, host_gid = os.geteuid(), os.getegid()
        # -- namespaces: user first (it owns the others), then mount, pid, ipc, uts, net.
        with Phase("unshare"):
            if namespaces:
                flags = _linux.CLONE_NEWUSER | _linux.CLONE_NEWNS | _linux.CLONE_NEWPID
                flags |= _linux.CLONE_NEWIPC | _linux.CLONE_NEWUTS
                flags |= 0 if spec["network"] else _linux.CLONE_NEWNET
                _linux.unshare(flags)
        with Phase("uid_map"):
            if namespaces:
                write("/proc/self/setgroups", "deny")
                write("/proc/self/uid_map", f"{SANDBOX_UID} {host_uid} 1\n")
                write("/proc/self/gid_map", f"{SANDBOX_UID} {host_gid} 1\n")
        if namespaces and not fds:
            with Phase("trees"):
                fds = _trees(binds)
        with Phase("fork_init"):
            init_pid = os.fork()
        if init_pid == 0:
            _init(spec, fds)
    except SetupFailed as exc:
        _die(f"{exc.phase}: {exc.message}")
    for fd in fds.values():
        os.close(fd)
    # L stays outside as the broker's handle: SIGTERM/SIGINT/SIGHUP go on to pid 1 (which
    # passes SIGTERM to every process of the namespace). stdio is the program's: L keeps
    # no copy, so EOF on the broker's side means the program's end closed.
    _stdio_to_null()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward(init_pid, signal.SIGTERM))
    while True:
        try:
            _, status = os.waitpid(init_pid, 0)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
        os._exit(exit_code(status))


def _init(spec: dict[str, Any], fds: dict[str, int]) -> NoReturn:
    """I: pid 1. New root on a tmpfs, pivot_root, old root detached; fork T; reap."""
    namespaces = bool(spec["userns"])
    limits = _Limits(**spec["limits"])
    try:
        with Phase("init_pdeathsig"):
            _linux.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if namespaces:
            newroot.build(
                cast("CallPlan", _Plan()),
                cast("ChildLimits", limits),
                -1,
                fds,
                state_dirs=(),
                mount_proc=True,
            )
            with Phase("hostname"):
                socket.sethostname("sandbox")  # the uts namespace hides the host's name
        with Phase("fork_program"):
            pid = os.fork()
        if pid == 0:
            _program(spec, limits)
    except SetupFailed as exc:
        _die(f"{exc.phase}: {exc.message}")
    for fd in fds.values():
        os.close(fd)
    _stdio_to_null()
    # The reaper: collect every orphan; when the program ends, end the namespace with its
    # status (pid 1 exiting SIGKILLs all that is left).
    signal.signal(signal.SIGTERM, forward(-1, signal.SIGTERM))
    while True:
        try:
            child, status = os.wait()
        except ChildProcessError:
            os._exit(EXIT_SETUP)
        if child == pid:
            os._exit(exit_code(status))


def _rlimits(limits: _Limits) -> None:
    mib = 1024 * 1024
    for res, value in (
        *walls.memory_rlimits(limits.memory_mb),
        (resource.RLIMIT_NOFILE, limits.nofile),
        (resource.RLIMIT_NPROC, limits.pids),
        (resource.RLIMIT_FSIZE, limits.fsize_mb * mib),
        (resource.RLIMIT_CORE, 0),
        *walls.PRIORITY_RLIMITS,
    ):
        resource.setrlimit(res, (value, value))


def _landlock_rules(spec: dict[str, Any], scratch: str) -> list[tuple[str, int]]:
    rules: list[tuple[str, int]] = [(scratch, landlock.WRITE | landlock.EXECUTE)]
    rules += [(f"/dev/{name}", landlock.RW_DEV) for name in ("null", "zero", "full")]
    rules += [(f"/dev/{name}", landlock.READ_FILE) for name in ("random", "urandom")]
    rules.append(("/proc", landlock.READ))
    rules += [(path, landlock.EXEC_READ) for path in ("/usr", "/etc") if os.path.isdir(path)]
    rules += [
        (f"/{n}", landlock.EXEC_READ)
        for n in ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
        if os.path.isdir(f"/{n}") and not os.path.islink(f"/{n}")
    ]
    rules += [(path, landlock.EXEC_READ) for path in spec["binds"] if os.path.exists(path)]
    return rules


def _program(spec: dict[str, Any], limits: _Limits) -> NoReturn:
    """T: the last walls, in order, then execve. Seccomp is the final step."""
    namespaces = bool(spec["userns"])
    scratch = SCRATCH if namespaces else str(spec["scratch"])
    argv = [str(a) for a in spec["argv"]]
    env = {str(k): str(v) for k, v in spec["env"].items()}
    try:
        with Phase("program_pdeathsig"):
            _linux.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        with Phase("program_cwd"):
            os.chdir(scratch)
        with Phase("no_new_privs"):
            _linux.prctl(_PR_SET_NO_NEW_PRIVS, 1)  # no setuid/file caps from here on
        with Phase("capabilities"):
            if namespaces:
                _linux.capset_zero()
        with Phase("rlimits"):
            _rlimits(limits)
        with Phase("landlock"):
            abi = int(spec["landlock_abi"])
            if abi > 0:
                landlock.apply_ruleset(
                    abi, _landlock_rules(spec, scratch), allow_tcp=bool(spec["network"])
                )
        bpf = base64.b64decode(spec["bpf"]) if spec["bpf"] else b""
        with Phase("seccomp"):
            if bpf:
                _linux.seccomp_load_bpf(bpf)
    except SetupFailed as exc:
        _die(f"{exc.phase}: {exc.message}")
    try:
        # PATH is the program's own environment's; argv comes from the policy, no shell.
        os.execvpe(argv[0], argv, env)  # noqa: S606 - argv from the policy, never a shell
    except OSError as exc:
        _die(f"cannot execute {argv[0]}: {exc.strerror}")
