"""``walls.py``: the tool's walls before seccomp as one list run by ``mountops.c``, against
the Python phases (``child._walls``) that stay the path without the library.

Each side runs in a forked child of this process (no namespaces needed: no_new_privs, the
capability drop, the rlimits and a Landlock domain are all per-process) and reports what it
ended up with: the two must be the same, and so must their failures (phase and errno).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import _linux, child, landlock, newroot, pid1, probe, walls
from runtime.backends.sandbox._setup import SetupFailed
from runtime.backends.sandbox.newroot import Op, OpList

from .helpers import bare_config

pytestmark = pytest.mark.sandbox

ABI = probe.probe_host().landlock_abi
needs_landlock = pytest.mark.skipif(ABI < 1, reason="no Landlock on this host")
# mountops.c's codes.
PRCTL, CAPSET_ZERO, RLIMIT, LL_RULESET, LL_RULE, LL_RESTRICT = 13, 14, 15, 16, 17, 18
_RESOURCES = (
    resource.RLIMIT_CPU,
    resource.RLIMIT_DATA,
    resource.RLIMIT_AS,
    resource.RLIMIT_NOFILE,
    resource.RLIMIT_NPROC,
    resource.RLIMIT_FSIZE,
    resource.RLIMIT_CORE,
    resource.RLIMIT_NICE,
    resource.RLIMIT_RTPRIO,
)


@pytest.fixture(scope="module")
def mount_ops() -> newroot.MountOps:
    return pid1.load_mount_ops(str(pid1.build()))


def _status() -> dict[str, str]:
    with open("/proc/self/status") as f:
        rows = (line.split(":", 1) for line in f)
        return {k: v.strip() for k, v in rows if k in ("NoNewPrivs", "CapEff", "CapPrm", "CapInh")}


def _probe(path: str, write: bool = False) -> int:
    try:
        if os.path.isdir(path) and not write:
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND if write else os.O_RDONLY))
    except OSError as exc:
        return exc.errno or -1
    return 0


def _walled(
    cfg: child.ChildConfig, plan: child.CallPlan, limits: child.ChildLimits, probes: list[Any]
) -> dict[str, Any]:
    """In a forked child: the walls (C when ``cfg.mount_ops``, else Python), then what the
    process holds and what each probe (path, write) gets; or the failure."""

    def body(_report_fd: int) -> dict[str, Any]:
        # A host may give the broker nice and real-time limits (systemd's LimitNICE=,
        # LimitRTPRIO=): the walls must bring them to 0 all the same. Raising them needs
        # CAP_SYS_RESOURCE; without it they stay as they are.
        for res in (resource.RLIMIT_NICE, resource.RLIMIT_RTPRIO):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(res, (5, 5))
        workspace = child.call_workspace(cfg, plan)
        if cfg.mount_ops is not None:
            child.wall_ops(cfg, plan, limits).run([], cfg.mount_ops)
        else:
            child._walls(cfg, plan, limits, workspace)
        return {
            "status": _status(),
            "rlimits": [list(resource.getrlimit(res)) for res in _RESOURCES],
            "probes": [_probe(path, write) for path, write in probes],
        }

    return _in_child(body)


def _both(
    mount_ops: newroot.MountOps, plan: child.CallPlan, probes: list[Any], **cfg: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    # Without a mount namespace: the workspace is the host path and /tmp is not granted.
    base = {"landlock_abi": ABI, "disable": frozenset({"mountns"}), **cfg}
    limits = child.ChildLimits.from_dict(plan.limits)
    in_c = _walled(bare_config(mount_ops=mount_ops, **base), plan, limits, probes)
    in_python = _walled(bare_config(**base), plan, limits, probes)
    return in_c, in_python


@needs_landlock
@pytest.mark.parametrize("access", ["ro", "rw"])
@pytest.mark.parametrize("exec_", [False, True], ids=["python", "exec"])
def test_c_and_python_raise_the_same_walls(
    tmp_path: Path, mount_ops: newroot.MountOps, access: str, exec_: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("x")
    (tmp_path / "outside.txt").write_text("y")
    limits = {"cpu_s": 7, "memory_mb": 300, "nofile": 99, "pids": 33, "fsize_mb": 5}
    plan = child.CallPlan("c", str(ws), access, exec_, limits)
    probes = [
        (str(ws / "f.txt"), False),
        (str(ws / "f.txt"), True),
        (str(ws), False),
        (str(tmp_path / "outside.txt"), False),
        ("/dev/null", True),
        ("/proc/self/status", False),
        ("/etc/hostname", False),
        ("/usr/bin", False),
        ("/root", False),
    ]
    in_c, in_python = _both(mount_ops, plan, probes)
    assert in_c == in_python
    assert in_c["status"]["NoNewPrivs"] == "1"
    assert {in_c["status"][k] for k in ("CapEff", "CapPrm", "CapInh")} == {"0000000000000000"}
    assert in_c["rlimits"] == [
        [7, 8],
        [300 << 20, 300 << 20],  # memory_mb: what a process may allocate
        [(300 + walls.ADDRESS_HEADROOM_MB) << 20, (300 + walls.ADDRESS_HEADROOM_MB) << 20],
        [99, 99],
        [33, 33],
        [5 << 20, 5 << 20],
        [0, 0],
        [0, 0],  # RLIMIT_NICE: no lower niceness (exec'd programs may call setpriority)
        [0, 0],  # RLIMIT_RTPRIO: no real-time policy (nor sched_setscheduler)
    ]
    ok, denied = 0, errno.EACCES
    expected = [
        ok,
        ok if access == "rw" else denied,
        ok,
        denied,  # beside the workspace: no rule
        ok,
        ok,
        ok if exec_ else denied,  # /etc and /usr only for a profile that runs programs
        ok if exec_ else denied,
        denied,
    ]
    assert in_c["probes"] == expected


def test_with_a_pids_cgroup_the_cgroup_refuses_first() -> None:
    """RLIMIT_NPROC is checked by the kernel before the pids cgroup: at the same value it
    refused every fork and the cgroup's count of refusals (the usage's pids_limit_hits)
    stayed 0. With a cgroup it is a backstop above ``pids``; without one, the limit."""
    limits = child.ChildLimits.from_dict({"pids": 16})

    def nproc(got: tuple[tuple[int, int, int], ...]) -> tuple[int, int]:
        return next((soft, hard) for res, soft, hard in got if res == resource.RLIMIT_NPROC)

    assert nproc(walls.rlimits(limits)) == (16, 16)
    assert walls.NPROC_MARGIN > 0
    margin = 16 + walls.NPROC_MARGIN
    assert nproc(walls.rlimits(limits, pids_cgroup=True)) == (margin, margin)


@pytest.mark.parametrize("pids_cgroup", [False, True], ids=["rlimit-only", "cgroup"])
def test_c_and_python_set_the_same_nproc(
    tmp_path: Path, mount_ops: newroot.MountOps, pids_cgroup: bool
) -> None:
    plan = child.CallPlan("c", str(tmp_path), "ro", False, {"pids": 33})
    off = frozenset({"mountns", "landlock"})
    in_c, in_python = _both(mount_ops, plan, [], disable=off, pids_cgroup=pids_cgroup)
    assert in_c == in_python
    nproc = 33 + walls.NPROC_MARGIN if pids_cgroup else 33
    assert in_c["rlimits"][4] == [nproc, nproc]


def test_no_tool_may_raise_its_priority() -> None:
    """Exec'd programs may call setpriority and sched_setscheduler: RLIMIT_NICE and
    RLIMIT_RTPRIO at 0 keep the kernel refusing a lower niceness and a real-time policy."""
    got = walls.rlimits(child.ChildLimits.from_dict({}))
    assert (resource.RLIMIT_NICE, 0, 0) in got
    assert (resource.RLIMIT_RTPRIO, 0, 0) in got


@needs_landlock
def test_the_test_only_switches_leave_out_the_same_walls(
    tmp_path: Path, mount_ops: newroot.MountOps
) -> None:
    plan = child.CallPlan("c", str(tmp_path), "ro", False, {"nofile": 99})
    off = frozenset({"mountns", "capdrop", "rlimits", "landlock"})
    in_c, in_python = _both(mount_ops, plan, [("/root", False)], disable=off)
    assert in_c == in_python
    assert in_c["status"]["NoNewPrivs"] == "1"  # never switched off
    assert in_c["probes"] == [0 if os.geteuid() == 0 else errno.EACCES]
    assert in_c["rlimits"][3] != [99, 99]  # RLIMIT_NOFILE


@needs_landlock
def test_a_missing_rule_path_fails_landlock_with_its_errno(
    tmp_path: Path, mount_ops: newroot.MountOps
) -> None:
    plan = child.CallPlan("c", str(tmp_path / "gone"), "ro", False, {})
    in_c, in_python = _both(mount_ops, plan, [])
    assert in_c == in_python == {"failed": ["landlock", errno.ENOENT]}


def test_a_refused_rlimit_fails_rlimits_with_its_errno(
    tmp_path: Path, mount_ops: newroot.MountOps
) -> None:
    # Above fs.nr_open: refused even to root (EPERM).
    plan = child.CallPlan("c", str(tmp_path), "ro", False, {"nofile": 1 << 31})
    in_c, in_python = _both(mount_ops, plan, [])
    assert in_c == in_python == {"failed": ["rlimits", errno.EPERM]}


def test_optional_rules_are_skipped_as_the_python_path_decides(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    cases = {
        ("dir", walls.DIR_ONLY): True,
        ("file", walls.DIR_ONLY): False,
        ("gone", walls.DIR_ONLY): False,
        ("link", walls.DIR_ONLY): True,
        ("link", walls.DIR_ONLY | walls.NOFOLLOW): False,
        ("gone", 0): True,  # not optional: its absence is a failure, not a skip
    }
    for (name, how), granted in cases.items():
        assert walls.present(str(tmp_path / name), how) is granted, (name, how)


@needs_landlock
def test_optional_rules_are_skipped_in_c_too(tmp_path: Path, mount_ops: newroot.MountOps) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "f").write_text("")
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    rules = (
        (str(tmp_path / "file"), landlock.READ, walls.DIR_ONLY),
        (str(tmp_path / "gone"), landlock.READ, walls.DIR_ONLY),
        (str(tmp_path / "link"), landlock.READ, walls.DIR_ONLY | walls.NOFOLLOW),
    )
    limits = child.ChildLimits()
    ops = walls.wall_ops(ABI, frozenset({"capdrop", "rlimits"}), limits, rules)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            ops.run([], mount_ops)
            got = [_probe(str(tmp_path / n)) for n in ("file", "dir", "dir/f")]
            os.write(w, json.dumps(got).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = json.loads(os.read(r, 4096))
    os.close(r)
    os.waitpid(pid, 0)
    # Nothing granted: the file and the symlinked directory were skipped, not failed.
    assert got == [errno.EACCES] * 3


@pytest.mark.parametrize(
    "ops",
    [
        [Op(LL_RULE, "landlock", "/")],  # a rule before any ruleset
        [Op(LL_RESTRICT, "landlock")],  # a restriction without a ruleset
        [Op(LL_RULESET, "landlock", arg=12, flags=1)],  # a size no ABI has
        [Op(LL_RULESET, "landlock", arg=8, flags=1), Op(LL_RULESET, "landlock", arg=8, flags=1)],
    ],
    ids=["rule", "restrict", "size", "twice"],
)
def test_a_malformed_wall_list_is_refused(mount_ops: newroot.MountOps, ops: list[Op]) -> None:
    blob = OpList.of(ops).blob
    failed = ctypes.c_long(-1)
    assert mount_ops(blob, len(blob), None, 0, failed) == -errno.EINVAL
    assert failed.value == len(ops) - 1  # the operation that was refused


def test_a_profiles_walls_are_compiled_once() -> None:
    cfg = bare_config(landlock_abi=ABI)
    plan = child.CallPlan("a", "/w", "ro", False, {"nofile": 50})
    again = child.CallPlan("b", "/w", "ro", False, {"nofile": 50})
    first = child.wall_ops(cfg, plan, child.ChildLimits.from_dict(plan.limits))
    assert child.wall_ops(cfg, again, child.ChildLimits.from_dict(again.limits)) is first
    phases = [op.phase for op in first.ops]
    assert phases[:2] == ["no_new_privs", "capabilities"]
    assert "rlimits" in phases
    if ABI > 0:
        assert phases[-1] == "landlock"


def _identity_in_child(cfg: child.ChildConfig, fresh_userns: bool) -> dict[str, Any]:
    """In a forked child (in a user namespace of its own when ``fresh_userns``, as the
    zygote's clone makes one): the identity steps, then what the process ended up with."""
    ns = ("mnt", "net", "ipc", "uts", "user")

    def body(report_fd: int) -> dict[str, Any]:
        before = {n: os.readlink(f"/proc/self/ns/{n}") for n in ns}
        if fresh_userns:
            # As the zygote's clone does: the namespace is owned by the sandbox uid, and
            # the maps name the writer's own effective ids.
            os.setegid(cfg.host_gid)
            os.seteuid(cfg.host_uid)
            _linux.unshare(_linux.CLONE_NEWUSER)
        spare = os.open("/dev/null", os.O_RDONLY)  # closed: not kept
        child.first_steps(cfg, {report_fd})
        maps = ("uid_map", "gid_map", "setgroups")
        return {
            "maps": [Path(f"/proc/self/{m}").read_text().split() for m in maps],
            "uids": list(os.getresuid()),
            "gids": list(os.getresgid()),
            "groups": os.getgroups(),
            "session_leader": os.getsid(0) == os.getpid() == os.getpgid(0),
            "new_ns": sorted(n for n in ns if os.readlink(f"/proc/self/ns/{n}") != before[n]),
            "status": _status(),
            "dumpable": _linux.prctl(3),  # PR_GET_DUMPABLE
            "pdeathsig": _linux.get_pdeathsig(),
            "name": Path("/proc/self/comm").read_text().strip(),
            "closed": not os.path.exists(f"/proc/self/fd/{spare}"),
        }

    return _in_child(body)


@pytest.mark.skipif(os.geteuid() != 0, reason="maps an arbitrary host uid: root only")
def test_c_and_python_make_the_same_identity(mount_ops: newroot.MountOps) -> None:
    base = {"host_uid": 4321, "host_gid": 4322, "drop_root": True}
    in_c = _identity_in_child(bare_config(mount_ops=mount_ops, **base), True)
    in_python = _identity_in_child(bare_config(**base), True)
    assert in_c == in_python
    assert in_c["maps"] == [["1000", "4321", "1"], ["1000", "4322", "1"], ["deny"]]
    assert in_c["uids"] == in_c["gids"] == [1000, 1000, 1000]
    assert in_c["session_leader"] is True
    assert (in_c["dumpable"], in_c["pdeathsig"]) == (1, 9)
    assert in_c["name"] == child.CALL_NAME.decode() and in_c["closed"] is True
    assert in_c["new_ns"] == ["ipc", "mnt", "net", "user", "uts"]


@pytest.mark.skipif(os.geteuid() != 0, reason="drops host root: root only")
def test_without_a_user_namespace_root_is_dropped_the_same(mount_ops: newroot.MountOps) -> None:
    base = {"host_uid": 4321, "host_gid": 4322, "drop_root": True}
    off = frozenset({"userns", "mountns", "pidns", "netns"})
    in_c = _identity_in_child(bare_config(mount_ops=mount_ops, disable=off, **base), False)
    in_python = _identity_in_child(bare_config(disable=off, **base), False)
    assert in_c == in_python
    assert in_c["uids"] == [4321] * 3 and in_c["gids"] == [4322] * 3
    assert in_c["groups"] == [] and in_c["new_ns"] == []


def test_a_failed_identity_step_names_its_phase_and_errno(mount_ops: newroot.MountOps) -> None:
    # Not in a user namespace of its own: its uid_map was written long ago.
    in_c = _identity_in_child(bare_config(mount_ops=mount_ops), False)
    in_python = _identity_in_child(bare_config(), False)
    assert in_c == in_python
    # Root may not rewrite its map (EPERM); another user may not even open it (EACCES).
    assert in_c["failed"] in (["uid_map", errno.EPERM], ["uid_map", errno.EACCES])


def test_the_identity_is_compiled_once(mount_ops: newroot.MountOps) -> None:
    first = child.identity_ops(bare_config(mount_ops=mount_ops))
    assert child.identity_ops(bare_config()) is first
    assert [op.phase for op in first.ops][-2:] == ["unshare", "session"]


def _in_child(body: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """``body(report_fd)`` in a forked child: what it returns, or the set-up step that
    failed ({"failed": [phase, errno]}), as JSON through a pipe once the child is gone."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            try:
                out = body(w)
            except SetupFailed as exc:
                out = {"failed": [exc.phase, exc.errno]}
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    return result


@pytest.mark.parametrize(
    ("globs", "prefixes"),
    [
        (None, None),
        ((), ()),  # an empty list: nothing
        (("**",), None),
        (("src/**",), ("src",)),
        (("src/**", "src/lib/*.py", "docs/*.md", "README.md"), ("README.md", "docs", "src")),
        (("a/b/c/**", "a/b/**"), ("a/b",)),
        (("**/*.py",), None),
        (("*.md", "src/**"), None),
        (("src/[ab]/**",), ("src",)),
        (("src/?x/**",), ("src",)),
        # An empty, '.' or '..' segment matches no normalised path: the glob grants
        # nothing (it was read as "no literal head", None: the whole workspace). The policy
        # loader rewrites or refuses such globs; this is the fail-closed backstop.
        (("./src/**",), ()),
        (("/workspace/src/**",), ()),
        (("src/",), ()),
        (("",), ()),
        (("a/../b/**",), ()),
        (("./src/**", "out/**"), ("out",)),
        (("./src/**", "**/*.py"), None),  # a wildcard head still means anywhere
    ],
)
def test_narrow_globs_become_their_literal_prefixes(
    globs: tuple[str, ...] | None, prefixes: tuple[str, ...] | None
) -> None:
    assert walls.narrow_prefixes(globs) == prefixes


@needs_landlock
@pytest.mark.parametrize("exec_", [False, True], ids=["python", "exec"])
def test_c_and_python_narrow_the_workspace_the_same(
    tmp_path: Path, mount_ops: newroot.MountOps, exec_: bool
) -> None:
    ws = tmp_path / "ws"
    for name in ("src", "out", "secrets"):
        (ws / name).mkdir(parents=True)
    (ws / "src" / "a.txt").write_text("x")
    (ws / "out" / "o.txt").write_text("x")
    (ws / "secrets" / "s.txt").write_text("x")
    (ws / "top.txt").write_text("x")
    (ws / "lnk").symlink_to("secrets")  # a read glob's prefix that is a symlink
    narrow = {"read": ["src/**", "lnk/**", "missing/**"], "write": ["out/**"]}
    plan = child.CallPlan("c", str(ws), "rw", exec_, {}, narrow=narrow)
    probes = [
        (str(ws / "src" / "a.txt"), False),
        (str(ws / "src" / "a.txt"), True),  # readable, not writable
        (str(ws / "out" / "o.txt"), True),  # writable ...
        (str(ws / "out" / "o.txt"), False),  # ... not readable (out/** is no read glob)
        (str(ws / "secrets" / "s.txt"), False),
        (str(ws / "lnk" / "s.txt"), False),
        (str(ws / "top.txt"), False),
        (str(ws), False),
    ]
    in_c, in_python = _both(mount_ops, plan, probes)
    assert in_c == in_python
    ok, denied = 0, errno.EACCES
    assert in_c["probes"] == [ok, denied, ok, denied, denied, denied, denied, denied]


@needs_landlock
def test_a_read_only_call_is_narrowed_to_reading(
    tmp_path: Path, mount_ops: newroot.MountOps
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "o.txt").write_text("x")
    narrow = {"read": None, "write": ["out/**"]}
    plan = child.CallPlan("c", str(tmp_path), "ro", True, {}, narrow=narrow)
    probes = [(str(tmp_path / "out" / "o.txt"), False), (str(tmp_path / "out" / "o.txt"), True)]
    in_c, in_python = _both(mount_ops, plan, probes)
    assert in_c == in_python
    assert in_c["probes"] == [0, errno.EACCES]


@needs_landlock
def test_an_empty_glob_list_grants_nothing(tmp_path: Path, mount_ops: newroot.MountOps) -> None:
    (tmp_path / "f.txt").write_text("x")
    narrow = {"read": ["f.txt"], "write": []}
    plan = child.CallPlan("c", str(tmp_path), "rw", True, {}, narrow=narrow)
    probes = [(str(tmp_path / "f.txt"), False), (str(tmp_path / "f.txt"), True)]
    in_c, in_python = _both(mount_ops, plan, probes)
    assert in_c == in_python
    assert in_c["probes"] == [0, errno.EACCES]
