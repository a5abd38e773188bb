"""The fork-server: imports tool code once, forks one fresh child per call, reports exits.

Started by :class:`~runtime.backends.sandbox.backend.SandboxBackend` with an environment of
its own, through a small boot script that skips the ``runtime`` package ``__init__`` (no
pydantic in this heap, which every call copies twice), then ``main`` with ``FD``, a
``SOCK_SEQPACKET`` unix socket to the broker; every packet is one frame (runtime.frames).

Broker → zygote: ``init`` (once), ``spawn`` (with the call socket's child end attached by
SCM_RIGHTS), ``kill`` (timeout or cancel: SIGTERM now, SIGKILL after the grace period).
Zygote → broker: ``ready``, ``exit`` (wait status + rusage + cgroup counters + ``reaped_at``,
CLOCK_MONOTONIC), ``spawn_failed``.
The child talks to the broker directly over its call socket; the zygote never reads
arguments or results, it only forks and reaps. EOF on the control socket ends every child.

The clones themselves are made by the *cloner*, a copy of the zygote forked once after
``init`` (``_Cloner``): asked over a socket, it clones each call's pid 1 with
``CLONE_PARENT``, so every call is still the zygote's child (reaped here, with its rusage).
Why a second process: a clone copies the page tables of the whole ~25 MB interpreter and
takes milliseconds, and while the zygote made the replacement spare the call in flight
could not be reaped; and every page the zygote wrote after a clone was a copy-on-write
fault while the new child shared it (~450 a call). The zygote now shares its pages with the
cloner only, and writes each at most once. The cloner's own loop is C (``cloner.c``): between
two clones it writes none of its Python heap, which every call shares; Python runs there
only when the zygote asks (a tool to load, a new profile to compile, the mask walk's kept
listings to refresh), and the call decodes its own request.

Spares: pre-forked per profile, fully walled, each warming the tool of the call that made
it (``child.SpareTools``); a profile keeps more of them ready when its calls come
concurrently (``_take_spare``). What would block this loop (cgroup ``mkdir``/``rmdir``,
the unmounting of a finished call's mount namespace, which the zygote holds so that the
call's exit does not wait for it) runs on the janitor's thread (``cgroups.Janitor``).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal
import contextlib
import ctypes
import errno
import gc
import mmap
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime import _speedups
from runtime.backends.sandbox import (
    _denywrite,
    _linux,
    _narrow,
    _setup,
    cgroups,
    child,
    masks,
    newroot,
    pid1,
    probe,
)
from runtime.backends.sandbox._profile import plan_profile
from runtime.frames import HEADER, FrameError, decode_body, encode_frame
from runtime.toolkit import load_entry, result_json

__all__ = ["CLONER_NAME", "main"]

#: The cloner's process name (``comm``); every call's pid 1 takes ``child.CALL_NAME``.
CLONER_NAME = b"runtime-cloner"
#: Most spares kept ready for one profile (its depth grows from 1 with concurrent calls).
_MAX_DEPTH = 4
#: Profiles whose raised depth is remembered (beyond it, all start at 1 again).
_MAX_DEPTHS = 256
#: Entries moved aside by a call's deny_write check named in its exit report (the rest
#: are counted): each path is up to 4 KiB, the report one control packet.
_REPORTED_MOVES = 32
#: The broker's largest control message, and the descriptors one may carry.
_CONTROL_PACKET = 1 << 20
_ANCILLARY = socket.CMSG_SPACE(4 * struct.calcsize("i"))

# Preloaded so that tools find them after pivot_root hides the standard library.
_PRELOAD = (
    "json",
    "re",
    "base64",
    "hashlib",
    "fnmatch",
    "glob",
    "shutil",
    "subprocess",
    "tempfile",
    "datetime",
    "unicodedata",
    "stat",
    "errno",
    "encodings.idna",
    "encodings.latin_1",
    "encodings.ascii",
    "encodings.utf_16",
    "difflib",
    "textwrap",
    "string",
    "struct",
    "math",
    "random",
    "itertools",
    "collections",
    "io",
    "select",
    "signal",
    "socket",
    "ctypes",
    "threading",
    "queue",
    "time",
    "uuid",
    "urllib.parse",
)


def _packet_buffer() -> memoryview:
    """The control socket's receive buffer: an anonymous mapping, so that only the pages a
    message fills are ever touched (a ``bytearray`` is zeroed: 1 MiB more in this heap, and
    in every copy of it), and not inherited by a fork (``MADV_DONTFORK``): neither the
    cloner nor any call has a use for it, nor page tables to copy and tear down for it."""
    buffer = mmap.mmap(-1, _CONTROL_PACKET)
    with contextlib.suppress(AttributeError, OSError):
        buffer.madvise(mmap.MADV_DONTFORK)
    return memoryview(buffer)


def _received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    """The descriptors of an ``SCM_RIGHTS`` message (as ``socket.recv_fds`` gives them)."""
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", data[:usable]))
    return fds


class _Guard:
    """What a call that may write must be checked against when it ends (``_denywrite``)."""

    __slots__ = ("base", "tag")

    def __init__(self, base: _denywrite.Baseline, tag: str) -> None:
        self.base = base
        self.tag = tag


#: Each file or directory a call makes counts as this many bytes against ``disk_mb``: a tree
#: of empty files fills the inode table, not the blocks.
_INODE_BYTES = 4096
#: How often the zygote looks at the file systems of calls that write (statvfs, ~2 us each).
_DISK_POLL_S = 0.02


def _filled(path: str) -> int:
    """How full ``path``'s file system is, in bytes (free inodes at ``_INODE_BYTES``),
    counted down from 0: the difference of two readings is what was filled between them."""
    st = os.statvfs(path)
    return -(st.f_bavail * st.f_frsize + st.f_favail * _INODE_BYTES)


class _DiskWatch:
    """``Limits.disk_mb`` of a call that may write the workspace: how much its file system
    may fill while the call runs. RLIMIT_FSIZE bounds each file only; nothing in the kernel
    bounds a tree of them (no project quota here), so the zygote reads the file system's
    free space while the call runs (``Zygote.watch_disks``) and ends the call once it has
    lost more than the budget. Counted for the whole file system: what other processes
    write meanwhile (another call) counts too, so the message says so."""

    __slots__ = ("budget", "over", "path", "start")

    def __init__(self, path: str, budget: int) -> None:
        self.path = path
        self.budget = budget
        self.start = _filled(path)
        self.over = 0  # what was lost when the call was ended (0: it was not)


def _disk_watch(plan: child.CallPlan) -> _DiskWatch | None:
    """The watch of a call that may write its workspace (None for the others)."""
    budget = plan.limits.get("disk_mb")
    if plan.access != "rw" or not plan.workspace or not isinstance(budget, int):
        return None
    try:
        return _DiskWatch(plan.workspace, budget * 1024 * 1024)
    except OSError:
        return None  # the set-up fails on a workspace it cannot reach, with its own words


class _Call:
    __slots__ = (
        "cgroups",
        "disk",
        "guard",
        "id",
        "kill_at",
        "killing",
        "mounts",
        "pid",
        "profile",
    )

    def __init__(
        self,
        call_id: int,
        pid: int,
        cgroups: list[str],
        profile: str = "",
        guard: _Guard | None = None,
    ) -> None:
        self.id = call_id
        self.pid = pid
        self.cgroups = cgroups
        self.profile = profile  # its spare's profile ("" for a call cloned cold)
        self.kill_at: float | None = None
        self.killing = False
        self.mounts = -1  # its mount namespace, held (see Zygote._hold_mounts)
        self.guard = guard  # the deny_write check when it ends (None: it cannot write)
        self.disk: _DiskWatch | None = None  # its disk_mb (None: it cannot write)


class _Pending:
    """A clone asked of the cloner, not answered yet: a call's pid 1 or a spare."""

    __slots__ = (
        "act",
        "call_id",
        "cgroups",
        "disk",
        "guard",
        "kill_grace",
        "profile",
        "stamp",
        "tools",
    )

    def __init__(
        self, cgroups: list[str], call_id: int | None = None, guard: _Guard | None = None
    ) -> None:
        self.cgroups = cgroups
        self.call_id = call_id  # None for a spare
        self.guard = guard
        self.disk: _DiskWatch | None = None
        self.kill_grace: float | None = None  # a kill that came before the pid
        self.act: socket.socket | None = None
        self.profile = ""
        self.tools: frozenset[str] = frozenset()
        self.stamp: tuple[object, ...] | None = None


def _stamp(plan: child.CallPlan) -> tuple[object, ...] | None:
    """Identity of the workspace directory (device, inode), None if absent; with the
    signature of its masks when the policy denies paths: a spare masked the tree as it was
    when forked, and must not serve a call after a denied file appeared (or went); and, for
    a call the policy's ``[paths]`` narrow, the identity of each narrowed folder
    (``_narrowed``): the spare bound those inodes (Landlock rules, the write binds), and
    must not serve a call after one was removed and made again."""
    path = plan.workspace
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    sig = masks.signature(path, masks.MaskSpec.from_plan(plan.masks))
    return st.st_dev, st.st_ino, sig, _narrowed(path, plan)


_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def _narrowed(workspace: str, plan: child.CallPlan) -> tuple[tuple[str, object], ...]:
    """(prefix, (device, inode) or an errno) of each narrowed read and write prefix
    (``_narrow.narrow_prefixes``), opened beneath ``workspace`` component by component,
    never through a link: what the spare's walls bound. Empty when nothing is narrowed, so
    the look stays a few ``openat`` for narrowed profiles only. Held by the spare (its
    mounts and rules reference them), an inode's number cannot come back on a re-made
    folder while that spare waits."""
    narrow = plan.narrow or {}
    prefixes: set[str] = set()
    for key in ("read", "write"):
        prefixes.update(_narrow.narrow_prefixes(narrow.get(key)) or ())
    if not prefixes:
        return ()
    out: list[tuple[str, object]] = []
    for prefix in sorted(prefixes):
        fd = -1
        try:
            fd = os.open(workspace, _PATH_FLAGS | os.O_DIRECTORY)
            for part in prefix.split("/"):
                nxt = os.open(part, _PATH_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
            st = os.fstat(fd)
            out.append((prefix, (st.st_dev, st.st_ino)))
        except OSError as exc:
            out.append((prefix, exc.errno))
        finally:
            if fd >= 0:
                os.close(fd)
    return tuple(out)


def _guard(
    plan: child.CallPlan, stamp: tuple[object, ...] | None, state_dirs: tuple[str, ...]
) -> _Guard | None:
    """The deny_write check of a call that may write the workspace (``_denywrite``), from
    the look just made; None when it cannot write or nothing denies writes. Raises OSError
    when the tree cannot be looked at: the call must not run (what it created could not be
    told from what was there)."""
    if plan.access != "rw" or not plan.masks:
        return None
    spec = masks.MaskSpec.from_plan(plan.masks)
    sig = stamp[2] if stamp is not None and len(stamp) > 2 else None
    try:
        base = _denywrite.baseline(plan.workspace, spec, sig, state_dirs)
    except OSError as exc:
        raise OSError(
            exc.errno,
            "the workspace cannot be checked for paths the policy denies writing "
            f"(paths.deny_write) before the call, so it does not run: {exc.strerror or exc}",
        ) from exc
    return _Guard(base, plan.call_id) if base is not None else None


def _with_targets(
    raw_plan: dict[str, Any],
    plan: child.CallPlan,
    stamp: tuple[object, ...] | None,
    *,
    unpinned: bool = False,
) -> tuple[dict[str, Any], child.CallPlan]:
    """``raw_plan`` and ``plan`` with the mask targets of ``stamp`` (the look just made), for
    the child cloned next: it mounts them instead of walking the tree (``masks.vetted``).
    A spare serves a call only when the look at that call finds the same targets; a call's
    own child is cloned for the call the look was made for, and a change after that look is
    one made while the call is being set up, which no mask covers. Unchanged when the look
    found nothing to trust (the child then walks, and fails closed, on its own).
    ``unpinned``: for a call's own child, also past the pins' bound (``masks.with_targets``)."""
    sig = stamp[2] if stamp is not None and len(stamp) > 2 else None
    if not plan.masks or not isinstance(sig, masks.Signature):
        return raw_plan, plan
    if sig.key is None and (not unpinned or sig.found is None):
        return raw_plan, plan
    raw = {**raw_plan, "masks": masks.with_targets(plan.masks, sig, unpinned=unpinned)}
    return raw, child.CallPlan(**raw)


def _matchable(plan: child.CallPlan, stamp: tuple[object, ...] | None) -> bool:
    """Whether a spare forked after the look ``stamp`` could ever serve a call: not when
    the look pins nothing (more targets than the pins' bound, or a tree it refused), as a
    spare serves only a call whose look equals its own."""
    sig = stamp[2] if stamp is not None and len(stamp) > 2 else None
    return not plan.masks or not isinstance(sig, masks.Signature) or sig.key is not None


class _Spare:
    __slots__ = ("act", "cgroups", "pid", "stamp", "tools")

    def __init__(
        self,
        pid: int,
        act: socket.socket,
        cgroups: list[str],
        tools: frozenset[str],
        stamp: tuple[object, ...] | None,
    ) -> None:
        self.pid = pid
        self.act = act  # activation socket: the call socket travels over it (SCM_RIGHTS)
        self.cgroups = cgroups
        self.tools = tools  # the tools loaded when it was forked: all it can run
        self.stamp = stamp  # the workspace it mounted


class Zygote:
    def __init__(self, ctl: socket.socket) -> None:
        self.ctl = ctl
        self.packet = _packet_buffer()
        self.tools: dict[str, Any] = {}
        self.calls: dict[int, _Call] = {}
        self.idmaps: dict[tuple[int, int], int] = {}
        self.cfg: child.ChildConfig | None = None
        self.cgroup_base: dict[str, str] = {}
        self.grace_s = 0.5
        self.pool_size = 0
        #: Ready spares per profile, oldest first; the profiles in least-recently-used order.
        self.spares: dict[str, list[_Spare]] = {}
        #: time.monotonic() of the next look at the disks of calls that write (watch_disks).
        self.disk_due = 0.0
        #: How many spares to keep ready per profile (1, raised by concurrent demand).
        self.depth: dict[str, int] = {}
        self.dismissed: dict[int, _Spare] = {}
        self.failed_profiles: set[str] = set()
        self.spare_seq = 0
        #: tool key -> (entry, base, whether a folder tool: imported in its call only)
        self.entries: dict[str, tuple[str, str, bool]] = {}
        self.cloner: _Cloner | None = None
        self.pending: dict[int, _Pending] = {}
        # Exits reaped before the cloner's answer named the pid (a child that died at once).
        self.early: dict[int, tuple[int, Any, float]] = {}
        #: cgroup mkdir/rmdir off this loop (None: inline; before the cloner exists).
        self.janitor: cgroups.Janitor | None = None
        #: ``cloner.c``'s loop (``pid1.load_cloner``); None: the cloner's loop is Python's.
        self.cloner_serve: pid1.ClonerServe | None = None

    # -- messages ---------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        self.ctl.sendall(encode_frame(message))

    def receive(self) -> tuple[dict[str, Any] | None, list[int]]:
        # Into one buffer: ``recv_fds`` of a 1 MiB bound allocates (mmaps) and shrinks
        # 1 MiB for every spawn message, on the call's path.
        size, ancillary, _flags, _addr = self.ctl.recvmsg_into([self.packet], _ANCILLARY)
        fds = _received_fds(ancillary)
        if not size:
            return None, fds
        (length,) = HEADER.unpack_from(self.packet)
        if HEADER.size + length > size:
            raise FrameError("a control packet shorter than its header says")
        return decode_body(self.packet[HEADER.size : HEADER.size + length]), fds

    # -- set-up -----------------------------------------------------------------------

    def init(self, msg: dict[str, Any]) -> None:
        errors: dict[str, str] = {}
        # First, before any tool's import could encode: the C accelerator is the file the
        # broker loaded (none when it runs pure), never one from this process's own idea of
        # the cache (its HOME is the passwd one, not the broker's XDG_CACHE_HOME, and may be
        # the workspace), which the broker never judged (``_speedups.adopt``).
        speedups = str(msg.get("speedups") or "")
        if _speedups.adopt(speedups) is None and speedups:
            errors["speedups"] = str(_speedups.status()["error"])
        caps = probe.probe_host()
        disable = frozenset(msg.get("disable", ()))
        if not caps.user_namespaces or "userns" in disable:
            # best_effort on a host without user namespaces: no namespace at all (the
            # backend refuses to get here in strict mode).
            disable |= {"userns", "mountns", "pidns", "netns"}
        for key, entry, base in msg.get("tools", ()):
            # Only the built-in tools (the broker sends no folder tool here): their code is
            # the project's own, and imported once here it makes every call fast.
            try:
                self.tools[key] = load_entry(entry, Path(base))
                self.entries[key] = (str(entry), str(base), False)
            except Exception as exc:  # a broken tool must not stop the others
                errors[key] = f"{type(exc).__name__}: {exc}"
        for name in _PRELOAD:
            with contextlib.suppress(ImportError):
                __import__(name)
        # The canonical JSON encoder a call sizes a large result with (``child._within_cap``)
        # picks its accelerator (the one adopted above) on first use: here, once, not in a
        # call behind its walls.
        result_json(None)
        root = os.geteuid() == 0
        if root:
            # Each call's pid 1 inherits these, and inside its user namespace (setgroups
            # denied) it could not drop them: the zygote, root anyway, does without.
            os.setgroups([])
        # Compiled by the broker (``seccomp.programs``): libseccomp and pyseccomp's imports
        # need not be in this heap, which every call copies twice.
        bpf_python = bytes(msg.get("bpf_python") or b"")
        bpf_exec = bytes(msg.get("bpf_exec") or b"")
        if msg.get("seccomp_error"):
            errors["seccomp"] = str(msg["seccomp_error"])
            bpf_python = bpf_exec = b""
        # The pieces built beside pid1, each optional: a piece that does not load is named in
        # the errors and its Python twin (or nothing, for pid1 itself) serves instead.
        # sigexit is mapped here once and inherited by every call (a Python tool that is
        # its call's pid 1 installs it: ``child.single_process``); so are the mount ops
        # (every call's new root is one list of operations run in C).
        loaders: dict[str, Callable[[str], Any]] = {
            "pid1": pid1.load,
            "sigexit": pid1.load_sigexit,
            "cloner": pid1.load_cloner,
            "mountops": pid1.load_mount_ops,
        }
        pieces: dict[str, Any] = {}
        for name, load in loaders.items() if msg.get("pid1") else ():
            try:
                pieces[name] = load(str(msg["pid1"]))
            except OSError as exc:
                errors[name] = str(exc)
        pid1_fd: int = pieces.get("pid1", -1)
        sigexit = pieces.get("sigexit")
        mount_ops = pieces.get("mountops")
        self.cloner_serve = pieces.get("cloner")
        # Before the config: whether every call has a pids cgroup decides its RLIMIT_NPROC.
        if "cgroup" not in disable:
            cgroups.sweep(caps.cgroup_writable)
            made, cg_errors = cgroups.bases(caps.cgroup_writable, f"runtime-sandbox-{os.getpid()}")
            self.cgroup_base.update(made)
            errors.update(cg_errors)
        self.cfg = child.ChildConfig(
            host_uid=int(msg["sandbox_uid"]) if root else os.getuid(),
            host_gid=int(msg["sandbox_gid"]) if root else os.getgid(),
            drop_root=root,
            landlock_abi=caps.landlock_abi,
            bpf_python=bpf_python,
            bpf_exec=bpf_exec,
            state_dirs=tuple(msg.get("state_dirs", (".runtime",))),
            disable=disable if bpf_python else disable | {"seccomp"},
            pid1_fd=pid1_fd,
            sigexit=sigexit,
            bpf_self_kill=pid1.self_kill_filter() if sigexit is not None else b"",
            mount_ops=mount_ops,
            pids_cgroup="pids" in self.cgroup_base,
        )
        self.grace_s = float(msg.get("grace_s", 0.5))
        self.pool_size = int(msg.get("pool_size", 0))
        # Computed once here, inherited by every fork: the code every call binds read-only.
        newroot.python_paths()
        if mount_ops is not None:
            child.identity_ops(self.cfg)  # compiled once, every call's first steps
        # Freeze what is loaded so forks do not dirty (copy) the heap's gc headers.
        gc.collect()
        gc.freeze()
        self.cloner = _Cloner.start(self)
        # Only now: the cloner is forked (see cgroups.Janitor's hazard). Without a
        # writable hierarchy it still lets go of the calls' mount namespaces.
        owner = (self.cfg.host_uid, self.cfg.host_gid) if self.cfg.drop_root else None
        self.janitor = cgroups.Janitor(self.cgroup_base, owner)
        self.send(
            {
                "type": "ready",
                "caps": caps.as_dict(),
                "errors": errors,
                "cgroups": sorted(self.cgroup_base),
            }
        )

    def idmap_fd(self, uid: int, gid: int) -> int:
        """A user namespace mapping the workspace owner to the sandbox uid (root only)."""
        assert self.cfg is not None
        key = (uid, gid)
        if key in self.idmaps:
            return self.idmaps[key]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - a holder process, only to own the namespace
            try:
                os.close(w)
                _linux.unshare(_linux.CLONE_NEWUSER)
                os.read(r, 1)
            finally:
                os._exit(0)
        os.close(r)
        try:
            # Race-free: the holder blocks on the pipe until the maps are written.
            for _ in range(1000):
                if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
                    break
                time.sleep(0.001)
            _setup.write(f"/proc/{pid}/uid_map", f"{uid} {self.cfg.host_uid} 1\n")
            _setup.write(f"/proc/{pid}/setgroups", "deny")
            _setup.write(f"/proc/{pid}/gid_map", f"{gid} {self.cfg.host_gid} 1\n")
            fd = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            os.close(w)
            os.waitpid(pid, 0)
        self.idmaps[key] = fd
        return fd

    # -- calls ------------------------------------------------------------------------

    def _groups(self, plan: child.CallPlan, tag: str) -> list[str]:
        """The call's cgroups. Its pid 1 joins them itself (cgroup.procs is handed to the
        sandbox uid): a cgroup v1 attach may wait for an RCU grace period, and in the
        zygote that wait would hold up every other call's messages and reaps."""
        cfg = self.cfg
        assert cfg is not None
        owner = (cfg.host_uid, cfg.host_gid) if cfg.drop_root else None
        return cgroups.create(self.cgroup_base, tag, plan.limits, procs_owner=owner)

    def _spare_groups(self, plan: child.CallPlan, tag: str) -> list[str]:
        """A spare's cgroups: a set the janitor made ahead when there is one."""
        if self.janitor is not None:
            ready = self.janitor.take(plan.limits)
            if ready is not None:
                return ready
        return self._groups(plan, tag)

    def _drop_groups(self, paths: list[str]) -> None:
        """Remove a finished call's or spare's cgroups (on the janitor's thread if any)."""
        if self.janitor is not None:
            self.janitor.remove(paths)
        else:
            cgroups.remove(paths)

    def _fork_child(
        self, plan: child.CallPlan, tool: Any, tag: str, call_fd: int
    ) -> tuple[int, list[str]]:
        """Make the call's cgroups and clone its pid 1 here (without the cloner); returns
        (pid, cgroup dirs). Raises on failure (after removing what it made)."""
        groups = self._groups(plan, tag)
        try:
            pid = self._clone_call(plan, tool, call_fd, groups)
        except BaseException:
            self._drop_groups(groups)
            raise
        return pid, groups

    def _trees(self, plan: child.CallPlan) -> tuple[int, dict[str, int]]:
        """Root-only steps, done while this process is still root: the idmapped workspace
        tree and the interpreter's code (the sandbox uid may not reach them); the call's pid
        1 moves them into its new root. (-1, {}) unprivileged: the child clones its own."""
        cfg = self.cfg
        assert cfg is not None
        ws_fd, py_fds = -1, dict[str, int]()
        if not cfg.drop_root or "mountns" in cfg.disable:
            return ws_fd, py_fds
        try:
            if plan.workspace and plan.access != "none":
                st = os.stat(plan.workspace)
                idmap = self.idmap_fd(st.st_uid, st.st_gid)
                ws_fd = _linux.open_tree(
                    plan.workspace, _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC
                )
                _linux.mount_setattr(ws_fd, _linux.MOUNT_ATTR_IDMAP, idmap)
            py_fds = child.python_trees(plan.tool_dir)
        except BaseException:
            if ws_fd >= 0:
                os.close(ws_fd)
            raise
        return ws_fd, py_fds

    def _clone_call(self, plan: child.CallPlan, tool: Any, call_fd: int, groups: list[str]) -> int:
        """Clone the call's pid 1 (``child.run_call``) into new namespaces here, without the
        cloner; its pid."""
        cfg = self.cfg
        assert cfg is not None
        ws_fd, py_fds = self._trees(plan)
        try:
            procs = tuple(f"{path}/cgroup.procs" for path in groups)
            pid = self._clone(child.clone_flags(cfg.disable))
            if pid == 0:
                # run_call never returns; should anything escape it, this copy must not go
                # on running the zygote's loop.
                try:
                    child.run_call(
                        cfg, plan, call_fd, tool, ws_fd=ws_fd, py_fds=py_fds, cgroup_procs=procs
                    )
                finally:
                    os._exit(child.EXIT_SETUP)
        finally:
            for fd in (ws_fd, *py_fds.values()):
                if fd >= 0:
                    os.close(fd)
        return pid

    def _clone(self, flags: int, extra: int = 0) -> int:
        """Clone the call's pid 1. A user namespace is owned by its creator's effective uid:
        as root, the effective ids are the sandbox uid's for the clone (the real and saved
        ones stay 0, so this process gets root back right after, and the child drops them)."""
        cfg = self.cfg
        assert cfg is not None
        if not flags and not extra:
            return os.fork()  # test-only: no namespaces, an ordinary fork
        if not cfg.drop_root or not flags:
            return _linux.clone(flags | extra)
        # Hazard: changing the effective ids clears this process's parent-death signal (and
        # dumpable); it is what ends the zygote, and with it every call, if the broker dies.
        # (A broker that dies while it is cleared is still seen: EOF on the control socket.)
        deathsig = _linux.get_pdeathsig()
        os.setegid(cfg.host_gid)
        os.seteuid(cfg.host_uid)
        pid = -1
        try:
            pid = _linux.clone(flags | extra)
        finally:
            if pid != 0:  # never in the child: it has no uid 0 to return to
                os.seteuid(0)
                os.setegid(0)
                _linux.prctl(1, deathsig)  # PR_SET_PDEATHSIG
        return pid

    @staticmethod
    def _profile(plan: dict[str, Any]) -> str:
        """Calls with equal profiles can use each other's spares (the call id differs)."""
        return plan_profile(plan)

    def spawn(self, msg: dict[str, Any], fds: list[int]) -> None:
        assert self.cfg is not None
        call_id = int(msg["id"])
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.send({"type": "spawn_failed", "id": call_id, "message": "no call socket"})
            return
        (call_fd,) = fds
        try:
            plan = child.CallPlan(**msg["plan"])
            key = str(msg["tool"])
            if key not in self.tools:
                entry, base, folder = str(msg["entry"]), str(msg["base"]), bool(msg.get("folder"))
                self.tools[key] = _load_tool(entry, base, folder)
                self.entries[key] = (entry, base, folder)
            # The broker sends it (made once per profile there); a bare driver may not.
            profile = str(msg.get("profile") or self._profile(msg["plan"]))
            # One look at the tree per call (with masks, a walk): it vets this profile's
            # spares and stamps the next ones, which are forked (and masked) after it.
            stamp = _stamp(plan)
            assert self.cfg is not None
            guard = _guard(plan, stamp, self.cfg.state_dirs)
            disk = _disk_watch(plan)  # read before the call can write
            spare = self._take_spare(profile, stamp)
            if spare is not None and key in spare.tools and self._activate(spare, msg, call_fd):
                call = _Call(call_id, spare.pid, spare.cgroups, profile, guard)
                call.disk = disk
                self.calls[spare.pid] = call
                call.mounts = self._hold_mounts(spare.pid)
            else:
                if spare is not None:
                    self._dismiss(spare)
                # The masks this look found travel with the call: its child mounts them
                # (each checked to be the inode found) instead of walking the tree again.
                raw_plan, plan = _with_targets(msg["plan"], plan, stamp, unpinned=True)
                if self.cloner is None:
                    pid, groups = self._fork_child(plan, self.tools[key], f"c{call_id}", call_fd)
                    self.calls[pid] = _Call(call_id, pid, groups, guard=guard)
                    self.calls[pid].disk = disk
                else:
                    groups = self._groups(plan, f"c{call_id}")
                    try:
                        seq = self.cloner.ask(
                            self,
                            raw_plan,
                            plan,
                            tool=key,
                            fd=call_fd,
                            groups=groups,
                            profile=profile,
                        )
                    except BaseException:
                        self._drop_groups(groups)
                        raise
                    self.pending[seq] = _Pending(groups, call_id, guard)
                    self.pending[seq].disk = disk
        except Exception as exc:
            self.send(
                {"type": "spawn_failed", "id": call_id, "message": f"{type(exc).__name__}: {exc}"}
            )
            return
        finally:
            os.close(call_fd)
        if self.pool_size and profile not in self.failed_profiles and _matchable(plan, stamp):
            # (A spare no look can match would be forked, walk or mount, then be dismissed
            # at the next call: on a tree with many masked entries, every call.)
            self._make_spare(profile, plan, stamp, msg["plan"], warm=key)

    # -- spares: children pre-forked per profile, fully walled, waiting for one call -------

    def _take_spare(self, profile: str, stamp: tuple[object, ...] | None) -> _Spare | None:
        """The oldest ready spare of ``profile`` whose tree still fits ``stamp``. One that
        does not (the directory at the workspace path was replaced, or its masks changed
        since the spare mounted it) would serve the old tree: dismissed."""
        ready = self.spares.pop(profile, None)
        if ready is None:
            if any(call.profile == profile for call in self.calls.values()):
                # None ready while another call of this profile runs on a spare: calls of
                # it come concurrently, so keep one more ready. (One call at a time never
                # raises it: each call has ended, reaped, before the next one comes.)
                if len(self.depth) >= _MAX_DEPTHS and profile not in self.depth:
                    self.depth.clear()  # bounded: profiles seen long ago start at 1 again
                self.depth[profile] = min(self.depth.get(profile, 1) + 1, _MAX_DEPTH)
            return None
        fits = [spare for spare in ready if spare.stamp == stamp]
        for stale in ready:
            if stale.stamp != stamp:
                self._dismiss(stale)
        taken = fits.pop(0) if fits else None
        if fits:
            self.spares[profile] = fits  # back in, as the most recently used profile
        return taken

    def _make_spare(
        self,
        profile: str,
        plan: child.CallPlan,
        stamp: tuple[object, ...] | None,
        raw_plan: dict[str, Any],
        *,
        warm: str | None = None,
    ) -> None:
        """Fork spares for ``profile`` until its depth is ready or on the way, within the
        pool (the least recently used profiles' spares make room); each warms ``warm``
        (the tool of the call that used the last one) before it waits
        (``child.SpareTools``)."""
        want = self.depth.get(profile, 1)
        for _ in range(want):
            making = sum(
                1 for p in self.pending.values() if p.call_id is None and p.profile == profile
            )
            if len(self.spares.get(profile, ())) + making >= want:
                return
            waiting = sum(1 for p in self.pending.values() if p.call_id is None)
            while waiting + sum(map(len, self.spares.values())) >= self.pool_size:
                other = next((name for name in self.spares if name != profile), None)
                if other is None:
                    return  # the pool holds only this profile's spares
                evicted = self.spares.pop(other)
                for spare in evicted:
                    self._dismiss(spare)
            if not self._fork_spare(profile, plan, stamp, raw_plan, warm=warm):
                return

    def _fork_spare(
        self,
        profile: str,
        plan: child.CallPlan,
        stamp: tuple[object, ...] | None,
        raw_plan: dict[str, Any],
        *,
        warm: str | None,
    ) -> bool:
        """Ask for one spare of ``profile``; False if that failed (the profile is marked)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.spare_seq += 1
        tag = f"s{self.spare_seq}"
        # The masks this look found travel with the spare: it mounts them, no walk.
        raw_plan, plan = _with_targets(raw_plan, plan, stamp)
        try:
            if self.cloner is None:
                pid, groups = self._fork_child(plan, dict(self.tools), tag, theirs.fileno())
                spare = _Spare(pid, ours, groups, frozenset(self.tools), stamp)
                self.spares.setdefault(profile, []).append(spare)
                return True
            groups = self._spare_groups(plan, tag)
            try:
                seq = self.cloner.ask(
                    self,
                    raw_plan,
                    plan,
                    tool=None,
                    fd=theirs.fileno(),
                    groups=groups,
                    profile=profile,
                    warm=warm,
                )
            except BaseException:
                self._drop_groups(groups)
                raise
        except Exception:
            ours.close()
            self.failed_profiles.add(profile)
            return False
        finally:
            theirs.close()
        pending = _Pending(groups)
        pending.act, pending.profile, pending.stamp = ours, profile, stamp
        pending.tools = frozenset(self.tools)
        self.pending[seq] = pending
        return True

    def _activate(self, spare: _Spare, msg: dict[str, Any], call_fd: int) -> bool:
        message = {"tool": msg["tool"], "call_id": msg["plan"]["call_id"]}
        try:
            socket.send_fds(spare.act, [encode_frame(message)], [call_fd])
        except OSError:
            self._dismiss(spare)
            return False
        spare.act.close()
        return True

    def _hold_mounts(self, pid: int) -> int:
        """A reference to the call's mount namespace, or -1. Its last process exiting would
        otherwise unmount the tree (and wait for an expedited RCU grace period) before the
        kernel reports the exit: ~0.3-0.5 ms between the result and the reap, measured.
        Held, the teardown happens when the janitor closes it, after the exit report. Only
        this process holds it (no one enters it: it is never passed on), and it is closed
        once the call is reaped, so nothing of the call outlives its report for long. The
        spare is this process's unreaped child, so ``pid`` is still the spare (a zombie has
        no namespaces left: then -1). Without a janitor, closing it here would put that
        wait back on this loop: not held."""
        if self.janitor is None:
            return -1
        try:
            return os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return -1

    def _let_go(self, call: _Call) -> None:
        if call.mounts >= 0:
            if self.janitor is not None:
                self.janitor.release(call.mounts)
            else:
                os.close(call.mounts)
            call.mounts = -1

    def _dismiss(self, spare: _Spare) -> None:
        spare.act.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(spare.pid, signal.SIGKILL)
        self.dismissed[spare.pid] = spare

    def cloned(self, answer: dict[str, Any]) -> None:
        """The cloner's answer to one request: the pid, or why it failed."""
        pending = self.pending.pop(int(answer["seq"]))
        pid = answer.get("pid")
        early = self.early.pop(pid, None) if isinstance(pid, int) else None
        if not self.pending:
            self.early.clear()  # only orphans (test-only, no pid namespace) can be left
        if not isinstance(pid, int) or pid <= 0:
            self._drop_groups(pending.cgroups)
            if pending.call_id is not None:
                message = str(answer.get("error") or "the cloner failed")
                self.send({"type": "spawn_failed", "id": pending.call_id, "message": message})
            else:
                assert pending.act is not None
                pending.act.close()
                self.failed_profiles.add(pending.profile)
            return
        if pending.call_id is not None:
            call = _Call(pending.call_id, pid, pending.cgroups, guard=pending.guard)
            call.disk = pending.disk
            self.calls[pid] = call
            if pending.kill_grace is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
                call.kill_at = time.monotonic() + pending.kill_grace
        else:
            assert pending.act is not None
            self.spares.setdefault(pending.profile, []).append(
                _Spare(pid, pending.act, pending.cgroups, pending.tools, pending.stamp)
            )
        if early is not None:
            self._exited(pid, *early)

    def kill(self, msg: dict[str, Any]) -> None:
        grace = float(msg.get("grace_s", self.grace_s))
        for call in self.calls.values():
            if call.id == int(msg["id"]) and call.kill_at is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(call.pid, signal.SIGTERM)
                call.kill_at = time.monotonic() + grace
        for pending in self.pending.values():
            if pending.call_id == int(msg["id"]) and pending.kill_grace is None:
                pending.kill_grace = grace  # sent once the cloner names the pid

    def reap(self) -> None:
        while True:
            try:
                pid, status, ru = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._exited(pid, status, ru, time.monotonic())

    def _exited(self, pid: int, status: int, ru: Any, reaped_at: float) -> None:
        if self.cloner is not None and pid == self.cloner.pid:
            self.cloner.dead = True
            return
        call = self.calls.pop(pid, None)
        if call is None:
            if self.pending and pid not in self.dismissed and not self._is_spare(pid):
                # Reaped before the cloner's answer arrived: kept until it does.
                self.early[pid] = (status, ru, reaped_at)
                return
            self._reap_spare(pid, status)
            return
        report: dict[str, Any] = {
            "type": "exit",
            "id": call.id,
            # CLOCK_MONOTONIC is system-wide: the broker can split its wait (benchmarks).
            "reaped_at": reaped_at,
            "exited": os.WIFEXITED(status),
            "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "cpu_ms": (ru.ru_utime + ru.ru_stime) * 1000.0,
            "max_rss_kb": ru.ru_maxrss,
        }
        report.update(cgroups.stats(call.cgroups))
        if call.disk is not None and call.disk.over:
            report["disk_filled_bytes"] = call.disk.over
        report.update(self._sweep(call))
        # Report first: the counters are read, and removing the directories (rmdir of a
        # v1 memory cgroup may wait for the last charged page, or for cgroup_mutex) cannot
        # change the result. The janitor removes them (inline without one); the zygote's
        # shutdown waits for it.
        self.send(report)
        self._let_go(call)
        self._drop_groups(call.cgroups)

    @staticmethod
    def _sweep(call: _Call) -> dict[str, Any]:
        """The deny_write check of a call whose processes are all gone (``_denywrite``):
        what its exit report adds. Every end of a call comes here (or to ``shutdown``)."""
        guard, call.guard = call.guard, None
        if guard is None:
            return {}
        try:
            swept = _denywrite.sweep(guard.base, guard.tag)
        except Exception as exc:  # a bug here must not end the fork-server: fail closed
            swept = _denywrite.Swept(error=f"{type(exc).__name__}: {exc}")
        out: dict[str, Any] = {}
        if swept.moved:
            # Bounded: the report is one control packet (a call can make thousands).
            out["quarantined"] = [list(pair) for pair in swept.moved[:_REPORTED_MOVES]]
            out["quarantined_count"] = len(swept.moved)
        if swept.error is not None:
            out["deny_write_unchecked"] = swept.error
        return out

    def _is_spare(self, pid: int) -> bool:
        return any(spare.pid == pid for ready in self.spares.values() for spare in ready)

    def _reap_spare(self, pid: int, status: int) -> None:
        spare = self.dismissed.pop(pid, None)
        for profile, ready in list(self.spares.items()):
            for waiting in [w for w in ready if w.pid == pid]:
                # A spare that died before its call: its set-up fails for this profile, so
                # stop pre-forking it (calls still run, cold, and report the error).
                spare = waiting
                ready.remove(waiting)
                waiting.act.close()
                self.failed_profiles.add(profile)
            if not ready:
                del self.spares[profile]
        if spare is not None:
            self._drop_groups(spare.cgroups)

    def expire(self) -> float | None:
        """SIGKILL calls whose grace ran out; return seconds until the next deadline."""
        now = time.monotonic()
        nearest: float | None = None
        for call in self.calls.values():
            if call.kill_at is None or call.killing:
                continue
            if call.kill_at <= now:
                # SIGKILL of pid 1 ends the whole pid namespace: the kernel reaps pid 1
                # only once every other process of it is gone.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(call.pid, signal.SIGKILL)
                call.killing = True
            else:
                wait = call.kill_at - now
                nearest = wait if nearest is None else min(nearest, wait)
        return nearest

    def watch_disks(self) -> float | None:
        """End every call that filled its workspace's file system past its ``disk_mb``
        (SIGKILL of its pid 1: the whole namespace); return seconds until the next look,
        None when no running call can write."""
        watched = [c for c in self.calls.values() if c.disk is not None and not c.killing]
        if not watched:
            return None
        now_s = time.monotonic()
        if now_s < self.disk_due:  # looked less than _DISK_POLL_S ago
            return self.disk_due - now_s
        self.disk_due = now_s + _DISK_POLL_S
        filled: dict[str, int] = {}
        for call in watched:
            disk = call.disk
            assert disk is not None
            try:
                now = filled.get(disk.path)
                if now is None:
                    now = filled[disk.path] = _filled(disk.path)
            except OSError:
                continue  # the workspace went away: the call fails on its own
            if now - disk.start > disk.budget:
                disk.over = now - disk.start
                with contextlib.suppress(ProcessLookupError):
                    os.kill(call.pid, signal.SIGKILL)
                call.killing = True
        return _DISK_POLL_S

    def shutdown(self) -> None:
        if self.cloner is not None:
            # Its answers already sent name children of ours: collect them first.
            for answer in self.cloner.close():
                with contextlib.suppress(KeyError):
                    self.cloned(answer)
            for pending in self.pending.values():  # never answered: no child was made
                if pending.act is not None:
                    pending.act.close()
                self._drop_groups(pending.cgroups)
            self.pending.clear()
        for ready in list(self.spares.values()):
            for spare in ready:
                self._dismiss(spare)
        self.spares.clear()
        for pid, spare in list(self.dismissed.items()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self._drop_groups(spare.cgroups)
        self.dismissed.clear()
        for call in self.calls.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(call.pid, signal.SIGKILL)
        for pid, call in list(self.calls.items()):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            # No one hears of it any more, but what it planted must not stay.
            self._sweep(call)
            self._let_go(call)
            self._drop_groups(call.cgroups)
        self.calls.clear()
        if self.janitor is not None:
            self.janitor.close()  # every call's and spare's groups gone first
            self.janitor = None
        cgroups.remove(list(self.cgroup_base.values()))
        for fd in self.idmaps.values():
            os.close(fd)
        self.idmaps.clear()

    def serve(self) -> None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel = selectors.DefaultSelector()
        sel.register(self.ctl, selectors.EVENT_READ, "ctl")
        sel.register(r, selectors.EVENT_READ, "sig")
        watching: dict[int, int] = {}
        try:
            while True:
                watching = _watch_queues(sel, watching)
                if self.cloner is not None and not self.cloner.registered:
                    sel.register(self.cloner.sock, selectors.EVENT_READ, "cloner")
                    self.cloner.registered = True
                wait = self.expire()
                disks = self.watch_disks()
                if disks is not None:
                    wait = disks if wait is None else min(wait, disks)
                for key, _ in sel.select(wait):
                    if key.data == "sig":
                        with contextlib.suppress(BlockingIOError):
                            os.read(r, 4096)
                        self.reap()
                        continue
                    if key.data == "watch":
                        masks.pump()  # read as events come: a burst must not overflow
                        continue
                    if key.data == "cloner":
                        assert self.cloner is not None
                        answer = self.cloner.answer()
                        if answer is None:
                            return  # the cloner is gone: no call can be made any more
                        self.cloned(answer)
                        continue
                    msg, fds = self.receive()
                    if msg is None:
                        return
                    kind = msg.get("type")
                    if kind == "init":
                        self.init(msg)
                    elif kind == "spawn":
                        self.spawn(msg, fds)
                    elif kind == "kill":
                        self.kill(msg)
                self.reap()
        finally:
            self.shutdown()


def _watch_queues(sel: selectors.BaseSelector, watching: dict[int, int]) -> dict[int, int]:
    """Keep ``sel`` reading the mask walk's watch queues (``masks.watch_fds``), which the
    looks make and close as they go: a closed queue's number is dropped, and one reused by
    a new queue registered again (each number carries its queue's token)."""
    now = masks.watch_fds()
    for fd, token in watching.items():
        if now.get(fd) != token:
            with contextlib.suppress(KeyError, ValueError, OSError):
                sel.unregister(fd)
    for fd, token in now.items():
        if watching.get(fd) != token:
            with contextlib.suppress(KeyError, ValueError, OSError):
                sel.register(fd, selectors.EVENT_READ, "watch")
    return now


class _Cloner:
    """The zygote's side of the cloner: a copy of the zygote, forked once after ``init``,
    that makes every clone (with ``CLONE_PARENT``) on request and answers with the pid. It
    never reaps and never reports: the calls are the zygote's children. It ends with the
    zygote (parent-death signal) or on EOF of its socket.

    A request is ``_REQUEST`` (seq, whether the cloner must run Python first, the clone
    flags, the effective ids for the clone) and a frame the call's pid 1 decodes (its plan,
    tool, cgroups, and the names of the trees attached after its call socket); an answer is
    ``_ANSWER`` (seq, pid or -errno) and, from Python, the error's text."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.seq = 0
        self.loaded: set[str] = set()  # tool keys the cloner has loaded
        #: Per profile the cloner has run Python for (compiled its mask globs and operation
        #: lists, refreshed its mask walk's kept listings): the zygote's own generation of
        #: those listings then (``masks.generation``; 0 without masks).
        self.prepared: dict[str, int] = {}
        self.registered = False
        self.dead = False

    @classmethod
    def start(cls, zygote: Zygote) -> _Cloner:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the cloner's own process
            try:
                ours.close()
                _cloner_main(zygote, theirs)
            finally:
                os._exit(0)
        theirs.close()
        cloner = cls(pid, ours)
        cloner.loaded = set(zygote.tools)
        return cloner

    def ask(
        self,
        zygote: Zygote,
        raw_plan: dict[str, Any],
        plan: child.CallPlan,
        *,
        tool: str | None,
        fd: int,
        groups: list[str],
        profile: str,
        warm: str | None = None,
    ) -> int:
        """Send one clone request (``tool`` None: a spare with every loaded tool, which
        warms ``warm``); its seq. The root-only trees are made here and travel with the
        call socket."""
        cfg = zygote.cfg
        assert cfg is not None
        self.seq += 1
        load = [[k, *zygote.entries[k]] for k in zygote.tools if k not in self.loaded]
        spec = masks.MaskSpec.from_plan(plan.masks)
        # The zygote's look at the tree (``_stamp``, just before) moves the generation when
        # it listed a directory anew: the tree changed since the cloner's last refresh.
        generation = masks.generation(spec) if spec else 0
        python = bool(load) or self.prepared.get(profile) != generation
        flags = child.clone_flags(cfg.disable)
        uid = gid = -1
        if cfg.drop_root and flags:
            uid, gid = cfg.host_uid, cfg.host_gid
        ws_fd, py_fds = zygote._trees(plan)
        try:
            body = {
                "plan": raw_plan,
                "tool": tool,
                "warm": warm,
                "load": load,
                "groups": groups,
                "ws": ws_fd >= 0,
                "trees": list(py_fds),
            }
            header = _REQUEST.pack(self.seq, python, flags | _linux.CLONE_PARENT, uid, gid)
            attached = [fd, *(f for f in (ws_fd,) if f >= 0), *py_fds.values()]
            data = header + encode_frame(body)
            if len(data) > _REQUEST_SEND_MAX and _drop_targets(body):
                data = header + encode_frame(body)
            try:
                socket.send_fds(self.sock, [data], attached)
            except OSError as exc:
                # SOCK_SEQPACKET refuses a packet past its buffer whole: without the mask
                # targets (the child then walks the tree itself) the request is small.
                if exc.errno not in (errno.EMSGSIZE, errno.ENOBUFS) or not _drop_targets(body):
                    raise
                socket.send_fds(self.sock, [header + encode_frame(body)], attached)
        finally:
            for tree in (ws_fd, *py_fds.values()):
                if tree >= 0:
                    os.close(tree)
        self.loaded.update(str(item[0]) for item in load)
        self.prepared[profile] = generation
        return self.seq

    def answer(self) -> dict[str, Any] | None:
        try:
            data = self.sock.recv(1 << 16)
        except OSError:
            return None
        return _read_answer(data) if data else None

    def close(self) -> list[dict[str, Any]]:
        """End the cloner; the answers it sent before it ended."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        if not self.dead:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        answers = []
        self.sock.setblocking(False)
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                break
            if not data:
                break
            answers.append(_read_answer(data))
        self.sock.close()
        return answers


# The cloner's protocol (``cloner.c`` reads and writes the same layouts): a request starts
# with (seq, run Python first, clone flags, effective uid, gid; -1: unchanged), an answer
# is (seq, pid or -errno) and, from Python, the error's text.
_REQUEST = struct.Struct("<IIqii")
_ANSWER = struct.Struct("<Ii")
_REQUEST_MAX = 1 << 20
_MAX_FDS = 16  # cloner.c's MAX_FDS: the call socket, the workspace, the interpreter trees


#: A request larger than this leaves its mask targets out (``_drop_targets``): under the
#: cloner's buffer and the control socket's one-packet bound (``net.core.wmem_default``).
_REQUEST_SEND_MAX = 128 << 10


def _drop_targets(body: dict[str, Any]) -> bool:
    """Take the mask targets ``masks.with_targets`` added out of the request ``body`` (the
    child walks the tree itself, as when ``masks.vetted`` refuses them); whether there
    were any."""
    plan = body.get("plan")
    if not isinstance(plan, dict):
        return False
    plan_masks = plan.get("masks")
    if not isinstance(plan_masks, dict) or "targets" not in plan_masks:
        return False
    plan_masks = dict(plan_masks)
    del plan_masks["targets"]
    body["plan"] = {**plan, "masks": plan_masks}
    return True


def _read_answer(data: bytes) -> dict[str, Any]:
    seq, pid = _ANSWER.unpack_from(data)
    if pid > 0:
        return {"seq": seq, "pid": pid}
    text = data[_ANSWER.size :].decode(errors="replace")
    return {"seq": seq, "error": text or f"clone: {os.strerror(-pid)}"}


def _request_body(data: bytes) -> dict[str, Any]:
    (size,) = HEADER.unpack_from(data, _REQUEST.size)
    start = _REQUEST.size + HEADER.size
    return decode_body(data[start : start + size])


def _prepare(zygote: Zygote, data: bytes) -> None:  # pragma: no cover - the cloner's
    """What must be in the cloner before the clone, for this and every later call: the
    tools it has not loaded yet, the profile's mask globs compiled (and their translations,
    which the tools' glob sets use too), as the zygote's own look at the tree compiled them,
    and the profile's new root compiled to operation lists."""
    request = _request_body(data)
    for key, entry, base, folder in request["load"]:
        zygote.tools[key] = _load_tool(entry, base, folder)
    plan = child.CallPlan(**request["plan"])
    spec = masks.MaskSpec.from_plan(plan.masks)
    if spec:
        masks.compile_spec(spec)
        if "targets" not in plan.masks:
            # The walk's kept listings too, refreshed: the call's own walk then lists only
            # the directories changed since, not the whole tree. (A spare given the fork-
            # server's targets does not walk.)
            masks.warm(plan.workspace, spec)
    cfg = zygote.cfg
    limits = child.ChildLimits.from_dict(plan.limits)
    if cfg is not None and cfg.mount_ops is not None:
        # The profile's walls as one list (``walls.py``, cached), as for the new root.
        child.wall_ops(cfg, plan, limits)
    if cfg is not None and "mountns" not in cfg.disable:
        # The profile's new root as operation lists (``newroot.op_lists``, cached): what
        # the call computes from the same plan finds them here.
        newroot.op_lists(
            plan,
            limits,
            ws=bool(plan.workspace and plan.access != "none"),
            py_paths=newroot.tree_paths(plan),
            state_dirs=cfg.state_dirs,
            mount_proc="pidns" not in cfg.disable,
        )


def _child(zygote: Zygote, data: bytes, fds: list[int]) -> None:  # pragma: no cover - a call
    """In the new child: its pid 1 (``child.run_call``). Never returns."""
    try:
        assert zygote.cfg is not None
        request = _request_body(data)
        plan = child.CallPlan(**request["plan"])
        if request["tool"]:
            tool: Any = zygote.tools[request["tool"]]
        else:
            tool = child.SpareTools(zygote.tools)
            tool.warm = request.get("warm")
        call_fd, rest = fds[0], fds[1:]
        ws_fd = rest.pop(0) if request["ws"] else -1
        py_fds = dict(zip(request["trees"], rest, strict=True))
        procs = tuple(f"{path}/cgroup.procs" for path in request["groups"])
        child.run_call(
            zygote.cfg, plan, call_fd, tool, ws_fd=ws_fd, py_fds=py_fds, cgroup_procs=procs
        )
    finally:
        # run_call never returns; should anything escape it, this copy must not go on
        # running the cloner's loop.
        os._exit(child.EXIT_SETUP)


def _load_tool(entry: str, base: str, folder: bool) -> Any:
    """A tool's function as this process keeps it: a built-in one imported here, a folder
    tool's only named (``child.FolderTool``: imported in its call, behind every wall; its
    code never runs in the fork-server or the cloner, which have the broker's privileges)."""
    if folder:
        return child.FolderTool(entry, base)
    return load_entry(entry, Path(base))


def _fail(sock: socket.socket, seq: int, exc: BaseException) -> None:  # pragma: no cover
    err = exc.errno if isinstance(exc, OSError) and exc.errno else 22  # EINVAL
    text = f"{type(exc).__name__}: {exc}".encode()
    sock.sendall(_ANSWER.pack(seq, -err) + text)


def _cloner_main(zygote: Zygote, sock: socket.socket) -> None:  # pragma: no cover - own process
    """The cloner's loop. A copy of the zygote: every tool and the configuration loaded."""
    # The zygote's socket to the broker and its signal wake-up are not ours.
    signal.set_wakeup_fd(-1)
    _signal.signal(signal.SIGCHLD, int(signal.SIG_DFL))
    zygote.ctl.close()
    # The zygote dying must end us: its calls die with it (their parent-death signal).
    _linux.prctl(1, signal.SIGKILL)
    # Listings (and tests) tell it from the calls, which rename themselves (child.py).
    _linux.set_name(CLONER_NAME)
    if zygote.cloner_serve is None:
        _python_loop(zygote, sock)
        return
    serve = zygote.cloner_serve
    buf = ctypes.create_string_buffer(_REQUEST_MAX)
    fds = (ctypes.c_int * _MAX_FDS)()
    got = (ctypes.c_long * 2)()
    while True:
        # Between two clones only C runs here: no page of this heap is written (each
        # write would be a copy-on-write fault while a call shares the page).
        res = serve(sock.fileno(), buf, _REQUEST_MAX, fds, got)
        if res <= 0:
            return
        data = ctypes.string_at(buf, got[0])
        if res == 2:
            _child(zygote, data, list(fds[: got[1]]))
        try:
            _prepare(zygote, data)  # then handed back: the loop clones it at once
        except Exception as exc:
            for fd in fds[: got[1]]:
                os.close(fd)
            got[0] = got[1] = 0
            _fail(sock, _REQUEST.unpack_from(data)[0], exc)


def _python_loop(zygote: Zygote, sock: socket.socket) -> None:  # pragma: no cover - own process
    """The cloner's loop without ``cloner.so`` (no compiler): the same protocol, in Python."""
    assert zygote.cfg is not None
    while True:
        data, fds, _flags, _addr = socket.recv_fds(sock, _REQUEST_MAX, _MAX_FDS)
        if not data:
            return
        seq = _REQUEST.unpack_from(data)[0]
        try:
            if not fds:
                raise OSError(9, "no socket for the call")  # EBADF
            _prepare(zygote, data)
            pid = zygote._clone(child.clone_flags(zygote.cfg.disable), _linux.CLONE_PARENT)
            if pid == 0:
                _child(zygote, data, fds)
        except Exception as exc:
            _fail(sock, seq, exc)
            continue
        finally:
            for fd in fds:
                os.close(fd)
        sock.sendall(_ANSWER.pack(seq, pid))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    ctl = socket.socket(fileno=int(args[0]))
    # The broker dying must end us and, through each child's parent-death signal, every call.
    _linux.prctl(1, signal.SIGKILL)
    # The broker may have died during our boot, before the signal was armed: then nothing
    # sends it, and a copy of its socket end (a child it forked) would keep us waiting.
    if os.getppid() != int(args[1]):
        return 0
    # Subreaper: orphans of a call without a pid namespace (test-only) are ours to reap.
    _linux.prctl(36, 1)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        Zygote(ctl).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
