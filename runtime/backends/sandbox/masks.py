"""Kernel masks over policy-denied workspace paths, made in the call's own mount namespace.

The broker's path rules are string checks on arguments; a shell, a symlink or a copy walks
around them (``cat .env``, ``ln -s .env x``, ``cp id_rsa key.txt``). Here the policy's globs
become mounts, before the tool exists:

* ``hide`` (``paths.deny`` and ``paths.deny_read``): every existing entry that matches gets an
  empty read-only file (regular files, FIFOs, sockets, devices) or an empty read-only
  directory mounted over it. Reads return nothing, writes fail with EROFS, and the mount
  point cannot be renamed, unlinked or hard-linked by the tool (EBUSY / EXDEV);
* ``readonly`` (``paths.deny_write``): every existing match is bound read-only over itself,
  so ``.git/hooks`` and ``.git/config`` are EROFS whatever program writes them;
* ``pin`` (calls that may write, ``MaskSpec.pin``): the directories above those entries that
  a rename could carry one out of its glob through (``mv config cfg`` when
  ``config/secrets/**`` is denied: the mount follows the entry, the next call's look finds
  it by path) are bound onto themselves: renaming one is EBUSY, moving anything out of one
  EXDEV. Which ones is derived from the globs in ``_pins``; :func:`pinned` adds them.

A symlink is never followed and never masked itself: it resolves inside the new root, so
what it names is masked (or not) on its own account. Entries the tool creates during the
call are its own data, not secrets, and stay as they are.

Two things a call can leave behind would carry a secret the user writes *later* past the
masks, which cover names, not inodes; both refuse every call until the user removes them:

* a hidden file with a second hard link (``ln x .env``): the other name reads what is
  written to ``.env`` in place, and cannot be found short of indexing every inode;
  likewise a file with a second link inside a hidden directory (the walk looks into hidden
  directories for these two things only: what is in them needs no mask of its own);
* a symbolic link on a denied path (``ln -s x .env``, or ``config -> y`` when
  ``config/prod.env`` is denied) that leads — as a host process writing through it follows
  it, ``..`` and absolute targets on the host — to an entry inside the workspace that is not
  hidden itself (nor inside a hidden directory, nor a missing name a hide glob covers). A
  link leading outside the workspace, or nowhere a write can land, is left alone; a link a
  ``**/name`` glob would see through (a directory link keeps the names below it) is not on
  a denied path at all, so the links of a pnpm tree cost nothing.

A ``deny_write`` path that does not exist yet (``.git/**`` in a workspace with no ``.git``)
has nothing to bind read-only, and Landlock grants by hierarchy, not by name: a call can
create it, hooks and all. ``_denywrite`` looks again when such a call has ended and moves
what it made there aside (``find``'s ``ro_links`` and ``lenient`` serve it).

Hazards, and what attackers control: the tree itself, also *during* the walk, through a
concurrent call in the same workspace. So the walk descends by directory descriptors opened
``O_NOFOLLOW`` (a swapped-in symlink is never entered), a directory that changes while it is
walked (mtime/ctime) fails the call closed, and every mount lands on an ``O_PATH`` descriptor
re-opened component by component with ``O_NOFOLLOW`` and checked to be the inode the walk
saw — never on a path string. The walk is bounded in entries and depth; past the bound the
call fails closed with a set-up error saying so, never silently unmasked. Globs with a
literal first segment (``.git/**``) cost one look-up; ``**/x`` globs need the whole walk.

The whole walk is paid once, not per call: what the walk did in each directory (the entries
it acted on, and how many it listed) is kept with the directory's identity — device, inode,
mtime and ctime — and replayed while that identity is unchanged. Every entry added, removed,
renamed or replaced in a directory moves its ctime, which nothing in user space can set
back; the one blind spot, a change in the same timestamp tick as the listing, is closed as
git closes its "racy" index entries: a directory whose timestamps are recent is never kept.
Kept only on local filesystems whose timestamps move with every change made through this
kernel, and only below the workspace's own mount. A warm walk costs a few system calls per
directory instead of one regex per entry (benchmarks/bench_masks.py).

That is still ~9 µs per directory, 0.15 s for a 16,000-directory ``node_modules``. So the
fork-server's look before each call (:func:`signature`, ``find(watch=True)``) also keeps an
inotify watch on every directory it walks (``_dirwatch``: why a change that returned before
the look is always in the queue), added before the directory is listed or re-checked, and a
summary of each subtree: its entry count, the entries a glob matched, the denied-path links.
The next look drains the queue: a directory whose files changed is listed again (whatever its
timestamps say) with the directories above it; every other subtree is its summary — the
entries it masks are looked at again (a link count moves without an event), the hidden
directories searched again, the links followed again, nothing else. A directory removed or
renamed away drops the summaries at and below its path, and its parent is listed again (a
renamed one is walked at its new path, which its new parent's event names). An overflow, a
mount or unmount, an event nothing can be placed by, a directory on another filesystem or at
two paths, a watch the user's limit refuses: the summaries are dropped and the timestamp walk
decides, as without watches. The fork-server reads the queues as they fill (:func:`pump`,
from its event loop while calls run), so that a burst of changes between two looks does not
overflow them. The spare forked
after the look mounts the look's targets instead of walking (``with_targets``); it serves a
call only if the look at that call finds the same targets.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from runtime._depth import WALK_MAX_DEPTH
from runtime._globs import GlobSet, compile_segments, star_closure, step_segments
from runtime.backends.sandbox import _linux, _pins
from runtime.backends.sandbox._dirwatch import DirWatch

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "MAX_DEPTH",
    "MAX_PINS",
    "TARGETS_MAX_BYTES",
    "MaskSpec",
    "MaskTarget",
    "Signature",
    "apply",
    "compile_spec",
    "find",
    "find_settled",
    "generation",
    "link_identities",
    "open_components",
    "pinned",
    "pump",
    "signature",
    "vetted",
    "warm",
    "watch_fds",
    "with_targets",
    "write_denied",
]

#: Directory entries the walk may look at per call before it fails the call closed. A
#: JavaScript checkout holds 100,000-300,000 (``node_modules``); the first walk of a tree this
#: size costs ~5 s of CPU, later looks at an unchanged tree almost nothing (the watches).
DEFAULT_MAX_ENTRIES = 1_000_000
#: Directory levels below the workspace the walk may descend before it fails closed. The
#: walk recurses one Python frame per level (``visit``, ``inside_hidden``): 256 levels and
#: the ~40 frames of its callers (a call's set-up is the deepest) stay far below the
#: interpreter's default limit of 1,000. A path 256 levels deep is 512 bytes at least; a
#: nested ``node_modules`` (npm before v3) reaches 50-100 levels in the worst trees seen.
MAX_DEPTH = WALK_MAX_DEPTH
#: Directories a writing call may pin (``pinned``) before it fails closed: one mount each,
#: 60-130 µs of the call's set-up apiece, growing with the mounts already made (1,000 pins
#: over 1,000 masks: +0.1 s; benchmarks/SANDBOX.md, eleventh round). A '**/'-led glob needs
#: none however many entries it matches; one anchored at every level (``a/*/k.key``) needs
#: the directories on the way to each match.
MAX_PINS = 1024

#: A directory whose mtime or ctime is less than this old when the walk starts (or in the
#: future) is listed afresh every time and never kept: a change in the same timestamp tick
#: as the listing would leave both as they were. Above the coarsest granularity among
#: ``_KEPT_FS`` (ext2/ext3's one-second timestamps) and a clock tick's lag, with room for
#: a small step of the clock.
RACY_NS = 3_000_000_000
#: ``statfs`` magic numbers of the filesystems whose kept listings are trusted: local ones
#: that move a directory's ctime on every change made through this kernel (ext2/3/4, XFS,
#: Btrfs, tmpfs, F2FS, ZFS). Network and FUSE filesystems (attribute caches, servers'
#: clocks) and overlayfs (a merged directory's times come from one of its layers) are
#: walked afresh on every call.
_KEPT_FS = frozenset({0xEF53, 0x58465342, 0x9123683E, 0x01021994, 0xF2F52010, 0x2FC12FC1})
#: Directories kept per spec; past this the kept listings are dropped and refilled.
_KEPT_MAX = 100_000
#: Workspaces watched per spec (a fork-server serves one); past this all are dropped.
_WATCHED_ROOTS = 4

_META = frozenset("*?[")
#: Symbolic links followed while finding where a denied-path link leads: the kernel's own
#: bound (MAXSYMLINKS), past which a write through the link fails with ELOOP.
_LINK_HOPS = 40
#: Parent directories climbed to tell whether a link's landing is inside the workspace.
_CLIMB_MAX = 4096
_UP_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_WALK_ATTEMPTS = 3
_MOVE_MOUNT_T_EMPTY_PATH = 0x40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_MASK_ATTRS = (
    _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV | 0x8
)  # 0x8 = MOUNT_ATTR_NOEXEC
_RO_ATTRS = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
_PIN_ATTRS = _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV


@dataclass(frozen=True, slots=True)
class MaskSpec:
    """What to mask: workspace-relative globs (the policy's syntax, matched case-insensitively
    like the broker's deny checks), and the walk's bound in entries.

    ``pin``: also bind onto itself every directory above a target that a rename could move
    the target out from under its glob through (``_pins``). The backend sets it for the
    calls that may write the workspace (a read-only one cannot rename); not compared, so the
    specs of both kinds of call share one compiled matcher and its kept listings."""

    hide: tuple[str, ...] = ()
    readonly: tuple[str, ...] = ()
    max_entries: int = DEFAULT_MAX_ENTRIES
    pin: bool = field(default=False, compare=False)
    #: The workspace-relative components of a directory the call removes whole (a recursive
    #: ``delete_file``; the backend sets it from the call's validated arguments), () for
    #: none. Below it the walk does not fail past ``MAX_DEPTH``: it stops there and masks
    #: nothing deeper. Why that keeps the masks' promise: the call's one act on that
    #: subtree is to remove it (the toolkit's fd-based rmtree: it unlinks, never opens a
    #: file), so nothing deeper is read or written through the missing masks; and without
    #: it a tree too deep to check (``mkdir -p`` in a shell, or by hand) refuses every call,
    #: its own removal included. Not compared: the matcher and its kept listings are shared.
    prune: tuple[str, ...] = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.hide or self.readonly)

    @classmethod
    def from_plan(cls, data: Mapping[str, Any] | None) -> MaskSpec:
        if not data:
            return cls()
        return cls(
            hide=tuple(str(g) for g in data.get("hide", ())),
            readonly=tuple(str(g) for g in data.get("readonly", ())),
            max_entries=int(data.get("max_entries", DEFAULT_MAX_ENTRIES)),
            pin=bool(data.get("pin", False)),
            prune=tuple(str(p) for p in data.get("prune", ())),
        )

    def as_plan(self) -> dict[str, Any]:
        return {
            "hide": list(self.hide),
            "readonly": list(self.readonly),
            "max_entries": self.max_entries,
            "pin": self.pin,
            **({"prune": list(self.prune)} if self.prune else {}),
        }

    def pruned(self, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` (past ``MAX_DEPTH``) lies in the subtree the call removes."""
        return bool(self.prune) and parts[: len(self.prune)] == self.prune


class MaskTarget(NamedTuple):
    """One entry to mask: its workspace-relative components, what to do, and its identity."""

    parts: tuple[str, ...]
    action: str  # "hide" | "readonly" | "pin" (a directory bound onto itself, ``pinned``)
    dev: int
    ino: int
    is_dir: bool
    #: A file's ctime (0 for a directory, whose ctime moves with its entries): with the
    #: inode number, tells a file renamed away and linked back from the one that was masked.
    ctime_ns: int

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


#: The prefixes of the anchored globs still possible at a directory (``_Matcher.live_below``).
_Live = tuple[tuple[re.Pattern[str], ...], ...]


class _Step(NamedTuple):
    """One entry of a directory the walk acts on: masks it, or descends into it."""

    name: str
    action: str | None  # "hide" | "readonly" | None (only descend)
    listed_dir: bool
    live: _Live
    #: A symbolic link on a denied path: where it leads is checked after the walk.
    link: bool = False


class _Kept(NamedTuple):
    """What the walk did in one directory, valid while the directory's identity holds."""

    ident: tuple[int, int, int, int]  # st_dev, st_ino, st_mtime_ns, st_ctime_ns
    entries: int  # listed, for the bound: a kept listing counts as the listing it replaces
    steps: tuple[_Step, ...]


class _Node(NamedTuple):
    """What the walk found in one watched directory and everything below it, that every walk
    does again: valid while no directory of it reports a change (``find``'s ``watch``)."""

    entries: int  # counted outside hidden directories (those are listed again)
    acts: tuple[tuple[tuple[str, ...], _Step], ...]  # the entries a glob matched, in order
    links: tuple[tuple[str, ...], ...]  # the denied-path links outside hidden directories


class _Tree:
    """One workspace's watches (in the process that made them) and, per directory walked,
    its path and the summary of its subtree."""

    __slots__ = ("__weakref__", "dirty", "gone", "lost", "nodes", "paths", "watch")

    def __init__(self, watch: DirWatch) -> None:
        self.watch = watch
        #: What :meth:`pump` read before the next walk: directories gone, and whether
        #: nothing can be placed (``DirWatch.drain``).
        self.gone: set[tuple[tuple[int, int], str | None]] = set()
        self.lost = False
        #: (parts, under read-only) → the subtree's summary.
        self.nodes: dict[tuple[tuple[str, ...], bool], _Node] = {}
        #: (st_dev, st_ino) of each watched directory → where the walk saw it.
        self.paths: dict[tuple[int, int], tuple[str, ...]] = {}
        #: Directories whose entries changed since their summary was made.
        self.dirty: set[tuple[int, int]] = set()

    def forget(self) -> None:
        self.nodes.clear()
        self.paths.clear()
        self.dirty.clear()
        self.gone = set()
        self.lost = False

    def pump(self) -> None:
        """Read the queue now, keeping what it said for the next walk (:func:`pump`)."""
        changed, gone, lost = self.watch.drain()
        self.dirty |= changed
        self.gone |= gone
        self.lost = self.lost or lost

    def take(self) -> tuple[set[tuple[int, int]], set[tuple[tuple[int, int], str | None]], bool]:
        """``DirWatch.drain``, with what :meth:`pump` read before."""
        changed, gone, lost = self.watch.drain()
        gone |= self.gone
        lost = lost or self.lost
        self.gone, self.lost = set(), False
        return changed, gone, lost

    def drop(self, gone: set[tuple[tuple[int, int], str | None]]) -> bool:
        """Forget what was known at and below each path ``gone`` names (``DirWatch.drain``)
        and mark its parent changed: the next walk lists the parent again and walks what is
        now at that path (a directory renamed elsewhere is walked at its new path, found by
        its new parent's event). False when a path cannot be placed (a directory never seen
        at a known path, the workspace itself): then everything is forgotten, as before.
        Everything is placed before anything is dropped: the events of ``rm -rf d`` name
        ``d/c`` and ``d`` in any order."""
        where: set[tuple[str, ...]] = set()
        for ident, name in gone:
            base = self.paths.get(ident)
            if base is None:
                return False
            path = base if name is None else (*base, name)
            if not path:
                return False
            where.add(path)
        by_path = {parts: ident for ident, parts in self.paths.items()}
        for path in where:
            parent = by_path.get(path[:-1])
            if parent is None:
                return False
            self.dirty.add(parent)

        def below(parts: tuple[str, ...]) -> bool:
            return any(parts[:i] in where for i in range(1, len(parts) + 1))

        for ident in [i for i, parts in self.paths.items() if below(parts)]:
            del self.paths[ident]
            self.dirty.discard(ident)
        for key in [k for k in self.nodes if below(k[0])]:
            del self.nodes[key]
        return True


#: Every tree whose watches this process made (the fork-server's: ``pump``, ``watch_fds``).
#: Weak: a tree dropped with its spec's matcher must free its inotify instance (a user has
#: 128, ``fs.inotify.max_user_instances``, shared with all of the user's programs).
_TREES: weakref.WeakSet[_Tree] = weakref.WeakSet()


def watch_fds() -> dict[int, int]:
    """The descriptors of this process's watch queues, for its event loop (when one is
    readable, :func:`pump`), each with a token that changes when its number is reused."""
    out: dict[int, int] = {}
    for tree in list(_TREES):
        fd = tree.watch.fileno()
        if fd >= 0:
            out[fd] = hash((id(tree.watch), tree.watch.opened))
    return out


def pump() -> None:
    """Read every watch queue of this process now, keeping what it said for each tree's next
    look. The fork-server does it whenever a queue is readable, while calls run: a burst of
    changes (``npm install`` in a call) past ``fs.inotify.max_queued_events`` (16,384 by
    default) overflows a queue read only at the next look, and an overflow forgets every
    summary (a full walk)."""
    for tree in list(_TREES):
        if tree.watch.owned():
            tree.pump()


def _max_watches() -> int:
    """Watches one walk's set may hold: at most half the user's (``max_user_watches`` is
    shared with every other program of the user, editors' file watchers among them)."""
    try:
        with open("/proc/sys/fs/inotify/max_user_watches", encoding="ascii") as f:
            limit = int(f.read())
    except (OSError, ValueError):
        return 0
    return min(_KEPT_MAX, limit // 2)


class _Matcher:
    """The globs, plus the literal leading segments of each for pruning the walk, and the
    walk's kept listings (``kept``), watches and records (the only parts that change)."""

    def __init__(self, spec: MaskSpec) -> None:
        #: (root dev, root ino, parts, under_ro or "hidden") → what the walk did there.
        self.kept: dict[tuple[int, int, tuple[str, ...], bool | str], _Kept] = {}
        #: (root dev, root ino) → the watches over its walked directories and what the
        #: walks found below each (only in the process that made the watches).
        self.trees: dict[tuple[int, int], _Tree] = {}
        #: Moves whenever ``kept`` changes: another process's copy of it is as fresh as
        #: this one while their generations agree (:func:`generation`).
        self.generation = 0
        self.hide = GlobSet(spec.hide, casefold=True)
        self.readonly = GlobSet(spec.readonly, casefold=True)
        # One alternation of every glob first: most entries match none (one regex, not two).
        self.any = GlobSet((*spec.hide, *spec.readonly), casefold=True)
        self.floating = False
        prefixes: list[tuple[re.Pattern[str], ...]] = []
        for pattern in (*spec.hide, *spec.readonly):
            lit: list[re.Pattern[str]] = []
            for seg in pattern.split("/"):
                if _META & set(seg):
                    break
                # The same case-insensitive regex as the glob's own literal characters, so
                # pruning never disagrees with matching.
                lit.append(re.compile(re.escape(seg), re.IGNORECASE | re.DOTALL))
            if not lit:
                self.floating = True
            prefixes.append(tuple(lit))
        self.prefixes = tuple(prefixes)
        # A cheap pre-test per entry, so that the exact (whole-path) match runs only where a
        # glob can hit. '**/SEG' hits only an entry whose name matches SEG. '**/SEG/**' also
        # hits everything below such a directory, but that never decides anything: a hidden
        # directory is not entered, and below a read-only one "read-only" is moot. Globs with
        # a literal first segment hit only below a matching prefix; other shapes: any entry.
        names: list[str] = []
        anchored: list[tuple[re.Pattern[str], ...]] = []
        self.generic = False
        name_globs: set[str] = set()
        for pattern, lit_t in zip((*spec.hide, *spec.readonly), prefixes, strict=True):
            segs = pattern.split("/")
            if (
                segs[0] == "**"
                and len(segs) in (2, 3)
                and segs[1] != "**"
                and segs[2:] in ([], ["**"])
            ):
                names.append(segs[1])
                name_globs.add(pattern)
            elif lit_t:
                anchored.append(lit_t)
            else:
                self.generic = True
        self.names = GlobSet(names, casefold=True)
        self.anchored = tuple(anchored)
        # For ``exposes``: a '**/name' glob puts a link on a denied path only by matching
        # it (which ``action`` tells), so only the other hide globs are matched here.
        self.hide_segments = tuple(
            compile_segments(p, casefold=True) for p in spec.hide if p not in name_globs
        )

    def tree(self, root: tuple[int, int]) -> _Tree | None:
        """The watches of the tree ``root`` in this process (made on first use), or None:
        in a forked copy of the process that made them, or once they failed."""
        tree = self.trees.get(root)
        if tree is None:
            if len(self.trees) >= _WATCHED_ROOTS:
                for old in self.trees.values():
                    old.watch.close()
                self.trees.clear()
            tree = self.trees[root] = _Tree(DirWatch(_max_watches()))
            _TREES.add(tree)
        if not tree.watch.owned():
            tree.forget()
            return None
        return tree

    def exposes(self, parts: tuple[str, ...]) -> bool:
        """Whether a symbolic link at ``parts`` is on a denied path: a hide glob matches
        ``parts`` itself, or could match something below it *through* ``parts``' names. A
        glob's leading ``**`` matches the names below a directory link wherever it leads, so
        ``**/.env`` cares only about a link named ``.env``; ``config/prod.env`` cares about
        ``config`` too. Matched one segment at a time (a whole-path regex cannot say what
        could match below a path). The '**/name' globs are left to the caller, which asks
        only about a link no hide glob matches: one of them can put a link on a denied
        path only by matching it."""
        for segs in self.hide_segments:
            n = len(segs)
            states = star_closure(segs, {0})
            # The states a leading '**' keeps by absorbing every name so far.
            absorbed = states if segs[0] is None else frozenset()
            for name in parts:
                states = step_segments(segs, states, name)
                if not states:
                    break
            if n in states or any(s < n for s in states - absorbed):
                return True
        return False

    def action(self, rel: str) -> str | None:
        if self.any.match(rel) is None:
            return None
        if self.hide.match(rel) is not None:
            return "hide"
        if self.readonly.match(rel) is not None:
            return "readonly"
        return None

    @staticmethod
    def live_below(
        live: tuple[tuple[re.Pattern[str], ...], ...], depth: int, name: str
    ) -> tuple[tuple[re.Pattern[str], ...], ...]:
        """The anchored globs' prefixes still possible for ``name`` at ``depth`` (and below)."""
        return tuple(lit for lit in live if len(lit) <= depth or lit[depth].fullmatch(name))

    def may_hold_match(self, parts: tuple[str, ...]) -> bool:
        """False only when no glob can match ``parts`` or anything below it."""
        if self.floating:
            return True
        for lit in self.prefixes:
            n = min(len(parts), len(lit))
            if all(lit[i].fullmatch(parts[i]) for i in range(n)):
                return True
        return False


@functools.lru_cache(maxsize=32)
def _matcher(spec: MaskSpec) -> _Matcher:
    """The compiled globs of ``spec``: compiling them is ~0.4 ms, and the fork-server and
    each call's tool process walk the same spec on every call. Kept in the fork-server's
    heap (its first call fills it), so the calls inherit it — globs and kept listings: the
    fork-server's walk of each call's stamp keeps them, and the spare forked next replays
    them. Only the kept listings of a _Matcher ever change."""
    return _Matcher(spec)


def _refuse(code: int, message: str) -> OSError:
    return OSError(code, message)


def compile_spec(spec: MaskSpec) -> None:
    """Compile ``spec``'s globs into the cache (a fork-server does it once: every process
    it forks inherits the compiled matcher)."""
    _matcher(spec)


def _now_ns() -> int:
    return time.time_ns()


def find(
    root_fd: int,
    spec: MaskSpec,
    *,
    host: str | None = None,
    watch: bool = False,
    ro_links: list[tuple[str, ...]] | None = None,
    lenient: bool = False,
) -> list[MaskTarget]:
    """Walk the directory ``root_fd`` and list what ``spec`` masks, parents before children.

    Below a hidden directory nothing more is listed (it is covered); below a read-only one
    the walk goes on for entries to hide. ``host`` is the workspace's path on the host, for
    following denied-path links out of the tree (``root_fd`` may be a call's bind of it,
    whose ``..`` is not the host's). Raises OSError (E2BIG past the bound, EAGAIN when the
    tree changed under the walk, EMLINK for a linked hidden file, EXDEV for a denied-path
    link into the workspace) — the call must not run half-masked.

    ``watch``: keep an inotify watch on every directory walked (the fork-server's look before
    each call, :func:`signature`); while none reports a change, the next walk redoes only
    what a walk does every time — each masked entry looked at again, the hidden directories'
    links and link counts, the denied-path links followed — and skips the directories
    (``_dirwatch``: why no change is missed).

    ``ro_links``: filled with the symbolic links a ``readonly`` glob matches (never masked:
    a link resolves inside the new root; ``_denywrite`` needs them, as a link planted at
    ``.git`` is a repository for the host's git). ``lenient``: the hide masks' refusals
    (a linked hidden file, a denied-path link) are not raised: for ``_denywrite``'s sweep
    after a call, which must finish where the next call's look refuses."""
    matcher = _matcher(spec)
    targets: list[MaskTarget] = []
    found_ro_links: list[tuple[str, ...]] = []
    links: list[tuple[str, ...]] = []
    seen = 0
    hidden_seen = 0  # of ``seen``: listed inside hidden directories (looked at every time)
    # Taken before any directory is looked at: a change after it carries a later time.
    racy_after = _now_ns() - RACY_NS
    root = os.fstat(root_fd)
    keep = _linux.fs_magic(root_fd) in _KEPT_FS
    kept = matcher.kept
    tree = matcher.tree((root.st_dev, root.st_ino)) if watch and keep else None
    # What this walk does every time (the summaries of the subtrees it walked).
    acts: list[tuple[tuple[str, ...], _Step]] = []
    own_links: list[tuple[str, ...]] = []
    recordable = tree is not None
    trusting = False  # summaries of quiet subtrees stand in for walking them
    #: The changed directories and every directory above them: walked, not summarised.
    dirty_below: set[tuple[str, ...]] = set()
    #: The changed directories: listed again whatever their timestamps say (a second change
    #: in one timestamp tick leaves them as they were).
    dirty_here: set[tuple[str, ...]] = set()

    def count(entries: int, *, hidden: bool = False) -> None:
        nonlocal seen, hidden_seen
        seen += entries
        if hidden:
            hidden_seen += entries
        if seen > spec.max_entries:
            raise _refuse(
                errno.E2BIG,
                f"the workspace has more than {spec.max_entries} entries to check for "
                "policy-denied paths (paths.deny / paths.deny_write); they cannot all be "
                "masked, so the call does not run (fewer files, or a larger "
                "[paths] mask_max_entries)",
            )

    def listing(
        dfd: int, parts: tuple[str, ...], under_ro: bool, live: _Live
    ) -> tuple[int, list[_Step]]:
        """List ``dfd`` and match its entries: the ones the walk acts on, in listing order."""
        try:
            with os.scandir(dfd) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False), e.is_symlink()) for e in it]
        except PermissionError as exc:
            raise _unreadable(parts) from exc
        count(len(entries))
        depth = len(parts)
        steps: list[_Step] = []
        for name, listed_dir, is_link in entries:
            named = matcher.names.match(name) is not None
            sub_live = matcher.live_below(live, depth, name) if live else live
            action = None
            if named or sub_live or matcher.generic:
                action = matcher.action("/".join((*parts, name)))
            if action == "readonly" and under_ro:
                action = None  # already read-only through its parent's mount
            link = is_link and (action == "hide" or matcher.exposes((*parts, name)))
            if link or action is not None or (listed_dir and (matcher.floating or sub_live)):
                steps.append(_Step(name, action, listed_dir, sub_live, link))
        return len(entries), steps

    def inside_hidden(parent: int, parts: tuple[str, ...]) -> None:
        """The links a hidden directory holds: nothing in it needs a mask (it is covered
        whole), but a call that made the directory (``mkdir .aws``) could have put in it a
        link a user's later write follows out of it (``.aws/credentials -> ../notes``), or
        a second name of a file of its own. Its listing is kept like any other, but each
        file is looked at on every walk: a file's link count moves without its directory's
        times. Entries that vanish meanwhile are skipped, and a change during the walk does
        not fail the call: a change in a hidden directory comes from its maker, who can
        read what lands there anyway, or from the user."""
        if len(parts) > MAX_DEPTH:
            if spec.pruned(parts):
                return  # removed whole by the call (MaskSpec.prune)
            raise _refuse(
                errno.E2BIG,
                f"the workspace is nested deeper than {MAX_DEPTH} directories at "
                f"{'/'.join(parts[:8])}/…; policy-denied paths (paths.deny) cannot be "
                "checked, so the call does not run (delete_file of the deep folder with "
                "recursive=true still runs, and removes it)",
            )
        try:
            dfd = os.open(parts[-1], _DIR_FLAGS, dir_fd=parent)
        except PermissionError as exc:
            raise _unreadable(parts) from exc
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                return
            raise
        try:
            before = os.fstat(dfd)
            ident = (before.st_dev, before.st_ino, before.st_mtime_ns, before.st_ctime_ns)
            key = (root.st_dev, root.st_ino, parts, "hidden")
            hit = kept.get(key) if keep else None
            fresh = hit is None or hit.ident != ident
            if hit is not None and not fresh:
                count(hit.entries, hidden=True)
                entries, steps = hit.entries, hit.steps
            else:
                try:
                    with os.scandir(dfd) as it:
                        steps = tuple(
                            _Step(e.name, None, e.is_dir(follow_symlinks=False), ()) for e in it
                        )
                except PermissionError as exc:
                    raise _unreadable(parts) from exc
                entries = len(steps)
                count(entries, hidden=True)
            for step in steps:
                sub = (*parts, step.name)
                if step.listed_dir:
                    inside_hidden(dfd, sub)
                    continue
                try:
                    st = os.stat(step.name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    links.append(sub)
                elif stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and not lenient:
                    raise _linked(sub, st.st_nlink)
            after = os.fstat(dfd)
            if (
                keep
                and fresh
                and before.st_dev == root.st_dev
                and (before.st_mtime_ns, before.st_ctime_ns)
                == (after.st_mtime_ns, after.st_ctime_ns)
                and max(before.st_mtime_ns, before.st_ctime_ns) < racy_after
            ):
                if len(kept) >= _KEPT_MAX:
                    kept.clear()
                kept[key] = _Kept(ident, entries, steps)
                matcher.generation += 1
        finally:
            os.close(dfd)

    def visit(dfd: int, parts: tuple[str, ...], under_ro: bool, live: _Live) -> None:
        nonlocal recordable
        if len(parts) > MAX_DEPTH:
            if spec.pruned(parts):
                # Removed whole by the call (MaskSpec.prune). The walk is incomplete: no
                # summary of it may stand in for a later call's walk.
                recordable = False
                return
            raise _refuse(
                errno.E2BIG,
                f"the workspace is nested deeper than {MAX_DEPTH} directories at "
                f"{'/'.join(parts[:8])}/…; policy-denied paths (paths.deny) cannot be "
                "checked, so the call does not run (delete_file of the deep folder with "
                "recursive=true still runs, and removes it)",
            )
        before = os.fstat(dfd)
        plain0, acts0, links0 = seen - hidden_seen, len(acts), len(own_links)
        if recordable:
            assert tree is not None
            here = (before.st_dev, before.st_ino)
            if before.st_dev != root.st_dev:
                recordable = False  # another filesystem: its changes may not be reported
            elif not tree.watch.watched(here):
                # Watched before it is looked at, then looked at again: a change after
                # this fstat is reported (or moves the timestamps the walk compares).
                tree.watch.add(dfd, here)
                before = os.fstat(dfd)
                recordable = tree.watch.usable
            if tree.paths.setdefault(here, parts) != parts:
                recordable = False  # one directory at two paths (a bind mount): an event
                # would name only one of them
        ident = (before.st_dev, before.st_ino, before.st_mtime_ns, before.st_ctime_ns)
        key = (root.st_dev, root.st_ino, parts, under_ro)
        hit = kept.get(key) if keep and parts not in dirty_here else None
        fresh = hit is None or hit.ident != ident
        if hit is not None and not fresh:
            count(hit.entries)
            entries, steps = hit.entries, hit.steps
        else:
            entries, listed = listing(dfd, parts, under_ro, live)
            steps = tuple(listed)
        for step in steps:
            name = step.name
            is_dir = step.listed_dir
            sub = (*parts, name)
            if step.link:
                links.append(sub)  # followed once the walk has found every hidden entry
                own_links.append(sub)
                if step.action == "readonly":
                    found_ro_links.append(sub)
                continue
            if step.action is not None:
                acts.append((sub, step))
                done, is_dir = act(dfd, sub, step)
                if done:
                    continue
            if not is_dir or not (matcher.floating or step.live):
                continue
            sub_ro = under_ro or step.action == "readonly"
            if trusting and sub not in dirty_below:
                node = nodes.get((sub, sub_ro))
                if node is not None:
                    summary(node)
                    continue
            if keep and sub not in dirty_here:
                # A kept directory with nothing to act on (most leaves): one lstat of the
                # entry, never followed, says it is the directory kept, unchanged.
                leaf = kept.get((root.st_dev, root.st_ino, sub, sub_ro))
                if leaf is not None and not leaf.steps:
                    try:
                        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    except FileNotFoundError:
                        raise _changed(sub) from None
                    # Watched, it must have been before this look; else it is opened
                    # (and watched) below like any other directory.
                    if (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns) == leaf.ident and (
                        tree is None or tree.watch.watched((st.st_dev, st.st_ino))
                    ):
                        count(leaf.entries)
                        if recordable and tree is not None:
                            if tree.paths.setdefault((st.st_dev, st.st_ino), sub) != sub:
                                recordable = False
                            nodes[(sub, sub_ro)] = _Node(leaf.entries, (), ())
                        continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=dfd)
            except PermissionError as exc:
                raise _unreadable(sub) from exc
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                    raise _changed(sub) from exc
                raise
            try:
                visit(child, sub, sub_ro, step.live)
            finally:
                os.close(child)
        after = os.fstat(dfd)
        if (before.st_mtime_ns, before.st_ctime_ns) != (after.st_mtime_ns, after.st_ctime_ns):
            raise _changed(parts)
        if (
            keep
            and fresh
            and before.st_dev == root.st_dev  # not below another mount
            and max(before.st_mtime_ns, before.st_ctime_ns) < racy_after
        ):
            if len(kept) >= _KEPT_MAX:
                kept.clear()
            kept[key] = _Kept(ident, entries, steps)
            matcher.generation += 1
        if recordable:
            nodes[(parts, under_ro)] = _Node(
                seen - hidden_seen - plain0, tuple(acts[acts0:]), tuple(own_links[links0:])
            )

    def act(dfd: int, sub: tuple[str, ...], step: _Step) -> tuple[bool, bool]:
        """The entry ``sub`` (in ``dfd``) a glob matches, looked at on every walk: masked
        (a target), checked for a second link, and a hidden directory searched for links.
        Returns (done with it, is a directory)."""
        try:
            st = os.stat(step.name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise _changed(sub) from None
        if stat.S_ISLNK(st.st_mode):
            if step.action == "readonly":
                found_ro_links.append(sub)
            return False, step.listed_dir
        is_dir = stat.S_ISDIR(st.st_mode)
        if step.action == "hide" and not is_dir and st.st_nlink > 1 and not lenient:
            raise _linked(sub, st.st_nlink)
        assert step.action is not None
        targets.append(
            MaskTarget(
                sub, step.action, st.st_dev, st.st_ino, is_dir, 0 if is_dir else st.st_ctime_ns
            )
        )
        if step.action == "hide":
            if is_dir:
                inside_hidden(dfd, sub)
            return True, is_dir
        return False, is_dir

    def summary(node: _Node) -> None:
        """A quiet subtree's per-walk work: every masked entry in it looked at again, in
        the walk's order, and its links to follow."""
        count(node.entries)
        parent: tuple[str, ...] | None = None
        dfd = -1
        try:
            for sub, step in node.acts:
                if sub[:-1] != parent:
                    if dfd >= 0:
                        os.close(dfd)
                        dfd = -1
                    dfd = _open_dir(root_fd, sub[:-1])
                    parent = sub[:-1]
                acts.append((sub, step))
                act(dfd, sub, step)
        finally:
            if dfd >= 0:
                os.close(dfd)
        if node.links:  # most subtrees have none: a quiet look is thousands of summaries
            links.extend(node.links)
            own_links.extend(node.links)
            found_ro_links.extend(
                p for p in node.links if matcher.action("/".join(p)) == "readonly"
            )

    def walk() -> None:
        nonlocal seen, hidden_seen
        targets.clear()
        links.clear()
        found_ro_links.clear()
        acts.clear()
        own_links.clear()
        seen = hidden_seen = 0
        node = nodes.get(((), False)) if trusting and () not in dirty_below else None
        if node is not None:
            summary(node)
        else:
            visit(root_fd, (), False, matcher.anchored)

    if tree is None:
        nodes: dict[tuple[tuple[str, ...], bool], _Node] = {}
        walk()
    else:
        nodes = tree.nodes
        try:
            changed, gone, moved = tree.take()
            tree.dirty |= changed
            if gone and not moved:
                moved = not tree.drop(gone)
            if moved or any(ident not in tree.paths for ident in tree.dirty):
                tree.forget()
            for ident in tree.dirty:
                where = tree.paths[ident]
                dirty_here.add(where)
                dirty_below.update(where[:i] for i in range(len(where) + 1))
            trusting = True
            try:
                walk()
            except OSError as exc:
                if exc.errno != errno.EAGAIN:
                    raise
                # A summarised entry gone or replaced (its change is on its way in the
                # queue): walked in full, as ever.
                tree.nodes.clear()
                trusting = False
                walk()
            changed, gone, moved = tree.take()
            if moved or not recordable or not tree.watch.usable:
                tree.forget()
            else:
                # The changes seen while walking: those directories are walked next time.
                tree.dirty = changed
                if gone and not tree.drop(gone):
                    tree.forget()
        except BaseException:
            tree.forget()
            raise
    if ro_links is not None:
        ro_links.extend(found_ro_links)
    if links and not lenient:
        hidden = {(t.dev, t.ino) for t in targets if t.action == "hide"}
        for parts in links:
            _vet_link(
                root_fd,
                (root.st_dev, root.st_ino),
                parts,
                hidden=hidden,
                host=host,
                matcher=matcher,
            )
    return targets


class _Landing(NamedTuple):
    """Where a write through a link lands: a directory, and the name in it (None: the
    directory itself); ``rel`` is the directory's workspace-relative path when the way
    there is known to stay in the tree since it last passed the workspace's root (None:
    unknown, and then a missing name is not taken to be hidden by its name)."""

    dir_fd: int
    name: str | None
    rel: tuple[str, ...] | None


def _vet_link(
    root_fd: int,
    root_ident: tuple[int, int],
    parts: tuple[str, ...],
    *,
    hidden: set[tuple[int, int]],
    host: str | None,
    matcher: _Matcher,
) -> None:
    """Refuse (OSError) unless the denied-path link at ``parts`` leads outside the workspace,
    onto a hidden entry (or a missing name a hide glob covers), or nowhere a write lands.

    Hazard: the link and every directory on its way are the attacker's; they are followed
    by descriptor, one component at a time, as the kernel follows them for a host process,
    and anything that cannot be followed to the end (a directory we may not search) fails
    closed. A concurrent call that changes them after this look gains nothing it could not
    read already: it runs unmasked on what it created."""
    try:
        landing = _landing(root_fd, root_ident, parts, host)
        if landing is None:
            return
        try:
            exposed = _exposed(landing, root_ident, hidden, matcher)
        finally:
            os.close(landing.dir_fd)
    except OSError as exc:
        if exc.errno == errno.EAGAIN:
            raise
        raise _untraceable(parts, exc) from exc
    if exposed:
        raise _exposing(parts)


def _landing(
    root_fd: int, root_ident: tuple[int, int], parts: tuple[str, ...], host: str | None
) -> _Landing | None:
    """Follow the link at ``parts`` as the kernel would for a write through it. None when
    no write can land: a loop past the kernel's bound, a missing directory on the way, a
    file used as a directory."""
    cur = _open_dir(root_fd, parts[:-1])
    rel: tuple[str, ...] | None = parts[:-1]
    todo = [parts[-1]]  # the components still to follow, last first
    hops = 0
    try:
        while True:
            while todo and todo[-1] in ("", "."):
                todo.pop()
            if not todo:
                out, cur = cur, -1
                return _Landing(out, None, rel)
            comp = todo.pop()
            last = all(c in ("", ".") for c in todo)
            if comp == "..":
                nxt = _up(cur, root_ident, host)
                rel = rel[:-1] if rel else None
            else:
                try:
                    st = os.stat(comp, dir_fd=cur, follow_symlinks=False)
                except FileNotFoundError:
                    if not last:
                        return None
                    out, cur = cur, -1
                    return _Landing(out, comp, rel)
                if stat.S_ISLNK(st.st_mode):
                    hops += 1
                    if hops > _LINK_HOPS:
                        return None
                    target = os.readlink(comp, dir_fd=cur)
                    todo.extend(reversed(target.split("/")))
                    if not target.startswith("/"):
                        continue
                    nxt = os.open("/", _UP_FLAGS)
                    rel = None
                elif stat.S_ISDIR(st.st_mode):
                    nxt = os.open(comp, _UP_FLAGS | os.O_NOFOLLOW, dir_fd=cur)
                    if rel is not None:
                        rel = (*rel, comp)
                    elif (st.st_dev, st.st_ino) == root_ident:
                        rel = ()  # back in the workspace, by its path on the host
                elif last:
                    out, cur = cur, -1
                    return _Landing(out, comp, rel)
                else:
                    return None
            os.close(cur)
            cur = nxt
    finally:
        if cur >= 0:
            os.close(cur)


def _open_dir(root_fd: int, parts: tuple[str, ...]) -> int:
    """An O_PATH descriptor of the directory ``parts``, each component O_NOFOLLOW."""
    return open_components(root_fd, parts, _UP_FLAGS | os.O_NOFOLLOW, _changed)


def open_components(
    root_fd: int,
    parts: tuple[str, ...],
    flags: int,
    changed: Callable[[tuple[str, ...]], OSError],
) -> int:
    """``parts`` below ``root_fd`` opened one component at a time with ``flags`` (which
    name O_NOFOLLOW: a link a concurrent call swapped in is never followed). A component
    gone, or no longer a directory, raises ``changed(parts)``: the tree moved under us."""
    cur = os.dup(root_fd)
    try:
        for comp in parts:
            nxt = os.open(comp, flags, dir_fd=cur)
            os.close(cur)
            cur = nxt
    except OSError as exc:
        os.close(cur)
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            raise changed(parts) from exc
        raise
    return cur


def _up(cur: int, root_ident: tuple[int, int], host: str | None) -> int:
    """The parent of ``cur``. At the workspace's root it is the host's parent of it: in a
    call's mount namespace the root descriptor is a bind whose ``..`` is our new root."""
    st = os.fstat(cur)
    if host is not None and (st.st_dev, st.st_ino) == root_ident:
        return os.open(os.path.join(host, ".."), _UP_FLAGS)
    return os.open("..", _UP_FLAGS, dir_fd=cur)


def _exposed(
    landing: _Landing,
    root_ident: tuple[int, int],
    hidden: set[tuple[int, int]],
    matcher: _Matcher,
) -> bool:
    """True when ``landing`` is inside the workspace, and neither it nor a directory above
    it is hidden (a missing name counts as hidden when a hide glob covers it: once written,
    the next walk masks it)."""
    if landing.name is not None:
        try:
            st = os.stat(landing.name, dir_fd=landing.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if landing.rel is not None:
                rel = "/".join((*landing.rel, landing.name))
                if matcher.action(rel) == "hide":
                    return False
        else:
            if (st.st_dev, st.st_ino) in hidden:
                return False
    cur, owned = landing.dir_fd, False
    try:
        for _ in range(_CLIMB_MAX):
            st = os.fstat(cur)
            ident = (st.st_dev, st.st_ino)
            if ident in hidden:
                return False
            if ident == root_ident:
                return True
            parent = os.open("..", _UP_FLAGS, dir_fd=cur)
            up = os.fstat(parent)
            if (up.st_dev, up.st_ino) == ident:  # the top of the tree: outside
                os.close(parent)
                return False
            if owned:
                os.close(cur)
            cur, owned = parent, True
        return True  # deeper than any real tree: fail closed
    finally:
        if owned:
            os.close(cur)


def generation(spec: MaskSpec) -> int:
    """How many times this process's kept listings for ``spec`` have changed: a process
    forked when it read ``n`` holds the same listings while it still reads ``n``."""
    return _matcher(spec).generation


def warm(workspace: str | None, spec: MaskSpec) -> None:
    """Walk ``workspace`` for its kept listings only, so that the processes this one forks
    next replay them instead of listing the whole tree (the fork-server's cloner, before
    each clone). Nothing is decided here: a walk that fails keeps what it kept and is
    otherwise ignored; each call's own walk still checks, and fails closed, on its own."""
    if not workspace or not spec:
        return
    try:
        root = os.open(workspace, _DIR_FLAGS)
    except OSError:
        return
    try:
        find(root, spec, host=workspace)
    except OSError:
        pass
    finally:
        os.close(root)


def _unreadable(parts: tuple[str, ...]) -> OSError:
    # The walker has at least the tool's rights; a directory it cannot list may still be
    # searchable by name, so it cannot be assumed to hold nothing denied.
    where = "/".join(parts) or "the workspace root"
    return _refuse(
        errno.EACCES,
        f"cannot list {where!r} to mask the policy-denied paths in it (permission denied); "
        "the call does not run unmasked",
    )


def _linked(parts: tuple[str, ...], links: int) -> OSError:
    # Hazard: the tool could make a hidden name a second link of a file of its own (`ln x
    # .env` before the user writes .env in place); the mask covers the name, not the inode,
    # and the other names cannot be found short of indexing every inode of the tree. Only
    # for hidden files: git hard-links its objects (clone --local), and refusing linked
    # read-only entries would stop every call in such a repository. A call cannot give a
    # deny_write file a second name (link() across its read-only mount is EXDEV, and one it
    # creates on a denied path is moved aside when it ends, ``_denywrite``); a second,
    # writable name the user made stays a known gap.
    return _refuse(
        errno.EMLINK,
        f"{'/'.join(parts)!r} is denied by the policy but has {links} hard links: another "
        "name in the workspace shares its content, which masking cannot hide, so the call "
        "does not run (remove the other links)",
    )


def _exposing(parts: tuple[str, ...]) -> OSError:
    rel = "/".join(parts)
    return _refuse(
        errno.EXDEV,
        f"{rel!r} is a symbolic link on a path the policy denies, and it leads to an entry "
        f"inside the workspace that is not hidden: what is written through it (a secret "
        f"saved to {rel!r}) would be readable there, so the call does not run (remove the "
        "link, or point it at a hidden file)",
    )


def _untraceable(parts: tuple[str, ...], exc: OSError) -> OSError:
    rel = "/".join(parts)
    return _refuse(
        exc.errno or errno.EACCES,
        f"cannot tell where the symbolic link {rel!r}, on a path the policy denies, leads "
        f"({exc.strerror or exc}); it could expose what is written through it, so the call "
        "does not run (remove the link)",
    )


def _changed(parts: tuple[str, ...]) -> OSError:
    where = "/".join(parts) or "the workspace root"
    return _refuse(
        errno.EAGAIN,
        f"{where!r} changed while policy-denied paths were being masked; the call does not "
        "run half-masked (retry it)",
    )


def find_settled(root_fd: int, spec: MaskSpec, *, host: str | None = None) -> list[MaskTarget]:
    """:func:`find` (and :func:`pinned`), walked again when a concurrent call changed the
    tree under it (a busy workspace is not an attack); still changing after a few walks, the
    call fails closed."""
    for attempt in range(_WALK_ATTEMPTS):
        try:
            return pinned(root_fd, spec, find(root_fd, spec, host=host))
        except OSError as exc:
            if exc.errno != errno.EAGAIN or attempt == _WALK_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def pinned(root_fd: int, spec: MaskSpec, targets: list[MaskTarget]) -> list[MaskTarget]:
    """``targets`` and, when ``spec.pin``, after them the directories above them that the
    call must not rename (``_pins``), each a ``"pin"`` target with its identity (opened
    component by component, O_NOFOLLOW: raises OSError, EAGAIN when one moved)."""
    if not spec.pin or not targets:
        return targets
    paths = _pins.needed(spec.hide, spec.readonly, ((t.parts, t.action, t.is_dir) for t in targets))
    if len(paths) > MAX_PINS:
        raise _refuse(
            errno.E2BIG,
            f"the policy's deny globs need {len(paths)} directories pinned (more than "
            f"{MAX_PINS}) so that no rename carries a protected entry out of its glob; a call "
            "that may write does not run unprotected (fewer matches, or globs led by '**/', "
            "which need no pins)",
        )
    out = list(targets)
    for parts in paths:
        fd = _open_dir(root_fd, parts)
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        out.append(MaskTarget(parts, "pin", st.st_dev, st.st_ino, True, 0))
    return out


def _reopen(root_fd: int, target: MaskTarget) -> int:
    """An O_PATH descriptor of ``target``, each component opened O_NOFOLLOW from the root, and
    checked to be the inode the walk saw: no path string a tool could race is ever mounted on.
    Each step crosses mounts already made (a hidden entry below a read-only directory lands
    on the read-only mount, not under it)."""
    cur = root_fd
    try:
        for comp in target.parts[:-1]:
            nxt = os.open(comp, _DIR_FLAGS, dir_fd=cur)
            if cur != root_fd:
                os.close(cur)
            cur = nxt
        fd = os.open(target.parts[-1], _PATH_FLAGS, dir_fd=cur)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            raise _changed(target.parts) from exc
        raise
    finally:
        if cur != root_fd:
            os.close(cur)
    st = os.fstat(fd)
    if (st.st_ino, stat.S_ISDIR(st.st_mode)) != (target.ino, target.is_dir) or stat.S_ISLNK(
        st.st_mode
    ):
        os.close(fd)
        raise _changed(target.parts)
    return fd


def with_targets(
    plan_masks: Mapping[str, Any], sig: Signature | None, *, unpinned: bool = False
) -> dict[str, Any]:
    """``plan_masks`` (``MaskSpec.as_plan``) with the targets ``sig`` found, for a spare
    forked right after the fork-server's look: it mounts them instead of walking the tree
    again. Safe because the spare serves a call only when the fork-server's look at that
    call finds these very targets (``Signature`` equality, inodes pinned meanwhile).

    ``unpinned``: also when the look found more than the pins' bound (``sig.found``), for
    the child cloned for the very call the look was made for. It needs no pins: it mounts
    on what is at each path *now* (``vetted`` re-opens each one and checks its inode), and a
    change after the look is one made while the call is set up, which no mask covers."""
    out = dict(plan_masks)
    targets = None if sig is None else sig.key
    if targets is None and unpinned and sig is not None:
        targets = sig.found
    if targets is not None and _encoded_size(targets) > TARGETS_MAX_BYTES:
        # The workspace's content must never size a control packet (a request past the
        # socket's buffer is refused whole, EMSGSIZE, and then every call of the tree
        # fails): past the bound the child walks the tree itself, as when ``vetted``
        # refuses the list. The masks are the same either way, only found twice.
        targets = None
    if targets is not None:
        out["targets"] = [
            [list(t.parts), t.action, t.dev, t.ino, t.is_dir, t.ctime_ns] for t in targets
        ]
    return out


#: Bytes of mask targets (an estimate of their encoded size) a plan carries at most, well
#: under the control socket's one-packet bound (``net.core.wmem_default``, ~208 KiB) and
#: the cloner's request buffer; a tree with more is walked again by the child.
TARGETS_MAX_BYTES = 64 << 10


def _encoded_size(targets: tuple[MaskTarget, ...]) -> int:
    """An upper estimate of ``targets``' size once encoded (msgpack: a few bytes of header
    per string and list, at most 9 per integer); it stops counting past the bound."""
    total = 0
    for target in targets:
        total += 64 + sum(len(part.encode(errors="surrogateescape")) + 5 for part in target.parts)
        total += len(target.action)
        if total > TARGETS_MAX_BYTES:
            break
    return total


def vetted(root_fd: int, plan_masks: Mapping[str, Any]) -> list[MaskTarget] | None:
    """The targets :func:`with_targets` put in ``plan_masks``, when each is still the inode
    found (opened component by component, never following a link); None when there are none
    or one moved: then the caller walks the tree itself."""
    raw = plan_masks.get("targets")
    if raw is None:
        return None
    targets = [
        MaskTarget(tuple(str(p) for p in parts), str(action), int(dev), int(ino), bool(d), int(c))
        for parts, action, dev, ino, d, c in raw
    ]
    for target in targets:
        try:
            fd = _reopen(root_fd, target)
        except OSError:
            return None
        os.close(fd)
    return targets


def _move_onto(src_fd: int, dst_fd: int) -> None:
    _linux._sys(
        "move_mount",
        src_fd,
        b"",
        dst_fd,
        b"",
        _linux.MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH,
    )


def apply(
    workspace: str,
    targets: list[MaskTarget],
    *,
    empty_file: str,
    empty_dir: str,
    covered: tuple[str, ...] = (),
) -> list[str]:
    """Mask ``workspace`` (a path in a mount namespace of our own, not reachable by any tool
    yet) with ``targets`` (:func:`find_settled` of the same tree; each is re-opened and
    checked to be the inode found). ``empty_file`` and ``empty_dir`` are the sources hidden
    entries get. ``covered``: top-level names our own set-up may already have mounted over
    (the runtime's state directories); targets at or below one that is now a mount are
    covered by it. Returns the masked (and pinned) workspace-relative paths. Raises OSError:
    the call must not run."""
    root_fd = os.open(workspace, _DIR_FLAGS)
    try:
        if covered:
            dev = os.fstat(root_fd).st_dev
            over = set()
            for name in covered:
                try:
                    if os.stat(name, dir_fd=root_fd, follow_symlinks=False).st_dev != dev:
                        over.add(name)
                except FileNotFoundError:
                    pass
            targets = [t for t in targets if t.parts[0] not in over]
        # Pins first (parents first), then read-only binds: a clone of a directory does not
        # carry the mounts below it, so hiding first would leave the secret visible through
        # the bind on top (and a pin made after would undo the masks below it).
        ordered = sorted((t for t in targets if t.action == "pin"), key=lambda t: len(t.parts))
        ordered += [t for t in targets if t.action == "readonly"]
        ordered += [t for t in targets if t.action == "hide"]
        for target in ordered:
            dst = _reopen(root_fd, target)
            try:
                if target.action != "hide":
                    src = _linux._sys(
                        "open_tree",
                        dst,
                        b"",
                        _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC | _linux.AT_EMPTY_PATH,
                    )
                    # A pin stays writable: only its own name is fixed (EBUSY), and what is
                    # below it cannot leave it (EXDEV).
                    attrs = _RO_ATTRS if target.action == "readonly" else _PIN_ATTRS
                else:
                    source = empty_dir if target.is_dir else empty_file
                    flags = _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC
                    src = _linux.open_tree(source, flags)
                    attrs = _MASK_ATTRS
                try:
                    _linux.mount_setattr(src, attrs)
                    _move_onto(src, dst)
                finally:
                    os.close(src)
            finally:
                os.close(dst)
        return [t.rel for t in ordered]
    finally:
        os.close(root_fd)


class Signature:
    """The masks a tree needs now (see :func:`signature`), holding an ``O_PATH`` descriptor of
    each target: while it is held no target's inode can be freed, so its number cannot come
    back on a re-created entry (a mount on a deleted entry is gone with it). Equal to another
    only with the same targets; close (or drop) it to release the descriptors."""

    __slots__ = ("_fds", "_pid", "found", "key", "ro_links")

    def __init__(
        self,
        key: tuple[MaskTarget, ...] | None,
        fds: list[int],
        *,
        found: tuple[MaskTarget, ...] | None = None,
        ro_links: frozenset[tuple[int, int]] = frozenset(),
    ) -> None:
        self.key = key  # None: the walk did not complete (or pins too many), equal to nothing
        #: What the walk found, even past the pins' bound (None: it did not complete), and
        #: the (st_dev, st_ino) of the links a ``readonly`` glob matches: ``_denywrite``'s
        #: record of what existed before a call.
        self.found = key if found is None else found
        self.ro_links = ro_links
        self._fds = fds
        self._pid = os.getpid()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and self.key is not None and self.key == other.key

    __hash__ = None  # type: ignore[assignment]

    def close(self) -> None:
        fds, self._fds = self._fds, []
        # Hazard: a forked copy (a call's child) closed these numbers at start and may have
        # reused them for its own handles; only the process that opened them closes them.
        if os.getpid() != self._pid:
            return
        for fd in fds:
            os.close(fd)

    def __enter__(self) -> Signature:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # The fork-server drops a spare's stamp with the spare: that releases the pins.
        self.close()


#: Targets beyond which a signature pins nothing and matches nothing (no spare reuse): the
#: fork-server's descriptors are few.
_MAX_PINS = 64


def signature(workspace: str | None, spec: MaskSpec) -> Signature | None:
    """What the masks of ``workspace`` would be now, for the fork-server to tell whether a
    pre-forked child's masks (made when it was forked, after this was taken) still fit the
    tree. Equal to no other when the walk cannot complete: such a tree gets no reuse, and its
    fresh child fails closed on its own. None when nothing is masked."""
    if not workspace or not spec:
        return None
    try:
        root = os.open(workspace, _DIR_FLAGS)
    except OSError:
        return Signature(None, [])
    fds: list[int] = []
    try:
        links: list[tuple[str, ...]] = []
        targets = pinned(root, spec, find(root, spec, host=workspace, watch=True, ro_links=links))
        found = tuple(targets)
        ro_links = link_identities(root, links)
        if len(targets) > _MAX_PINS:
            return Signature(None, [], found=found, ro_links=ro_links)
        for target in targets:
            fds.append(_reopen(root, target))
        return Signature(found, fds, ro_links=ro_links)
    except OSError:
        for fd in fds:
            os.close(fd)
        return Signature(None, [])
    finally:
        os.close(root)


def link_identities(root_fd: int, links: list[tuple[str, ...]]) -> frozenset[tuple[int, int]]:
    """(st_dev, st_ino) of each link at ``links`` (workspace-relative parts, as ``find``'s
    ``ro_links`` names them) that is still a link there; each directory on the way is opened
    O_NOFOLLOW (raises OSError, EAGAIN when one moved)."""
    out: set[tuple[int, int]] = set()
    for parts in links:
        parent = _open_dir(root_fd, parts[:-1])
        try:
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise _changed(parts) from None
        finally:
            os.close(parent)
        if stat.S_ISLNK(st.st_mode):
            out.add((st.st_dev, st.st_ino))
    return frozenset(out)


def write_denied(spec: MaskSpec, rel: str) -> bool:
    """Whether a ``readonly`` glob of ``spec`` matches the workspace-relative path ``rel``
    (whatever a hide glob says: ``_denywrite`` looks inside hidden directories a call made)."""
    return _matcher(spec).readonly.match(rel) is not None
