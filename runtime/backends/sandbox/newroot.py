"""The call's file system view: a fresh root on a tmpfs, then pivot_root (pid 1 runs this).

What the tool sees: ``/workspace`` (the workspace, read-only or read-write — or, for a call
whose write globs are narrowed, read-only with only the write globs' prefixes bound
read-write over it: ``_narrow.write_binds`` — runtime state dirs hidden, what the policy
denies masked: see :mod:`.masks`), a private size-capped
``/tmp``, a minimal ``/dev``, ``/proc`` of its own pid
namespace (sysctl and friends read-only), and only for tools that execute programs the
system directories read-only plus a few generated ``/etc`` files. Never ``/home``, ``/root``,
``/run``, ``/var`` or the host's ``/proc``.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import stat
import struct
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from runtime.backends.sandbox import _linux, masks
from runtime.backends.sandbox._narrow import write_binds
from runtime.backends.sandbox._setup import Phase, SetupFailed, bind

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan, ChildLimits

__all__ = [
    "WORKSPACE",
    "MountOps",
    "Op",
    "OpList",
    "build",
    "op_lists",
    "python_paths",
    "tree_paths",
]

WORKSPACE = "/workspace"
_NEWROOT = "/tmp"  # any existing host directory serves as the mount point of the new root
_DEVICES = ("null", "zero", "full", "random", "urandom")
_PROC_RO = ("sys", "sysrq-trigger", "irq", "bus", "fs")
#: Host files bound read-only for tools that run programs (a symlink is followed): the
#: loader's cache, name service order, the time zone (``date`` said UTC on any host) and
#: the locale aliases.
_ETC_BIND = ("ld.so.cache", "nsswitch.conf", "localtime", "locale.alias")
#: Directories of /etc that programs in /usr reach through symlinks, bound read-only for tools
#: that run programs (globs, expanded on the host). Debian's alternatives: /usr/bin/awk,
#: which, cc, java, vi… link through /etc/alternatives, and were "not found" without it.
#: Debian's JDK links its conf/ files (java.security…) into /etc/java-N-openjdk: java
#: failed with "Error loading java.security file"; Debian's maven its conf and m2.conf into
#: /etc/maven (``mvn`` could not start). Configuration only, no secrets.
_ETC_TREES = ("/etc/alternatives", "/etc/java-*", "/etc/maven")
_ETC_USERS = (
    "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\n"
)
_ETC_GROUP = "root:x:0:\nsandbox:x:1000:\n"
#: The uts namespace names the host "sandbox" (``child``, ``_launcher``): resolvable, or
#: Java's InetAddress.getLocalHost() and ``hostname -f`` failed on a DNS lookup.
_ETC_HOSTS = "127.0.0.1 localhost\n127.0.1.1 sandbox\n::1 localhost\n"
# Sources of the masks over denied paths: an empty file and an empty directory on the new
# root's tmpfs (read-only once pivoted). The tool may see them at /.masked; they hold nothing.
_MASKED = "/.masked"


@functools.cache
@functools.lru_cache(maxsize=1)
def etc_trees() -> tuple[str, ...]:
    """The :data:`_ETC_TREES` this host has: real directories, not symlinks."""
    found = (p for pattern in _ETC_TREES for p in sorted(glob.glob(pattern)))
    return tuple(p for p in found if os.path.isdir(p) and not os.path.islink(p))


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


def tree_paths(plan: CallPlan) -> tuple[str, ...]:
    """The read-only trees of a call's new root, each bound at its own path: the
    interpreter's code (``python_paths``) and a folder tool's folder (``plan.tool_dir``)."""
    return (*python_paths(), plan.tool_dir) if plan.tool_dir else python_paths()


#: What ``mountops.c`` runs: ``runtime_mount_ops(ops, len, slots, nslots, &failed)``.
MountOps = Callable[[bytes, int, Any, int, Any], int]

# Operation codes: keep in step with mountops.c's OP_*.
_MOUNT, _MKDIR, _TOUCH, _SYMLINK, _BIND, _MOVE_TREE, _MOUNT_DIR = 1, 2, 3, 4, 5, 6, 7
_WRITE, _CHDIR, _PIVOT, _UMOUNT, _SETATTR = 8, 9, 10, 11, 12
_BIND_BENEATH = 27
#: How ``_BIND_BENEATH`` resolves its path: never above its directory, through no symlink
#: (nor /proc magic link), across no mount (a state directory's tmpfs is one).
_BENEATH = (
    _linux.RESOLVE_BENEATH
    | _linux.RESOLVE_NO_SYMLINKS
    | _linux.RESOLVE_NO_MAGICLINKS
    | _linux.RESOLVE_NO_XDEV
)
_OP_NAMES = {
    _MOUNT: "mount",
    _MKDIR: "mkdir",
    _TOUCH: "touch",
    _SYMLINK: "symlink",
    _BIND: "bind",
    _MOVE_TREE: "move_mount",
    _MOUNT_DIR: "mount",
    _WRITE: "write",
    _CHDIR: "chdir",
    _PIVOT: "pivot_root",
    _UMOUNT: "umount2",
    # The walls (``walls.py``), run only in C: without it ``child`` runs its phases.
    13: "prctl",
    14: "capset",
    15: "setrlimit",
    16: "landlock_create_ruleset",
    17: "landlock_add_rule",
    18: "landlock_restrict_self",
    # The call's identity (``walls.identity_ops``).
    19: "write",
    20: "setresgid",
    21: "setresuid",
    22: "setgroups",
    23: "unshare",
    24: "setsid",
    25: "prctl(PR_SET_NAME)",
    26: "close_range",
    _SETATTR: "mount_setattr",
    _BIND_BENEATH: "bind",
}
_RECORD = struct.Struct("<HHIQ")  # mountops.c's struct op: code, phase, arg, flags


@dataclass(frozen=True, slots=True)
class Op:
    """One set-up operation (``mountops.c`` documents each code): strings ``a``..``d``, ""
    for none; ``arg`` a mode, a slot (the descriptor array's index) or a flag; ``flags``
    mount flags or mount attributes."""

    code: int
    phase: str
    a: str = ""
    b: str = ""
    c: str = ""
    d: str = ""
    arg: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True)
class OpList:
    """Operations in order, and the same encoded for ``mountops.c``."""

    ops: tuple[Op, ...]
    blob: bytes
    phases: tuple[str, ...]

    @classmethod
    def of(cls, ops: list[Op]) -> OpList:
        phases = tuple(dict.fromkeys(op.phase for op in ops))
        parts = []
        for op in ops:
            strings = b"".join(x.encode() + b"\0" for x in (op.a, op.b, op.c, op.d))
            record = _RECORD.pack(op.code, phases.index(op.phase), op.arg, op.flags) + strings
            parts.append(record + b"\0" * (-len(record) % 8))
        return cls(tuple(ops), b"".join(parts), phases)

    def run(self, slots: list[int], mount_ops: MountOps | None) -> None:
        """Every operation in order (``slots``: the descriptors ``_MOVE_TREE`` moves), in C
        when ``mount_ops`` is given; the first failure raises ``SetupFailed`` naming its
        phase, the operation and its target, with the kernel's errno."""
        if mount_ops is None:
            for op in self.ops:
                try:
                    _run_one(op, slots)
                except OSError as exc:
                    raise _failed(op, exc.errno or 22) from exc
            return
        failed = ctypes.c_long(0)
        res = mount_ops(
            self.blob, len(self.blob), (ctypes.c_int * len(slots))(*slots), len(slots), failed
        )
        if res < 0:
            raise _failed(self.ops[min(failed.value, len(self.ops) - 1)], -res)


def _failed(op: Op, err: int) -> SetupFailed:
    """The set-up error of a failed operation: its phase, errno, what it did and where."""
    what = f"{_OP_NAMES.get(op.code, op.code)} {op.b or op.a}: {os.strerror(err)}"
    return SetupFailed(op.phase, OSError(err, what))


def _run_one(op: Op, slots: list[int]) -> None:
    """One operation in Python (no ``mountops.c``): the same effects, the same errors."""
    code = op.code
    if code in (_MOUNT, _MOUNT_DIR):
        if code == _MOUNT_DIR:
            try:
                if not stat.S_ISDIR(os.lstat(op.b).st_mode):
                    return
            except (FileNotFoundError, NotADirectoryError):
                return
        _linux.mount(op.a or None, op.b, op.c or None, op.flags, op.d or None)
    elif code == _MKDIR:
        try:
            os.mkdir(op.a, op.arg)
        except FileExistsError:
            if not op.flags & 1:
                raise
    elif code == _TOUCH:
        os.close(os.open(op.a, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, op.arg))
    elif code == _SYMLINK:
        os.symlink(op.a, op.b)
    elif code == _BIND:
        try:
            bind(op.a, op.b, op.flags)
        except FileNotFoundError:
            if not op.arg:
                raise
    elif code == _MOVE_TREE:
        fd = slots[op.arg]
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.makedirs(op.b, 0o755, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(op.b), 0o755, exist_ok=True)
            os.close(os.open(op.b, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
        if op.flags:
            _linux.mount_setattr(fd, op.flags)
        _linux.move_mount(fd, op.b)
    elif code == _WRITE:
        fd = os.open(op.a, os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(op.d.encode())
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    elif code == _CHDIR:
        os.chdir(op.a)
    elif code == _PIVOT:
        _linux.pivot_root(op.a, op.b)
    elif code == _UMOUNT:
        _linux.umount2(op.a, op.flags)
    elif code == _SETATTR:
        fd = os.open(op.a, os.O_PATH | os.O_CLOEXEC)
        try:
            _linux.mount_setattr(fd, op.flags)
        finally:
            os.close(fd)
    elif code == _BIND_BENEATH:
        _bind_beneath(op.a, op.b, op.flags)
    else:
        raise OSError(22, f"unknown set-up operation {code}")  # EINVAL


def _bind_beneath(directory: str, rel: str, attrs: int) -> None:
    """``rel`` beneath ``directory`` bound onto itself writable (``mountops.c``'s
    ``OP_BIND_BENEATH``): resolved by ``openat2`` with ``_BENEATH``, and only a directory or
    a regular file; anything else there (absent, a symlink or a mount on the way, a device)
    is left as it is, granting nothing."""
    dfd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = _linux.openat2(dfd, rel, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, _BENEATH)
    except OSError:
        return
    finally:
        os.close(dfd)
    try:
        if stat.S_IFMT(os.fstat(fd).st_mode) not in (stat.S_IFDIR, stat.S_IFREG):
            return
        flags = _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC | _linux.AT_EMPTY_PATH
        tree = _linux._sys("open_tree", fd, b"", flags)
        try:
            _linux.mount_setattr(tree, attrs, attr_clr=_linux.MOUNT_ATTR_RDONLY)
            _linux.move_mount_onto(tree, fd)
        finally:
            os.close(tree)
    finally:
        os.close(fd)


def op_lists(
    plan: CallPlan,
    limits: ChildLimits,
    *,
    ws: bool,
    py_paths: tuple[str, ...],
    state_dirs: tuple[str, ...],
    mount_proc: bool,
) -> tuple[OpList, OpList]:
    """The new root as two operation lists, before and after the mask walk (Python's, in
    ``build``). Cached per profile: the cloner compiles a profile's lists once and every call
    inherits them. Descriptor slots: 0 the workspace tree, then ``py_paths``'s trees."""
    masked = bool(masks.MaskSpec.from_plan(plan.masks)) and ws
    tmp_mb = max(1, min(limits.fsize_mb, limits.memory_mb))
    binds = write_binds(plan) if ws else None
    return _op_lists(
        plan.access, plan.exec, ws, py_paths, state_dirs, mount_proc, masked, tmp_mb, binds
    )


@functools.lru_cache(maxsize=32)
def _op_lists(  # noqa: PLR0917 - the cache key, one argument per part of the profile
    access: str,
    exec_: bool,
    ws: bool,
    py_paths: tuple[str, ...],
    state_dirs: tuple[str, ...],
    mount_proc: bool,
    masked: bool,
    tmp_mb: int,
    binds: tuple[str, ...] | None,
) -> tuple[OpList, OpList]:
    root = _NEWROOT
    ro_dev = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID
    ro = ro_dev | _linux.MOUNT_ATTR_NODEV
    before: list[Op] = []
    add = before.append
    # Nothing we mount may propagate back to the host.
    add(Op(_MOUNT, "mount_private", b="/", flags=_linux.MS_REC | _linux.MS_PRIVATE))
    phase = "mount_newroot"
    nosuid_nodev = _linux.MS_NOSUID | _linux.MS_NODEV
    add(
        Op(
            _MOUNT,
            phase,
            "tmpfs",
            root,
            "tmpfs",
            "size=1m,nr_inodes=1024,mode=0755",
            flags=nosuid_nodev,
        )
    )
    for d in ("tmp", "dev", "proc", "workspace"):
        add(Op(_MKDIR, phase, f"{root}/{d}", arg=0o755))
    if masked:
        add(Op(_MKDIR, phase, f"{root}{_MASKED}", arg=0o755))
        add(Op(_MKDIR, phase, f"{root}{_MASKED}/dir", arg=0o555))
        add(Op(_TOUCH, phase, f"{root}{_MASKED}/file", arg=0o444))
    if ws:
        phase = "mount_workspace"
        writable = _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
        attrs = writable
        if access != "rw" or binds is not None:
            attrs |= _linux.MOUNT_ATTR_RDONLY
        add(Op(_MOVE_TREE, phase, b=f"{root}{WORKSPACE}", arg=0, flags=attrs))
        # Runtime state inside the workspace is hidden under an empty read-only tmpfs.
        hidden = _linux.MS_RDONLY | _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
        for name in state_dirs:
            target = f"{root}{WORKSPACE}/{name}"
            add(
                Op(
                    _MOUNT_DIR,
                    phase,
                    "tmpfs",
                    target,
                    "tmpfs",
                    "size=4k,nr_inodes=1,mode=0555",
                    flags=hidden,
                )
            )
        # Narrowed write globs (``_narrow.write_binds``): the workspace is read-only, the
        # write prefixes are bound writable over it. After the state directories (a prefix
        # through one crosses its tmpfs: refused) and before the masks, which ``build``
        # mounts on top of these binds (a denied entry inside a prefix stays masked).
        for rel in binds or ():
            add(Op(_BIND_BENEATH, "mount_writable", f"{root}{WORKSPACE}", rel, flags=writable))
    after: list[Op] = []
    add = after.append
    add(
        Op(
            _MOUNT,
            "mount_tmp",
            "tmpfs",
            f"{root}/tmp",
            "tmpfs",
            f"size={tmp_mb}m,nr_inodes=16384,mode=1777",
            flags=nosuid_nodev,
        )
    )
    phase = "mount_dev"
    dev_flags = _linux.MS_NOSUID | _linux.MS_NOEXEC
    add(
        Op(
            _MOUNT,
            phase,
            "tmpfs",
            f"{root}/dev",
            "tmpfs",
            "size=64k,nr_inodes=64,mode=0755",
            flags=dev_flags,
        )
    )
    for name in _DEVICES:
        add(Op(_TOUCH, phase, f"{root}/dev/{name}", arg=0o644))
        add(Op(_BIND, phase, f"/dev/{name}", f"{root}/dev/{name}", flags=_linux.MOUNT_ATTR_NOSUID))
    add(Op(_SYMLINK, phase, "/proc/self/fd", f"{root}/dev/fd"))
    # POSIX shared memory and named semaphores (shm_open, sem_open: Python's multiprocessing
    # Pool, Queue and SharedMemory) live in /dev/shm: the call's private /tmp, counted in its
    # size. Without it they failed with ENOENT.
    add(Op(_SYMLINK, phase, "/tmp", f"{root}/dev/shm"))
    for i, name in enumerate(("stdin", "stdout", "stderr")):
        add(Op(_SYMLINK, phase, f"/proc/self/fd/{i}", f"{root}/dev/{name}"))
    if exec_:
        # Only tools that execute programs see the system directories, read-only.
        phase = "mount_system"
        add(Op(_MKDIR, phase, f"{root}/usr", arg=0o755))
        add(Op(_BIND, phase, "/usr", f"{root}/usr", flags=ro))
        for name in ("bin", "sbin", "lib", "lib64", "lib32", "libx32"):
            host = f"/{name}"
            if os.path.islink(host):
                add(Op(_SYMLINK, phase, os.readlink(host), f"{root}/{name}"))
            elif os.path.isdir(host):
                add(Op(_MKDIR, phase, f"{root}/{name}", arg=0o755))
                add(Op(_BIND, phase, host, f"{root}/{name}", flags=ro))
        add(Op(_MKDIR, phase, f"{root}/etc", arg=0o755))
        for name, text in (("passwd", _ETC_USERS), ("group", _ETC_GROUP), ("hosts", _ETC_HOSTS)):
            add(Op(_WRITE, phase, f"{root}/etc/{name}", d=text))
        for name in _ETC_BIND:
            if os.path.isfile(f"/etc/{name}"):
                add(Op(_TOUCH, phase, f"{root}/etc/{name}", arg=0o644))
                add(Op(_BIND, phase, f"/etc/{name}", f"{root}/etc/{name}", flags=ro))
        for tree in etc_trees():
            add(Op(_MKDIR, phase, f"{root}{tree}", arg=0o755))
            add(Op(_BIND, phase, tree, f"{root}{tree}", flags=ro))
    # Detached read-only trees (the interpreter's code; for a long-lived sandboxed process
    # also what its command needs). A single file binds onto an empty file.
    for i, path in enumerate(py_paths):
        add(Op(_MOVE_TREE, "mount_python", b=f"{root}{path}", arg=1 + i))
    if mount_proc:
        # /proc of the new pid namespace: mounted while the host's /proc is still visible
        # (the kernel requires a fully visible proc before a user namespace may mount one).
        phase = "mount_proc"
        proc_flags = _linux.MS_NOSUID | _linux.MS_NODEV | _linux.MS_NOEXEC
        add(Op(_MOUNT, phase, "proc", f"{root}/proc", "proc", flags=proc_flags))
        for name in _PROC_RO:
            path = f"{root}/proc/{name}"
            add(Op(_BIND, phase, path, path, arg=1, flags=ro))  # arg 1: absent is fine
    # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves no
    # path back to the host tree.
    phase = "pivot_root"
    add(Op(_CHDIR, phase, root))
    add(Op(_PIVOT, phase, ".", "."))
    add(Op(_UMOUNT, phase, ".", flags=_linux.MNT_DETACH))
    add(Op(_CHDIR, phase, "/"))
    add(Op(_SETATTR, "root_readonly", "/", flags=ro_dev))
    return OpList.of(before), OpList.of(after)


def build(
    plan: CallPlan,
    limits: ChildLimits,
    ws_fd: int,
    py_fds: Mapping[str, int],
    *,
    state_dirs: tuple[str, ...],
    mount_proc: bool,
    mount_ops: MountOps | None = None,
) -> None:
    """Run by the call's pid 1: the new root on a tmpfs, pivot_root, old root detached
    (``op_lists``, run by ``mountops.c`` when given, else here), with the policy's masks
    walked in Python in between."""
    before, after = op_lists(
        plan,
        limits,
        ws=ws_fd >= 0,
        py_paths=tuple(py_fds),
        state_dirs=state_dirs,
        mount_proc=mount_proc,
    )
    slots = [ws_fd, *py_fds.values()]
    spec = masks.MaskSpec.from_plan(plan.masks)
    targets = None
    if spec and ws_fd >= 0:
        with Phase("mount_masks"):
            # What the policy denies, masked before any tool exists (the kernel is the wall;
            # the broker's path checks only see argument strings). A failure fails the call
            # closed. Walked before the new root is mounted (over the host's /tmp): a link on
            # a denied path is followed through the host's tree as the host sees it.
            tree = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=ws_fd)
            try:
                # A spare gets what the fork-server's look found just before its fork, and
                # serves a call only if the look at that call finds the same: no second walk.
                targets = masks.vetted(tree, plan.masks)
                if targets is None:
                    targets = masks.find_settled(tree, spec, host=plan.workspace)
            finally:
                os.close(tree)
    before.run(slots, mount_ops)
    if targets is not None:
        with Phase("mount_masks"):
            root = _NEWROOT
            masks.apply(
                f"{root}{WORKSPACE}",
                _unshadowing(targets, write_binds(plan)),
                empty_file=f"{root}{_MASKED}/file",
                empty_dir=f"{root}{_MASKED}/dir",
                covered=state_dirs,
            )
    after.run(slots, mount_ops)


def _unshadowing(
    targets: list[masks.MaskTarget], binds: tuple[str, ...] | None
) -> list[masks.MaskTarget]:
    """``targets`` without the pins a call with narrowed write globs (``binds``) neither
    needs nor may have. A pin is a clone of its directory without the mounts below it: one
    at or above a writable bind would cover the bind with the read-only workspace again.
    And what a pin is for holds there without it: outside the binds every rename is EROFS,
    nothing leaves a bind (EXDEV) and a bind's root cannot be renamed (EBUSY). Pins inside
    a bind stay. Hidden and read-only masks all stay: one over a bind wins, as the policy's
    deny globs win over its write globs."""
    if binds is None:
        return targets
    inside = [tuple(rel.split("/")) for rel in binds]
    return [
        t
        for t in targets
        if t.action != "pin"
        or any(len(t.parts) > len(p) and t.parts[: len(p)] == p for p in inside)
    ]
