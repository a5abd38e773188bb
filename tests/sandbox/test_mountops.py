"""``mountops.c`` and ``newroot.OpList``: the new root as one list of operations, run in C
or (without the library) in Python, with the same effects and the same named failures.

The mounts themselves need a user and mount namespace: every sandbox test exercises them
(the call's whole view of the file system comes from these lists). Here: what can run in
the test process (directories, files, links) and the error paths.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.backends.sandbox import newroot, pid1
from runtime.backends.sandbox._setup import SetupFailed
from runtime.backends.sandbox.newroot import Op, OpList

pytestmark = pytest.mark.sandbox

# The operation codes (mountops.c's OP_*).
MKDIR, TOUCH, SYMLINK, MOVE_TREE, WRITE, CHDIR = 2, 3, 4, 6, 8, 9


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
