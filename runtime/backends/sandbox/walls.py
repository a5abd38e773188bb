"""The tool's walls before seccomp, and the call's identity, as operation lists run by
``mountops.c``.

``child._tool`` raises, in order: no_new_privs, the capability drop, the rlimits and the
Landlock ruleset, then seccomp (last, in Python). In a fresh copy of the fork-server each
of those Python phases cost mostly the first-touch faults of the code it ran (~0.65 ms for
~0.15 ms of system calls); as a list of records (``mountops.c`` codes 13-18) they are one
C call. The list depends only on the profile (the plan's access, exec and workspace, the
limits, the test-only switches, the Landlock ABI), so it is compiled once per profile: the
cloner compiles it (``zygote._prepare``) and every call inherits it.

Nothing is weakened: the same system calls with the same arguments in the same order as
the Python phases, which stay the path when ``mountops.so`` is not loaded (and are tested to
give the same walls and the same errors). What an attacker controls: nothing in the list;
only what is at a rule's path inside the call's new root (the workspace is the owner's). A
rule's inode is opened once (``O_PATH``) and its type read from that descriptor; the
optional system directories of an exec profile are skipped when absent or not directories,
as ``os.path.isdir`` (and, for ``/lib32`` and ``/libx32``, ``os.path.islink``) decided.

The identity (``identity_ops``: the uid/gid maps, the id drop, the parent-death signal,
the unshare of the mount, net, ipc and uts namespaces, the new session) is the first thing
the call's pid 1 does, in the phases ``child.run_call`` names; it depends only on the
fork-server's configuration, so the zygote compiles it once. Before it the process is a
copy of the cloner in the call's fresh user and pid namespaces, running none but our code.
"""

from __future__ import annotations

import functools
import os
import resource
from typing import TYPE_CHECKING

from runtime.backends.sandbox import landlock, newroot
from runtime.backends.sandbox._narrow import narrow_prefixes
from runtime.backends.sandbox.newroot import Op, OpList

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

__all__ = [
    "ADDRESS_HEADROOM_MB",
    "DIR_ONLY",
    "NOFOLLOW",
    "NPROC_MARGIN",
    "PRIORITY_RLIMITS",
    "SANDBOX_UID",
    "STRICT",
    "Rule",
    "identity_ops",
    "landlock_rules",
    "memory_rlimits",
    "narrow_prefixes",
    "nproc_rlimit",
    "present",
    "rlimits",
    "runtime_hints",
    "wall_ops",
]

# mountops.c's codes (OP_PRCTL ...) and its RULE_* bits.
_PRCTL, _CAPSET_ZERO, _RLIMIT, _LL_RULESET, _LL_RULE, _LL_RESTRICT = 13, 14, 15, 16, 17, 18
#: A rule skipped when its path is absent or not a directory (``os.path.isdir``).
DIR_ONLY = 1
#: With ``DIR_ONLY``: a symlink is skipped too (``os.path.islink``).
NOFOLLOW = 2
#: A rule whose path holds no symbolic link anywhere (``openat2`` ``RESOLVE_NO_SYMLINKS``;
#: the Python path opens it component by component ``O_NOFOLLOW``) and is a directory or a
#: regular file; else skipped, granting nothing. The workspace's owner — and any earlier
#: call that could write there — chooses what lies at these paths.
STRICT = 4
_WRITE_FILE, _SETRESGID, _SETRESUID, _SETGROUPS_NONE, _UNSHARE, _SETSID = 19, 20, 21, 22, 23, 24
_SET_NAME, _CLOSE_REST = 25, 26
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS = 1, 4, 38
_SIGKILL = 9
#: The tool's uid and gid *inside* its user namespace (``child.SANDBOX_UID``).
SANDBOX_UID = 1000

#: (path, Landlock rights, DIR_ONLY | NOFOLLOW or 0).
Rule = tuple[str, int, int]


#: Address space a process may reserve beyond ``memory_mb``, MiB. JIT runtimes reserve far
#: more than they use: node's V8 reserves ~700 MiB (its code range) before running a line,
#: HotSpot sizes its heap to what the limit leaves. With RLIMIT_AS at ``memory_mb`` (512 by
#: default) node died at start-up ("Failed to reserve virtual memory for CodeRange").
ADDRESS_HEADROOM_MB = 4096


def memory_rlimits(memory_mb: int) -> tuple[tuple[int, int], ...]:
    """(resource, value) of the per-process memory rlimits for ``memory_mb``: RLIMIT_DATA at
    ``memory_mb`` (what a process allocates: heap, private writable mappings; a reservation
    with no access is not counted), and RLIMIT_AS at ``memory_mb`` plus
    :data:`ADDRESS_HEADROOM_MB`, which bounds shared mappings too. The call as a whole is
    bounded by its memory cgroup where the host gives one (the audit names it); rlimits are
    per process either way."""
    mib = 1024 * 1024
    return (
        (resource.RLIMIT_DATA, memory_mb * mib),
        (resource.RLIMIT_AS, (memory_mb + ADDRESS_HEADROOM_MB) * mib),
    )


def runtime_hints(memory_mb: int) -> dict[str, str]:
    """Environment that tells managed runtimes the call's memory, for tools that run
    programs. The JVM and V8 size their heaps from the host's RAM (a quarter of it, 4 GiB
    here) and from RLIMIT_AS, not from RLIMIT_DATA or a cgroup they cannot see (no /sys):
    they grew their heaps past ``memory_mb`` instead of collecting, and died ("committing
    reserved memory", ``std::bad_alloc``) on programs whose live data fits. A policy's own
    ``[env] set`` of these names wins."""
    return {
        "NODE_OPTIONS": f"--max-old-space-size={max(16, memory_mb * 3 // 4)}",
        "JAVA_TOOL_OPTIONS": f"-XX:MaxRAM={memory_mb}m -XX:MaxRAMPercentage=50",
    }


#: Exec'd programs may call setpriority and sched_setscheduler (``seccomp.EXEC_EXTRA``): with
#: these at 0 (and no CAP_SYS_NICE) the kernel refuses them a lower niceness or a real-time
#: policy, whatever limits the host gave the broker.
PRIORITY_RLIMITS = ((resource.RLIMIT_NICE, 0), (resource.RLIMIT_RTPRIO, 0))


#: RLIMIT_NPROC above ``pids`` when the call has a pids cgroup, so that the cgroup is the
#: limit that refuses a fork (and counts it: the usage's ``pids_limit_hits``). The kernel
#: checks RLIMIT_NPROC first (``copy_process``, before ``cgroup_can_fork``); at the same
#: value it refused every fork the cgroup would have, and the cgroup never counted one.
#: Both count the same tasks (threads too): RLIMIT_NPROC counts, since Linux 5.14, the
#: tasks of the uid in the *user namespace* (its ucounts), and each call has a user
#: namespace of its own whose tasks are all its pid 1's descendants, all in its cgroup.
#: So one more would do; the margin covers forks racing each other (each is counted by the
#: rlimit before the cgroup charges it). Without a user namespace (test-only) the rlimit
#: counts every process of the uid on the host: then it is looser than ``pids`` anyway.
NPROC_MARGIN = 8


def nproc_rlimit(pids: int, pids_cgroup: bool) -> int:
    """RLIMIT_NPROC for ``pids``: the limit itself without a pids cgroup (the rlimit is the
    only limit), else :data:`NPROC_MARGIN` above it (the cgroup refuses first, the rlimit
    stays a backstop)."""
    return pids + NPROC_MARGIN if pids_cgroup else pids


def rlimits(limits: ChildLimits, *, pids_cgroup: bool = False) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) of every rlimit a tool gets. CPU: the soft limit sends
    SIGXCPU, the hard one (a second later) SIGKILL; it is per process, as the memory
    rlimits are. ``pids_cgroup``: the call is in a pids cgroup (:func:`nproc_rlimit`)."""
    mib = 1024 * 1024
    out = []
    for res, value in (
        (resource.RLIMIT_CPU, limits.cpu_s),
        *memory_rlimits(limits.memory_mb),
        (resource.RLIMIT_NOFILE, limits.nofile),
        (resource.RLIMIT_NPROC, nproc_rlimit(limits.pids, pids_cgroup)),
        (resource.RLIMIT_FSIZE, limits.fsize_mb * mib),
        (resource.RLIMIT_CORE, 0),
        *PRIORITY_RLIMITS,
    ):
        out.append((res, value, value + 1 if res == resource.RLIMIT_CPU else value))
    return tuple(out)


#: The write rights without the read ones: a narrowed call may write where it may not read.
_WRITE_ONLY = landlock.WRITE & ~landlock.READ


def _or_whole(prefixes: tuple[str, ...] | None) -> tuple[str, ...]:
    """The prefixes, or the workspace itself ("") when not narrowed (None)."""
    return ("",) if prefixes is None else prefixes


def landlock_rules(plan: CallPlan, workspace: str, private_tmp: bool) -> tuple[Rule, ...]:
    """The call's Landlock rules; the optional ones say how their presence is decided.

    ``plan.narrow`` (the policy's narrow ``[paths]`` read and write globs, for a call whose
    own code does not apply them: it runs programs, or it is not a built-in tool): read
    (and execute) is granted only beneath the read globs' literal prefixes, write only
    beneath the write globs' (``narrow_prefixes``); the rest of the workspace is EACCES,
    whatever program asks. A prefix that does not exist when the call starts (or holds a
    symlink) grants nothing in that call. Landlock does not govern metadata (mode, owner,
    times): for that the call's workspace is mounted read-only outside the write prefixes
    (``_narrow.write_binds``, ``newroot``)."""
    rules: list[Rule] = []
    if private_tmp:  # without a mount namespace /tmp is the host's: never grant it
        rules.append(("/tmp", landlock.WRITE | landlock.EXECUTE, 0))
    if plan.workspace and plan.access != "none":
        execute = landlock.EXECUTE if plan.exec else 0
        narrow = plan.narrow or {}
        writable = plan.access == "rw"
        reads = narrow_prefixes(narrow.get("read"))
        writes = narrow_prefixes(narrow.get("write")) if writable else None
        if reads is None and writes is None:
            access = landlock.WRITE if writable else landlock.READ
            rules.append((workspace, access | execute, 0))
        else:
            # "" is the workspace itself (not narrowed); read-only calls write nowhere.
            # An empty tuple is an empty glob list: nothing granted.
            grants = [(rel, landlock.READ | execute) for rel in _or_whole(reads)]
            if writable:
                grants += [(rel, _WRITE_ONLY) for rel in _or_whole(writes)]
            for rel, rights in grants:
                rules.append((f"{workspace}/{rel}" if rel else workspace, rights, STRICT))
    rules += [(f"/dev/{name}", landlock.RW_DEV, 0) for name in ("null", "zero", "full")]
    rules += [(f"/dev/{name}", landlock.READ_FILE, 0) for name in ("random", "urandom")]
    rules.append(("/proc", landlock.READ, 0))
    if private_tmp:  # with a mount namespace the interpreter's code is bound read-only
        rules += [(path, landlock.READ, 0) for path in newroot.python_paths()]
    if plan.tool_dir:  # a folder tool's own folder, imported by the call (bound read-only)
        rules.append((plan.tool_dir, landlock.READ, 0))
    if plan.exec:
        rules += [(path, landlock.EXEC_READ, DIR_ONLY) for path in ("/usr", "/etc")]
        rules += [(f"/{n}", landlock.EXEC_READ, DIR_ONLY | NOFOLLOW) for n in ("lib32", "libx32")]
    return tuple(rules)


def present(path: str, how: int) -> bool:
    """Whether the Python path grants a rule (what ``mountops.c`` decides from the inode;
    a ``STRICT`` rule is decided when ``landlock.apply_ruleset`` opens it)."""
    if not how & DIR_ONLY:
        return True
    return os.path.isdir(path) and not (how & NOFOLLOW and os.path.islink(path))


def wall_ops(
    abi: int,
    disable: frozenset[str],
    limits: ChildLimits,
    rules: tuple[Rule, ...],
    *,
    pids_cgroup: bool = False,
) -> OpList:
    """The walls as one list, each operation in the phase the Python path names."""
    return _wall_ops(
        abi,
        "capdrop" not in disable,
        rlimits(limits, pids_cgroup=pids_cgroup) if "rlimits" not in disable else (),
        rules if "landlock" not in disable and abi > 0 else None,
    )


@functools.lru_cache(maxsize=32)
def _wall_ops(
    abi: int,
    capdrop: bool,
    limits: tuple[tuple[int, int, int], ...],
    rules: tuple[Rule, ...] | None,
) -> OpList:
    ops = [Op(_PRCTL, "no_new_privs", arg=_PR_SET_NO_NEW_PRIVS, flags=1)]
    if capdrop:
        ops.append(Op(_CAPSET_ZERO, "capabilities"))
    for res, soft, hard in limits:
        # mountops.c takes the hard limit as the soft one plus arg's high 16 bits.
        ops.append(Op(_RLIMIT, "rlimits", arg=res | (hard - soft) << 16, flags=soft))
    if rules is not None:
        handled, tcp, scope, size = landlock.ruleset_attr(abi)
        ops.append(Op(_LL_RULESET, "landlock", arg=size | tcp << 8 | scope << 16, flags=handled))
        for path, rights, how in rules:
            ops.append(Op(_LL_RULE, "landlock", path, arg=how, flags=rights & handled))
        ops.append(Op(_LL_RESTRICT, "landlock"))
    return OpList.of(ops)


@functools.lru_cache(maxsize=8)
def identity_ops(  # noqa: PLR0917 - the cache key, one argument per part of it
    name: bytes, userns: bool, drop_root: bool, host_uid: int, host_gid: int, unshare: int
) -> OpList:
    """The call's pid 1's first steps as one list (``child._identity`` is the same in
    Python), each in the phase that names it on failure. Run with the descriptors to keep
    as its slots: every other one is closed (the zygote's control socket would let a call
    forge exit reports for other calls)."""
    ops = [Op(_SET_NAME, "fds", name.decode()), Op(_CLOSE_REST, "fds")]
    ops.append(Op(_PRCTL, "uid_map", arg=_PR_SET_DUMPABLE, flags=1))
    if userns:
        # The sandbox user (1000 inside) is the unprivileged host uid; nothing else is
        # mapped, so no file can ever be owned by "root" inside.
        ops.append(Op(_WRITE_FILE, "uid_map", "/proc/self/setgroups", d="deny"))
        ops.append(
            Op(_WRITE_FILE, "uid_map", "/proc/self/uid_map", d=f"{SANDBOX_UID} {host_uid} 1\n")
        )
        ops.append(
            Op(_WRITE_FILE, "uid_map", "/proc/self/gid_map", d=f"{SANDBOX_UID} {host_gid} 1\n")
        )
        ops.append(Op(_SETRESGID, "drop_uid", arg=SANDBOX_UID))
        ops.append(Op(_SETRESUID, "drop_uid", arg=SANDBOX_UID))
    elif drop_root:
        ops.append(Op(_SETGROUPS_NONE, "drop_uid"))
        ops.append(Op(_SETRESGID, "drop_uid", arg=host_gid))
        ops.append(Op(_SETRESUID, "drop_uid", arg=host_uid))
    # Changing ids clears both; the zygote dying must end the call.
    ops.append(Op(_PRCTL, "drop_uid", arg=_PR_SET_DUMPABLE, flags=1))
    ops.append(Op(_PRCTL, "drop_uid", arg=_PR_SET_PDEATHSIG, flags=_SIGKILL))
    if unshare:
        ops.append(Op(_UNSHARE, "unshare", flags=unshare))
    ops.append(Op(_SETSID, "session"))
    return OpList.of(ops)
