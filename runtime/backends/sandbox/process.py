"""Long-lived sandboxed processes: a program behind the same walls as a one-shot call.

Usage::

    with spawn_sandboxed(["python3", "/opt/srv.py"], env={"PATH": "/usr/bin"}) as proc:
        proc.stdin.write(b"...")           # pipes, as with subprocess.Popen
        proc.fingerprint                   # which mechanisms are active
    # closed: stdin closed, SIGTERM after a grace, SIGKILL; the whole tree is gone

    plan = plan_process(argv, env=env)    # the launcher's argv/env, for a caller that
    ...                                   # spawns it itself (the MCP SDK's stdio_client)
    plan.cleanup()                        # after the process has exited

The program is started once (an MCP server, say), so it is not forked from the zygote: the
broker fork+execs a small launcher (``_launcher``, ``python -I -S``, standard library only)
that runs the call sandbox's own phases — cgroup, uid drop (never host root), user/mount/
pid/ipc/uts namespaces (net too unless the policy grants the network), the new root of
``newroot.build`` (system dirs read-only, a private size-capped ``/tmp`` that is HOME and
TMPDIR, ``/proc`` of the new pid namespace, minimal ``/dev``), pid 1 reaper, no_new_privs,
pdeathsig, capabilities dropped, rlimits, Landlock, and seccomp (the exec allowlist) last.

Outside the system dirs the program sees only what it needs, read-only: the installation
prefix of its executable (a virtualenv, a pyenv tree), files and directories named by
absolute path in its argv and in its ``PYTHONPATH``, and the caller's ``read_only`` list.
Never ``/``, a top-level directory, a home directory itself, or ``/proc``, ``/sys``,
``/dev``, ``/run``: those are refused (named explicitly) or skipped (found in argv); nor a
directory holding the runtime's state (``.runtime/``: a workspace with its audit DB).

``strict`` refuses to start without user namespaces, Landlock or seccomp; ``best_effort``
runs with what the host has (without user namespaces: a host scratch directory, Landlock
and seccomp only) and the fingerprint says what is missing.

Hazard: the launcher's parent-death signal fires when the *thread* that spawned it exits.
:func:`spawn_sandboxed` forks it from the spawner thread (``_spawner``), which lives as long
as the process; a caller of :func:`plan_process` that spawns the launcher itself must do so
from a thread that outlives the process (the event loop's, or the main thread).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

from runtime.backends.base import Fingerprint
from runtime.backends.sandbox import cgroups, seccomp
from runtime.backends.sandbox._binds import STATE_DIR, bindable, check_read_only, holds_state, under
from runtime.backends.sandbox._boot import PKG_ROOT, boot_source
from runtime.backends.sandbox._launcher import EXIT_SETUP, SCRATCH, SPEC_ENV
from runtime.backends.sandbox._spawner import spawn_in_owner_thread
from runtime.backends.sandbox.backend import SANDBOX_UID
from runtime.backends.sandbox.probe import HostCapabilities, probe_host
from runtime.errors import SandboxError, SandboxUnavailable

__all__ = [
    "EXIT_SETUP",
    "SCRATCH",
    "LaunchPlan",
    "ProcessLimits",
    "SandboxedProcess",
    "host_capabilities",
    "needed_paths",
    "plan_process",
    "spawn_sandboxed",
]

Mode = Literal["strict", "best_effort"]

_BOOT = boot_source("_launcher", "main()")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: Bound into every sandbox by ``newroot`` already (read-only).
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
#: A process granted the network also needs name resolution and CA certificates.
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/gai.conf")
_names = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    """Limits of a long-lived process (the whole sandbox, all its processes)."""

    #: What each process may allocate (RLIMIT_DATA; the address space gets
    #: ``walls.ADDRESS_HEADROOM_MB`` more) and cgroup memory, MiB. Default 2048.
    memory_mb: int = 2048
    #: Processes + threads, rlimit and cgroup. Default 128.
    pids: int = 128
    #: Open files. Default 1024.
    nofile: int = 1024
    #: Largest file, and the size of the private /tmp, MiB. Default 256.
    fsize_mb: int = 256


@functools.cache
def host_capabilities() -> HostCapabilities:
    """What this host offers (probed once per process)."""
    return probe_host()


@functools.cache
def _bpf(network: bool) -> str:
    """The exec allowlist as BPF (base64), or "" when libseccomp cannot build it."""
    try:
        program = seccomp.build_program(seccomp.EXEC_ALLOW, inet=network)
    except (OSError, RuntimeError, ValueError):
        return ""
    return base64.b64encode(program).decode("ascii")


def _program_paths(argv0: str, env: Mapping[str, str]) -> list[str]:
    found = argv0 if "/" in argv0 else shutil.which(argv0, path=env.get("PATH", _DEFAULT_PATH))
    if found is None or not os.path.exists(found):
        return []  # execvpe inside reports it: "cannot execute"
    paths: list[str] = []
    for program in dict.fromkeys((os.path.abspath(found), os.path.realpath(found))):
        if under(program, _SYSTEM):
            continue
        directory = os.path.dirname(program)
        # An interpreter in <prefix>/bin needs its prefix (lib/, pyvenv.cfg); never more
        # than the program itself when the prefix would be a home or top-level directory.
        prefix = os.path.dirname(directory) if os.path.basename(directory) == "bin" else directory
        paths.append(next((p for p in (prefix, directory) if bindable(p)), program))
    return paths


def needed_paths(
    argv: list[str], env: Mapping[str, str], read_only: Iterable[str] = (), *, network: bool
) -> tuple[str, ...]:
    """What the program needs outside the system dirs, read-only; nested paths dropped.

    Raises :class:`SandboxError` for a ``read_only`` entry that may never be bound."""
    wanted = _program_paths(argv[0], env)
    pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for item in [*argv[1:], *pythonpath]:
        if item.startswith("/") and os.path.exists(item):
            path = os.path.abspath(item)
            if bindable(path) and not under(path, _SYSTEM):
                wanted.append(path)
    for item in read_only:
        wanted.append(check_read_only(item))
    if network:
        wanted += [p for p in _NETWORK_FILES if os.path.exists(p)]
    kept: list[str] = []
    for path in sorted(set(wanted)):
        if not under(path, kept):
            kept.append(path)
    for path in kept:
        # A workspace holds the runtime's own state (the audit DB, snippets): a bind must
        # never carry it in. Refused rather than skipped, so the policy author sees why.
        if holds_state(path):
            raise SandboxError(
                f"will not bind {path!r} into a sandbox: it holds runtime state "
                f"({STATE_DIR}/); name a narrower path",
                path=path,
            )
    return tuple(kept)


def _fingerprint(caps: HostCapabilities, *, network: bool, bpf: str, mode: Mode) -> Fingerprint:
    ns = caps.user_namespaces and caps.arch_supported
    root = caps.is_root
    cg = set(caps.cgroup_writable) if root else set()
    candidates = {
        "userns": ns,
        "mountns": ns,
        "pivot_root": ns,
        "pidns": ns,
        "reaper": ns,
        "netns": ns and not network,
        "ipcns": ns,
        "utsns": ns,
        "unprivileged_uid": True,
        "no_new_privs": True,
        "pdeathsig": True,
        "capdrop": ns,
        "rlimits": True,
        "cgroup_memory": "memory" in cg,
        "cgroup_pids": "pids" in cg,
        "landlock": caps.landlock_abi > 0,
        "landlock_net": caps.landlock_abi >= 4 and not network,
        "landlock_scope": caps.landlock_abi >= 6,
        "seccomp": bool(bpf),
    }
    if network:
        del candidates["netns"], candidates["landlock_net"]  # granted, so not "missing"
    active = tuple(name for name, on in candidates.items() if on)
    missing = tuple(sorted(name for name, on in candidates.items() if not on))
    return Fingerprint(backend="process", mechanisms=active, missing=missing, mode=mode)


@dataclass(slots=True)
class LaunchPlan:
    """How to start the launcher: its argv and environment (the environment holds the plan,
    the program's own environment included: hand it to nothing but the spawn). Call
    :meth:`cleanup` once the process has exited."""

    argv: list[str]
    env: dict[str, str]
    fingerprint: Fingerprint
    cgroups: list[str] = field(default_factory=list)
    scratch: Path | None = None

    def cgroup_stats(self) -> dict[str, int]:
        return cgroups.stats(self.cgroups)

    def cleanup(self) -> None:
        cgroups.remove(self.cgroups)
        self.cgroups = []
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def plan_process(
    argv: list[str],
    *,
    env: Mapping[str, str],
    limits: ProcessLimits | None = None,
    read_only: Iterable[str] = (),
    network: bool = False,
    mode: Mode = "strict",
    name: str = "process",
    sandbox_uid: int = SANDBOX_UID,
) -> LaunchPlan:
    """Decide everything about one sandboxed process; nothing runs yet (the cgroups and,
    without user namespaces, the scratch directory are made). Strict mode raises
    :class:`SandboxUnavailable` when user namespaces, Landlock or seccomp are missing."""
    if not argv or not argv[0]:
        raise SandboxError("a sandboxed process needs a program")
    limits = limits or ProcessLimits()
    caps = host_capabilities()
    bpf = _bpf(network)
    missing = list(caps.missing_required())
    if not bpf and "seccomp" not in missing:
        missing.append("seccomp")
    if missing and mode == "strict":
        raise SandboxUnavailable(
            f"{name}: strict mode: missing isolation mechanism(s): {', '.join(missing)}",
            missing=missing,
        )
    namespaces = caps.user_namespaces and caps.arch_supported
    binds = needed_paths(list(argv), env, read_only, network=network)
    root = os.geteuid() == 0
    uid, gid = (sandbox_uid, sandbox_uid) if root else (os.getuid(), os.getgid())
    plan = LaunchPlan(
        argv=[sys.executable, "-I", "-S", "-c", _BOOT, PKG_ROOT],
        env={},
        fingerprint=_fingerprint(caps, network=network, bpf=bpf, mode=mode),
    )
    try:
        if root and caps.cgroup_writable:
            base, _errors = cgroups.bases(caps.cgroup_writable, f"{cgroups.PREFIX}{os.getpid()}")
            tag = f"process-{name}-{next(_names)}"
            plan.cgroups = cgroups.create(base, tag, asdict(limits))
        if not namespaces:
            # No mount namespace: the program's HOME/TMPDIR is a private host directory.
            plan.scratch = Path(tempfile.mkdtemp(prefix=f"runtime-{name}-"))
            if root:
                os.chown(plan.scratch, uid, gid)
    except OSError as exc:
        plan.cleanup()
        raise SandboxError(f"{name}: cannot prepare the sandbox: {exc}") from exc
    scratch = str(plan.scratch) if plan.scratch is not None else SCRATCH
    program_env = {"HOME": scratch, "TMPDIR": scratch, **env}
    spec = {
        "argv": list(argv),
        "env": program_env,
        "parent": os.getpid(),
        "drop_root": root,
        "host_uid": uid,
        "host_gid": gid,
        "userns": namespaces,
        "network": network,
        "binds": list(binds),
        "cgroup_procs": [f"{p}/cgroup.procs" for p in plan.cgroups],
        "limits": asdict(limits),
        "landlock_abi": caps.landlock_abi,
        "bpf": bpf,
        "scratch": scratch,
    }
    plan.env = {SPEC_ENV: json.dumps(spec), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    return plan


class SandboxedProcess:
    """A running sandboxed program: ``Popen``-like pipes, ``pid`` (the launcher, outside
    the namespaces: signalling it reaches the program), and :meth:`close` that leaves
    nothing behind."""

    def __init__(self, popen: subprocess.Popen[bytes], plan: LaunchPlan) -> None:
        self._popen = popen
        self._plan = plan
        self.fingerprint = plan.fingerprint

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def stdin(self) -> IO[bytes] | None:
        return self._popen.stdin

    @property
    def stdout(self) -> IO[bytes] | None:
        return self._popen.stdout

    @property
    def stderr(self) -> IO[bytes] | None:
        return self._popen.stderr

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def poll(self) -> int | None:
        return self._popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        """The exit code: the program's, ``128 + n`` when signal ``n`` killed it,
        :data:`EXIT_SETUP` when a set-up step failed (named on stderr)."""
        return self._popen.wait(timeout)

    def terminate(self) -> None:
        """SIGTERM: passed on to every process of the sandbox."""
        with contextlib.suppress(ProcessLookupError):
            self._popen.terminate()

    def kill(self) -> None:
        """SIGKILL of the launcher: pid 1 dies by its parent-death signal, and with it
        every process of the namespace."""
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()

    def close(self, grace_s: float = 2.0) -> int:
        """Close stdin, give the program ``grace_s`` to exit, then SIGTERM, then SIGKILL;
        reap, close the pipes, remove the cgroups. Returns the exit code."""
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()
        code: int | None = None
        for step in (None, self.terminate, self.kill):
            if step is not None:
                step()
            try:
                code = self._popen.wait(grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        if code is None:
            code = self._popen.wait()
        for pipe in (self._popen.stdout, self._popen.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self._plan.cleanup()
        return code

    def __enter__(self) -> SandboxedProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def spawn_sandboxed(
    argv: list[str],
    *,
    env: Mapping[str, str],
    limits: ProcessLimits | None = None,
    read_only: Iterable[str] = (),
    network: bool = False,
    mode: Mode = "strict",
    name: str = "process",
    stderr: int | IO[bytes] | None = subprocess.PIPE,
) -> SandboxedProcess:
    """Start ``argv`` in the sandbox with pipes for stdin and stdout (see the module)."""

    def spawn() -> SandboxedProcess:
        # Planned here, on the spawner thread, not the caller's: the plan makes cgroups
        # and a scratch directory, and a caller interrupted before its job ran cancels
        # the job, so only what the job made is the spawner's to end.
        plan = plan_process(
            argv,
            env=env,
            limits=limits,
            read_only=read_only,
            network=network,
            mode=mode,
            name=name,
        )
        try:
            popen = subprocess.Popen(
                plan.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=plan.env,
                cwd="/",
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            plan.cleanup()
            raise SandboxError(f"{name}: cannot start the sandbox launcher: {exc}") from exc
        return SandboxedProcess(popen, plan)

    # Forked by the spawner thread: the launcher's parent-death signal follows this
    # process, not the calling thread (see _spawner).
    return spawn_in_owner_thread(spawn, lambda proc: proc.close(grace_s=0))
