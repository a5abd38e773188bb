"""``mountops.c`` and ``newroot.OpList``: the new root as one list of operations, run in C
or (without the library) in Python, with the same effects and the same named failures.

The mounts themselves need a user and mount namespace: every sandbox test exercises them
(the call's whole view of the file system comes from these lists). Here: what can run in
the test process (directories, files, links) and the error paths.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import _linux, newroot, pid1
from runtime.backends.sandbox._setup import SetupFailed, bind
from runtime.backends.sandbox.newroot import Op, OpList

pytestmark = pytest.mark.sandbox

# The operation codes (mountops.c's OP_*).
MKDIR, TOUCH, SYMLINK, MOVE_TREE, MOUNT_DIR, WRITE, CHDIR, BIND_BENEATH = 2, 3, 4, 6, 7, 8, 9, 27


@pytest.fixture(scope="module")
def mount_ops() -> newroot.MountOps:
    return pid1.load_mount_ops(str(pid1.build()))


@pytest.fixture(params=["c", "python"])
def runner(request: pytest.FixtureRequest, mount_ops: newroot.MountOps) -> newroot.MountOps | None:
    return mount_ops if request.param == "c" else None


def _tree(root: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", oct(path.stat().st_mode & 0o777))
        else:
            out[rel] = ("file", path.read_text() + oct(path.stat().st_mode & 0o777))
    return out


def _ops(root: Path) -> OpList:
    return OpList.of(
        [
            Op(MKDIR, "one", f"{root}/d", arg=0o755),
            Op(MKDIR, "one", f"{root}/d", arg=0o755, flags=1),  # exists: fine with flag 1
            Op(MKDIR, "one", f"{root}/d/ro", arg=0o555),
            Op(TOUCH, "two", f"{root}/d/empty", arg=0o444),
            Op(SYMLINK, "two", "/proc/self/fd", f"{root}/fd"),
            Op(WRITE, "three", f"{root}/d/passwd", d="root:x:0:0\n"),
        ]
    )


def test_c_and_python_make_the_same_tree(tmp_path: Path, mount_ops: newroot.MountOps) -> None:
    old = os.umask(0)
    try:
        (tmp_path / "c").mkdir()
        (tmp_path / "py").mkdir()
        _ops(tmp_path / "c").run([], mount_ops)
        _ops(tmp_path / "py").run([], None)
    finally:
        os.umask(old)
    made = _tree(tmp_path / "c")
    assert made == _tree(tmp_path / "py")
    assert made["d/passwd"] == ("file", "root:x:0:0\n0o644")
    assert made["d/empty"] == ("file", "0o444")
    assert made["fd"] == ("link", "/proc/self/fd")


def test_a_failing_operation_names_its_phase_target_and_errno(
    tmp_path: Path, runner: newroot.MountOps | None
) -> None:
    ops = OpList.of(
        [
            Op(MKDIR, "mount_newroot", f"{tmp_path}/a", arg=0o755),
            Op(MKDIR, "mount_dev", f"{tmp_path}/missing/b", arg=0o755),
            Op(MKDIR, "mount_proc", f"{tmp_path}/never", arg=0o755),
        ]
    )
    with pytest.raises(SetupFailed) as info:
        ops.run([], runner)
    assert info.value.phase == "mount_dev"
    assert info.value.errno == errno.ENOENT
    assert "mkdir" in info.value.message and f"{tmp_path}/missing/b" in info.value.message
    # It stopped there: what came before is done, what comes after is not.
    assert (tmp_path / "a").is_dir() and not (tmp_path / "never").exists()


def test_an_existing_directory_fails_without_the_flag(
    tmp_path: Path, runner: newroot.MountOps | None
) -> None:
    ops = OpList.of([Op(MKDIR, "mount_newroot", str(tmp_path), arg=0o755)])
    with pytest.raises(SetupFailed) as info:
        ops.run([], runner)
    assert (info.value.phase, info.value.errno) == ("mount_newroot", errno.EEXIST)


def test_a_tree_slot_without_a_descriptor_is_refused(mount_ops: newroot.MountOps) -> None:
    ops = OpList.of([Op(MOVE_TREE, "mount_python", b="/nonexistent/x", arg=3)])
    with pytest.raises(SetupFailed) as info:
        ops.run([-1], mount_ops)
    assert (info.value.phase, info.value.errno) == ("mount_python", errno.EINVAL)


@pytest.mark.parametrize(
    "cut", [lambda blob: blob[:10], lambda blob: blob.rstrip(b"\0")], ids=["header", "string"]
)
def test_a_malformed_list_is_refused_not_read_past(
    tmp_path: Path, mount_ops: newroot.MountOps, cut: Callable[[bytes], bytes]
) -> None:
    blob = cut(OpList.of([Op(CHDIR, "pivot_root", str(tmp_path))]).blob)
    failed = ctypes.c_long(-1)
    assert mount_ops(blob, len(blob), None, 0, failed) == -errno.EINVAL
    assert failed.value == 0


def test_an_unknown_operation_is_refused(mount_ops: newroot.MountOps) -> None:
    blob = OpList.of([Op(99, "mount_newroot", "/")]).blob
    failed = ctypes.c_long(-1)
    assert mount_ops(blob, len(blob), None, 0, failed) == -errno.EINVAL
    with pytest.raises(SetupFailed) as info:
        OpList.of([Op(99, "mount_newroot", "/")]).run([], None)
    assert info.value.errno == errno.EINVAL


def test_the_profiles_lists_are_compiled_once() -> None:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

    plan = CallPlan(call_id="a", workspace="/w", access="ro", exec=False, limits={})
    again = CallPlan(call_id="b", workspace="/w", access="ro", exec=False, limits={})
    kwargs = {"ws": True, "py_paths": ("/p",), "state_dirs": (".runtime",), "mount_proc": True}
    first = newroot.op_lists(plan, ChildLimits(), **kwargs)  # type: ignore[arg-type]
    assert newroot.op_lists(again, ChildLimits(), **kwargs) is first  # type: ignore[arg-type]
    before, after = first
    assert before.ops[0].phase == "mount_private"
    assert after.ops[-1].phase == "root_readonly"


def _bound(root: Path, rels: tuple[str, ...], mount_ops: newroot.MountOps | None) -> Any:
    """In a forked child, in mount (and, unprivileged, user) namespaces of its own: ``root``
    bound read-only onto itself, then ``BIND_BENEATH`` of each of ``rels`` run (C or
    Python); the mount points then below ``root`` and which entries are writable, or the
    failure."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(r)
            uid, gid = os.getuid(), os.getgid()
            try:
                if uid:
                    _linux.unshare(_linux.CLONE_NEWUSER | _linux.CLONE_NEWNS)
                    for name, text in (
                        ("setgroups", "deny"),
                        ("uid_map", f"0 {uid} 1"),
                        ("gid_map", f"0 {gid} 1"),
                    ):
                        with open(f"/proc/self/{name}", "w") as f:
                            f.write(text)
                else:
                    _linux.unshare(_linux.CLONE_NEWNS)
                _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE, None)
                bind(str(root), str(root), _linux.MOUNT_ATTR_RDONLY)
                # A read-only tmpfs inside, as the state directories' are.
                _linux.mount("tmpfs", str(root / "m"), "tmpfs", 0, None)
                os.mkdir(root / "m" / "x")
                remount = _linux.MS_REMOUNT | _linux.MS_BIND | _linux.MS_RDONLY
                _linux.mount(None, str(root / "m"), None, remount, None)
                attrs = _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
                ops = [
                    Op(BIND_BENEATH, "mount_writable", str(root), rel, flags=attrs) for rel in rels
                ]
                OpList.of(ops).run([], mount_ops)
                with open("/proc/self/mountinfo") as f:
                    points = [line.split()[4] for line in f]
                inside = sorted(p[len(str(root)) + 1 :] for p in points if p.startswith(f"{root}/"))
                probes = (".", "dir", "dir/sub", "file", "other", "m", "m/x")
                writable = [p for p in probes if os.access(root / p, os.W_OK)]
                out: Any = {"mounts": inside, "writable": writable}
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
    return json.loads(data)


def test_bind_beneath_binds_only_a_real_folder_or_file_inside(
    tmp_path: Path, mount_ops: newroot.MountOps
) -> None:
    """A narrowed writable call's write prefixes (``mount_writable``): each is bound
    writable over the read-only workspace only when it is a directory or a regular file
    reached through no symlink, never above the workspace and across no mount (a state
    directory's tmpfs). Anything else is left as it is: nothing granted, no error. C and
    Python do the same."""
    root = tmp_path / "ws"
    for d in ("dir", "m", "other"):
        (root / d).mkdir(parents=True)
    (root / "file").write_text("x")
    (root / "dir" / "sub").mkdir()
    (root / "link").symlink_to("other")
    (root / "up").symlink_to("..")
    os.mkfifo(root / "fifo")
    rels = ("dir", "file", "link", "up/ws/other", "fifo", "missing", "../ws/other", "m", "m/x")
    in_c = _bound(root, rels, mount_ops)
    assert in_c == _bound(root, rels, None)
    assert in_c == {"mounts": ["dir", "file", "m"], "writable": ["dir", "dir/sub", "file"]}


@pytest.mark.parametrize(
    ("access", "narrow", "readonly", "binds"),
    [
        ("rw", {}, False, []),  # not narrowed: no mount more than before
        ("rw", {"read": ["src/**"], "write": None}, False, []),  # only reads narrowed
        ("rw", {"read": None, "write": ["**/*.py"]}, False, []),  # no prefix: whole
        ("rw", {"read": None, "write": ["out/**", "out/x/*.txt", "b.md"]}, True, ["b.md", "out"]),
        ("rw", {"read": None, "write": []}, True, []),  # writable nowhere
        ("rw", {"read": None, "write": ["out/**"], "mounts": False}, False, []),  # TEST-ONLY
        ("ro", {"read": None, "write": ["out/**"]}, True, []),
    ],
)
def test_narrowed_write_globs_make_the_workspace_read_only_under_their_binds(
    access: str, narrow: dict[str, Any], readonly: bool, binds: list[str]
) -> None:
    """The profile's list (cached per profile: the prefixes are part of its key): a call
    whose write globs are narrowed gets its workspace read-only and one ``BIND_BENEATH`` per
    write prefix, after the state directories' masks; any other call gains nothing."""
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

    plan = CallPlan("a", "/w", access, True, {}, narrow=narrow)
    kwargs = {"ws": True, "py_paths": ("/p",), "state_dirs": (".runtime",), "mount_proc": True}
    before, _after = newroot.op_lists(plan, ChildLimits(), **kwargs)  # type: ignore[arg-type]
    (tree,) = [op for op in before.ops if op.code == MOVE_TREE]
    assert bool(tree.flags & _linux.MOUNT_ATTR_RDONLY) is readonly
    bound = [op for op in before.ops if op.code == BIND_BENEATH]
    assert [op.b for op in bound] == binds
    assert all(op.a == "/tmp/workspace" and op.phase == "mount_writable" for op in bound)
    if bound:
        codes = [op.code for op in before.ops]
        assert codes.index(BIND_BENEATH) > max(i for i, c in enumerate(codes) if c == MOUNT_DIR)
