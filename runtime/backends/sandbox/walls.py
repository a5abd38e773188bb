"""The tool's walls before seccomp as one operation list, run by ``mountops.c``.

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
"""

from __future__ import annotations

import functools
import os
import resource
from typing import TYPE_CHECKING

from runtime.backends.sandbox import landlock, newroot
from runtime.backends.sandbox.newroot import Op, OpList

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

__all__ = ["DIR_ONLY", "NOFOLLOW", "Rule", "landlock_rules", "present", "rlimits", "wall_ops"]

# mountops.c's codes (OP_PRCTL ...) and its RULE_* bits.
_PRCTL, _CAPSET_ZERO, _RLIMIT, _LL_RULESET, _LL_RULE, _LL_RESTRICT = 13, 14, 15, 16, 17, 18
#: A rule skipped when its path is absent or not a directory (``os.path.isdir``).
DIR_ONLY = 1
#: With ``DIR_ONLY``: a symlink is skipped too (``os.path.islink``).
NOFOLLOW = 2
_PR_SET_NO_NEW_PRIVS = 38

#: (path, Landlock rights, DIR_ONLY | NOFOLLOW or 0).
Rule = tuple[str, int, int]


def rlimits(limits: ChildLimits) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) of every rlimit a tool gets. CPU: the soft limit sends
    SIGXCPU, the hard one (a second later) SIGKILL."""
    mib = 1024 * 1024
    out = []
    for res, value in (
        (resource.RLIMIT_CPU, limits.cpu_s),
        (resource.RLIMIT_AS, limits.memory_mb * mib),
        (resource.RLIMIT_NOFILE, limits.nofile),
        (resource.RLIMIT_NPROC, limits.pids),
        (resource.RLIMIT_FSIZE, limits.fsize_mb * mib),
        (resource.RLIMIT_CORE, 0),
    ):
        out.append((res, value, value + 1 if res == resource.RLIMIT_CPU else value))
    return tuple(out)


def landlock_rules(plan: CallPlan, workspace: str, private_tmp: bool) -> tuple[Rule, ...]:
    """The call's Landlock rules; the optional ones say how their presence is decided."""
    rules: list[Rule] = []
    if private_tmp:  # without a mount namespace /tmp is the host's: never grant it
        rules.append(("/tmp", landlock.WRITE | landlock.EXECUTE, 0))
    if plan.workspace and plan.access != "none":
        access = landlock.WRITE if plan.access == "rw" else landlock.READ
        rules.append((workspace, access | (landlock.EXECUTE if plan.exec else 0), 0))
    rules += [(f"/dev/{name}", landlock.RW_DEV, 0) for name in ("null", "zero", "full")]
    rules += [(f"/dev/{name}", landlock.READ_FILE, 0) for name in ("random", "urandom")]
    rules.append(("/proc", landlock.READ, 0))
    if private_tmp:  # with a mount namespace the interpreter's code is bound read-only
        rules += [(path, landlock.READ, 0) for path in newroot.python_paths()]
    if plan.exec:
        rules += [(path, landlock.EXEC_READ, DIR_ONLY) for path in ("/usr", "/etc")]
        rules += [(f"/{n}", landlock.EXEC_READ, DIR_ONLY | NOFOLLOW) for n in ("lib32", "libx32")]
    return tuple(rules)


def present(path: str, how: int) -> bool:
    """Whether the Python path grants a rule (what ``mountops.c`` decides from the inode)."""
    if not how & DIR_ONLY:
        return True
    return os.path.isdir(path) and not (how & NOFOLLOW and os.path.islink(path))


def wall_ops(
    abi: int,
    disable: frozenset[str],
    limits: ChildLimits,
    rules: tuple[Rule, ...],
) -> OpList:
    """The walls as one list, each operation in the phase the Python path names."""
    return _wall_ops(
        abi,
        "capdrop" not in disable,
        rlimits(limits) if "rlimits" not in disable else (),
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
