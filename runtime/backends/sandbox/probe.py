"""What this host offers the sandbox: ``probe_host()`` for ``runtime doctor`` and strict mode.

Each probe asks the kernel (a forked child tries ``unshare``; Landlock reports its ABI; the
seccomp status comes from ``prctl``) rather than reading version strings: a kernel built
without a feature, or a sysctl that turns it off, answers with an errno, and that is the truth.
"""

from __future__ import annotations

import errno
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from runtime.backends.sandbox import _linux

__all__ = ["HostCapabilities", "limit_scopes", "probe_host"]

#: Mechanisms strict mode requires (names as in the fingerprint).
REQUIRED = ("userns", "landlock", "seccomp")


@dataclass(frozen=True, slots=True)
class HostCapabilities:
    """The isolation mechanisms the kernel lets this process use."""

    arch_supported: bool
    is_root: bool
    user_namespaces: bool
    user_namespaces_error: str | None
    pivot_root: bool
    idmapped_mounts: bool
    landlock_abi: int
    seccomp: bool
    seccomp_filter: bool
    cgroup_version: int | None
    cgroup_writable: tuple[str, ...] = field(default=())

    @property
    def landlock(self) -> bool:
        return self.landlock_abi > 0

    def missing_required(self) -> tuple[str, ...]:
        have = {
            "userns": self.arch_supported and self.user_namespaces and self.pivot_root,
            "landlock": self.landlock,
            "seccomp": self.arch_supported and self.seccomp_filter,
        }
        return tuple(name for name in REQUIRED if not have[name])

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cgroup_writable"] = list(self.cgroup_writable)
        data["landlock"] = self.landlock
        data["missing_required"] = list(self.missing_required())
        return data


def limit_scopes(caps: HostCapabilities, *, cgroups: bool = True) -> dict[str, Any]:
    """What each process-count and memory limit bounds on this host (``runtime doctor``):
    a sentence per limit, and ``per_process_only``, the limits that bound each process
    but not the call as a whole. ``cgroups``: whether this kind of sandbox uses the
    writable cgroups at all (a long-lived server's, only when the broker is root).

    Strict mode runs without cgroups (rlimits alone, and the audit's fingerprint says
    which): this is where a user learns it before the first call. ``cpu_s`` is RLIMIT_CPU
    everywhere, per process. ``pids`` stays a bound of the call without a cgroup:
    RLIMIT_NPROC counts the uid's tasks in the call's own user namespace (Linux >= 5.14),
    but a fork it refuses is counted nowhere (no ``pids_limit_hits``)."""
    writable = set(caps.cgroup_writable) if cgroups else set()
    per_process = ["cpu_s"]
    scopes: dict[str, Any] = {"cpu_s": "each process (RLIMIT_CPU), never the call as a whole"}
    if "memory" in writable:
        scopes["memory_mb"] = "the call as a whole (memory cgroup) and each process (RLIMIT_DATA)"
    else:
        per_process.append("memory_mb")
        scopes["memory_mb"] = (
            "each process only (RLIMIT_DATA): no memory cgroup this user may write, so a "
            "call's processes together may hold more"
        )
    if "pids" in writable:
        scopes["pids"] = "the call as a whole (pids cgroup; a refused fork is pids_limit_hits)"
    elif caps.user_namespaces:
        scopes["pids"] = (
            "the call as a whole (RLIMIT_NPROC, counted in its own user namespace); no pids "
            "cgroup this user may write, so a refused fork is not counted"
        )
    else:
        per_process.append("pids")
        scopes["pids"] = (
            "RLIMIT_NPROC only, without a user namespace: it counts every process of the "
            "sandbox's uid on this host, not the call's"
        )
    scopes["per_process_only"] = per_process
    return scopes


def _probe_userns() -> str | None:
    """Fork a child that unshares every namespace the sandbox uses; None when it worked."""
    if not _linux.SUPPORTED:
        return "unsupported architecture"
    flags = (
        _linux.CLONE_NEWUSER
        | _linux.CLONE_NEWNS
        | _linux.CLONE_NEWPID
        | _linux.CLONE_NEWNET
        | _linux.CLONE_NEWIPC
        | _linux.CLONE_NEWUTS
    )
    uid = os.geteuid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            if uid == 0:
                # Root probes what the sandbox does: drop to an unprivileged uid first.
                os.setgroups([])
                os.setresgid(65534, 65534, 65534)
                os.setresuid(65534, 65534, 65534)
            _linux.unshare(flags)
        except OSError as exc:
            code = min(exc.errno or 1, 255)
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    if code < 0:
        return f"probe killed by signal {-code}"
    return f"unshare: {errno.errorcode.get(code, str(code))}"


def _landlock_abi() -> int:
    if not _linux.SUPPORTED:
        return 0
    try:
        # LANDLOCK_CREATE_RULESET_VERSION = 1: returns the ABI version, creates nothing.
        return _linux.landlock_create_ruleset(None, 1)
    except OSError:
        return 0


def _seccomp() -> tuple[bool, bool]:
    try:
        _linux.prctl(21)  # PR_GET_SECCOMP: 0 when seccomp exists and we are not filtered
    except OSError as exc:
        return (exc.errno != errno.EINVAL, False)
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail", encoding="ascii") as f:
            actions = f.read().split()
    except OSError:
        return (True, False)
    return (True, "errno" in actions and "kill_process" in actions)


def _cgroups() -> tuple[int | None, tuple[str, ...]]:
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        return 2, ()  # v2 delegation is not used by this backend yet
    writable = tuple(
        name
        for name in ("memory", "pids")
        if os.path.isdir(f"/sys/fs/cgroup/{name}") and os.access(f"/sys/fs/cgroup/{name}", os.W_OK)
    )
    return (1 if os.path.isdir("/sys/fs/cgroup/memory") or writable else None), writable


def probe_host() -> HostCapabilities:
    userns_error = _probe_userns()
    seccomp, seccomp_filter = _seccomp()
    cg_version, cg_writable = _cgroups()
    root = os.geteuid() == 0
    return HostCapabilities(
        arch_supported=_linux.SUPPORTED,
        is_root=root,
        user_namespaces=userns_error is None,
        user_namespaces_error=userns_error,
        # pivot_root needs only a mount namespace we own, which the userns probe created.
        pivot_root=userns_error is None,
        # Idmapped mounts of host filesystems need CAP_SYS_ADMIN in the initial namespace.
        idmapped_mounts=root and _linux.SUPPORTED,
        landlock_abi=_landlock_abi(),
        seccomp=seccomp,
        seccomp_filter=seccomp_filter,
        cgroup_version=cg_version,
        cgroup_writable=cg_writable,
    )
