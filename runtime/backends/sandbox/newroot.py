"""The call's file system view: a fresh root on a tmpfs, then pivot_root (pid 1 runs this).

What the tool sees: ``/workspace`` (the workspace, read-only or read-write, runtime state
dirs hidden, what the policy denies masked: see :mod:`.masks`), a private size-capped
``/tmp``, a minimal ``/dev``, ``/proc`` of its own pid
namespace (sysctl and friends read-only), and only for tools that execute programs the
system directories read-only plus a few generated ``/etc`` files. Never ``/home``, ``/root``,
``/run``, ``/var`` or the host's ``/proc``.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
import sysconfig
from collections.abc import Mapping
from typing import TYPE_CHECKING

from runtime.backends.sandbox import _linux, masks
from runtime.backends.sandbox._setup import Phase, bind, touch

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

__all__ = ["WORKSPACE", "build", "python_paths"]

WORKSPACE = "/workspace"
_NEWROOT = "/tmp"  # any existing host directory serves as the mount point of the new root
_DEVICES = ("null", "zero", "full", "random", "urandom")
_PROC_RO = ("sys", "sysrq-trigger", "irq", "bus", "fs")
_ETC_BIND = ("ld.so.cache", "nsswitch.conf")
_ETC_USERS = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\n"
)
_ETC_GROUP = "root:x:0:\nsandbox:x:1000:\n"
_ETC_HOSTS = "127.0.0.1 localhost\n::1 localhost\n"
# Sources of the masks over denied paths: an empty file and an empty directory on the new
# root's tmpfs (read-only once pivoted). The tool may see them at /.masked; they hold nothing.
_MASKED = "/.masked"


@functools.cache
def python_paths() -> tuple[str, ...]:
    """The interpreter's own code, bound read-only into every call: the standard library and
    site-packages (lazy imports, ``encodings`` look-ups, package data such as ``tzdata``).
    Code only, never the broker's files: a source checkout (an editable install, or
    ``PYTHONPATH``) is not bound — the fork-server has imported the ``runtime`` modules a tool
    uses before it forks — so the checkout and a workspace inside it stay unreachable except at
    ``/workspace``, where runtime state is hidden."""
    found: set[str] = set()
    paths = sysconfig.get_paths()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        found.add(paths[key])
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages")):
            found.add(entry)
    real = sorted({os.path.realpath(p) for p in found if os.path.isdir(p)})
    # Drop paths nested in another: one bind covers them.
    kept: list[str] = []
    for path in real:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


def build(
    plan: CallPlan,
    limits: ChildLimits,
    ws_fd: int,
    py_fds: Mapping[str, int],
    *,
    state_dirs: tuple[str, ...],
    mount_proc: bool,
) -> None:
    """Run by pid 1 of the call: the new root on a tmpfs, pivot_root, old root detached."""
    root = _NEWROOT
    ro_dev = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID
    ro = ro_dev | _linux.MOUNT_ATTR_NODEV
    with Phase("mount_private"):
        # Nothing we mount may propagate back to the host.
        _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE, None)
    with Phase("mount_newroot"):
        _linux.mount(
            "tmpfs",
            root,
            "tmpfs",
            _linux.MS_NOSUID | _linux.MS_NODEV,
            "size=1m,nr_inodes=1024,mode=0755",
        )
        for d in ("tmp", "dev", "proc", "workspace"):
            os.mkdir(f"{root}/{d}", 0o755)
        spec = masks.MaskSpec.from_plan(plan.masks)
        if spec and ws_fd >= 0:
            os.mkdir(f"{root}{_MASKED}", 0o755)
            os.mkdir(f"{root}{_MASKED}/dir", 0o555)
            os.close(os.open(f"{root}{_MASKED}/file", os.O_CREAT | os.O_WRONLY, 0o444))
    with Phase("mount_workspace"):
        if ws_fd >= 0:
            attrs = _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
            if plan.access != "rw":
                attrs |= _linux.MOUNT_ATTR_RDONLY
            _linux.mount_setattr(ws_fd, attrs)
            _linux.move_mount(ws_fd, f"{root}{WORKSPACE}")
            # Runtime state inside the workspace is hidden under an empty read-only tmpfs.
            for name in state_dirs:
                target = f"{root}{WORKSPACE}/{name}"
                try:
                    st = os.lstat(target)
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    _linux.mount(
                        "tmpfs",
                        target,
                        "tmpfs",
                        _linux.MS_RDONLY | _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC,
                        "size=4k,nr_inodes=1,mode=0555",
                    )
    with Phase("mount_masks"):
        # What the policy denies, masked before any tool exists (the kernel is the wall; the
        # broker's path checks only see argument strings). A failure fails the call closed.
        if spec and ws_fd >= 0:
            masks.apply(
                f"{root}{WORKSPACE}",
                spec,
                empty_file=f"{root}{_MASKED}/file",
                empty_dir=f"{root}{_MASKED}/dir",
            )
    with Phase("mount_tmp"):
        tmp_mb = max(1, min(limits.fsize_mb, limits.memory_mb))
        _linux.mount(
            "tmpfs",
            f"{root}/tmp",
            "tmpfs",
            _linux.MS_NOSUID | _linux.MS_NODEV,
            f"size={tmp_mb}m,nr_inodes=16384,mode=1777",
        )
    with Phase("mount_dev"):
        _linux.mount(
            "tmpfs",
            f"{root}/dev",
            "tmpfs",
            _linux.MS_NOSUID | _linux.MS_NOEXEC,
            "size=64k,nr_inodes=64,mode=0755",
        )
        for name in _DEVICES:
            touch(f"{root}/dev/{name}")
            bind(f"/dev/{name}", f"{root}/dev/{name}", _linux.MOUNT_ATTR_NOSUID)
        os.symlink("/proc/self/fd", f"{root}/dev/fd")
        for i, name in enumerate(("stdin", "stdout", "stderr")):
            os.symlink(f"/proc/self/fd/{i}", f"{root}/dev/{name}")
    with Phase("mount_system"):
        # Only tools that execute programs see the system directories, read-only.
        if plan.exec:
            os.mkdir(f"{root}/usr", 0o755)
            bind("/usr", f"{root}/usr", ro)
            for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
                host = f"/{name}"
                if os.path.islink(host):
                    os.symlink(os.readlink(host), f"{root}/{name}")
                elif os.path.isdir(host):
                    os.mkdir(f"{root}/{name}", 0o755)
                    bind(host, f"{root}/{name}", ro)
            os.mkdir(f"{root}/etc", 0o755)
            for name, text in (
                ("passwd", _ETC_USERS),
                ("group", _ETC_GROUP),
                ("hosts", _ETC_HOSTS),
            ):
                with open(f"{root}/etc/{name}", "w", encoding="utf-8") as f:
                    f.write(text)
            for name in _ETC_BIND:
                if os.path.isfile(f"/etc/{name}"):
                    touch(f"{root}/etc/{name}")
                    bind(f"/etc/{name}", f"{root}/etc/{name}", ro)
    with Phase("mount_python"):
        # Detached read-only trees (the interpreter's code; for a long-lived sandboxed
        # process also what its command needs). A single file binds onto an empty file.
        for path, fd in py_fds.items():
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.makedirs(f"{root}{path}", 0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(f"{root}{path}"), 0o755, exist_ok=True)
                touch(f"{root}{path}")
            _linux.move_mount(fd, f"{root}{path}")
    with Phase("mount_proc"):
        # /proc of the new pid namespace: mounted while the host's /proc is still visible
        # (the kernel requires a fully visible proc before a user namespace may mount one).
        if mount_proc:
            _linux.mount(
                "proc",
                f"{root}/proc",
                "proc",
                _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC,
                None,
            )
            for name in _PROC_RO:
                path = f"{root}/proc/{name}"
                if os.path.exists(path):
                    bind(path, path, ro)
    with Phase("pivot_root"):
        # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves
        # no path back to the host tree.
        os.chdir(root)
        _linux.pivot_root(".", ".")
        _linux.umount2(".", _linux.MNT_DETACH)
        os.chdir("/")
    with Phase("root_readonly"):
        fd = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            _linux.mount_setattr(fd, _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID)
        finally:
            os.close(fd)
