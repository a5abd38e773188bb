"""Change notification for the mask walk's directories: one inotify instance, and the mount
table's own poll, in the one process that reads them (the fork-server).

The mask walk (``masks.find``) proves a directory unchanged by its timestamps, which costs a
descriptor and a few system calls per directory on every walk: ~9 µs each, 0.15 s per walk of
a 16,000-directory ``node_modules``. Here each directory the walk looked at carries a watch,
added *before* the walk lists or re-checks it; after a walk that saw no event from start to
end, the next look that finds the queue empty and the mount table unmoved knows that no entry
was added, removed, renamed or re-permissioned in any of them since they were checked.

Why no change is missed (the timestamp rule's "racy" gap has no twin here):

* the kernel queues the event inside the system call that makes the change (``vfs_create``,
  ``vfs_rename``, ``vfs_unlink``… call ``fsnotify`` before returning), so a change whose
  call returned before the look starts is in the queue when the look reads it; only a change
  still under way while the call is set up can be missed, and a file created during the set
  up is not masked by any scheme (masks cover what exists when they are mounted);
* a watch follows the inode, whatever path, mount or namespace the change came through;
* the queue's overflow is an event (``IN_Q_OVERFLOW``) and a removed watch is one
  (``IN_IGNORED``): both make the next look walk;
* a mount over a directory moves no timestamp and raises no inotify event: the mount table
  of this process's namespace (where the workspace is looked at, and whose copies the calls
  mount) is polled instead (``/proc/self/mountinfo``, ``POLLPRI`` on every change);
* only local filesystems that report every change made through this kernel are watched (the
  caller's ``_KEPT_FS``), and nothing below another mount.

Hazards: the descriptor must never reach a tool — a process that reads it takes the events
away from us. It is close-on-exec, made lazily in the process that uses it, and a process
forked from that one never reads it (the owner's pid is checked); every call's pid 1 closes
all descriptors it does not know at start. Watches are a per-user resource
(``fs.inotify.max_user_watches``): when one cannot be added the set stops being usable and
the walk goes on by timestamps alone.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct

__all__ = ["DirWatch"]

IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

#: Every change to a directory's entries or to the directory itself. A child's attribute
#: change (``IN_ATTRIB`` on a file) comes too and only costs a walk; a file's link count is
#: not reported to its directory's watch, so the walk re-checks the entries it masks anyway.
_MASK = (
    IN_ATTRIB
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
IN_ISDIR = 0x40000000
#: Events after which nothing of the last walks can be placed: an unmount below a watched
#: directory, the queue's overflow (events were lost).
_STRUCTURAL = IN_UNMOUNT | IN_Q_OVERFLOW
#: A watched directory itself removed or renamed (its watch removed: ``IN_IGNORED``), and a
#: subdirectory removed or renamed away (``_GONE`` with IN_ISDIR), whose path a new directory
#: could take: reported as *gone* (``drain``), so that the walk drops what it knew at and
#: below that path and lists its parent again. A directory made or renamed in needs nothing
#: more than its parent's event: its path held no directory at the last walk (or that one's
#: removal was such an event), so no summary can stand for it.
_SELF_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
_GONE = IN_DELETE | IN_MOVED_FROM
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
_READ = 1 << 16

_libc = ctypes.CDLL(None, use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]


class DirWatch:
    """Watches over directories, and whether anything changed since :meth:`drain` last
    looked. Usable only in the process that made it; ``usable`` turns False for good
    when a watch cannot be added or the mount table cannot be polled."""

    __slots__ = (
        "_by_ident",
        "_fd",
        "_idents",
        "_max",
        "_mounts",
        "_pid",
        "_poll",
        "opened",
        "usable",
    )

    def __init__(self, max_watches: int) -> None:
        self._pid = os.getpid()
        self._fd = -1
        self._mounts = -1
        self._poll: select.poll | None = None
        #: (st_dev, st_ino) → watch descriptor, and back.
        self._by_ident: dict[tuple[int, int], int] = {}
        self._idents: dict[int, tuple[int, int]] = {}
        self._max = max_watches
        self.usable = False
        #: How many queues this set has had (one more after an overflow): a reader of
        #: ``fileno`` tells a new queue by it, even under the old number.
        self.opened = 0
        self._open()

    def _open(self) -> None:
        self.opened += 1
        try:
            fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
            if fd < 0:
                return
            self._fd = fd
            self._mounts = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
            self._poll = select.poll()
            self._poll.register(self._mounts, select.POLLPRI | select.POLLERR)
            self.usable = True
        except OSError:
            self.close()

    def owned(self) -> bool:
        """Whether this process may read the queue (not a forked copy of its owner)."""
        return self.usable and os.getpid() == self._pid

    def fileno(self) -> int:
        """The queue's descriptor, for the owner's event loop to read it as events come
        (``masks.pump``: a burst past ``max_queued_events`` overflows an unread queue); -1
        in a forked copy or once closed."""
        return self._fd if self.owned() else -1

    def watched(self, ident: tuple[int, int]) -> bool:
        return ident in self._by_ident

    def add(self, dir_fd: int, ident: tuple[int, int]) -> None:
        """Watch the directory open as ``dir_fd`` (through its descriptor, never a path a
        tool could swap). Call before looking at what is in it."""
        if not self.usable or ident in self._by_ident:
            return
        if len(self._by_ident) >= self._max:
            self.close()
            return
        wd = _libc.inotify_add_watch(self._fd, f"/proc/self/fd/{dir_fd}".encode(), _MASK)
        if wd < 0:
            # ENOSPC: the user's watches are spent; ENOENT without /proc. Timestamps only.
            self.close()
            return
        self._by_ident[ident] = wd
        self._idents[wd] = ident

    def drain(
        self,
    ) -> tuple[set[tuple[int, int]], set[tuple[tuple[int, int], str | None]], bool]:
        """Read every queued event and the mount table's state: the directories whose
        entries or attributes changed; the directories gone — ``(ident, None)``, a watched
        directory removed or renamed, and ``(parent ident, name)``, a subdirectory of a
        watched one removed or renamed away; and whether nothing of the last walks can be
        placed — the queue overflowed, an unmount, a mount, an event of a watch we do not
        know."""
        dirty: set[tuple[int, int]] = set()
        gone: set[tuple[tuple[int, int], str | None]] = set()
        if not self.usable:
            return dirty, gone, True
        structural = overflow = False
        while True:
            try:
                data = os.read(self._fd, _READ)
            except BlockingIOError:
                break
            except OSError:
                self.close()
                return dirty, gone, True
            if not data:
                break
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, size = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size : offset + _EVENT.size + size]
                offset += _EVENT.size + size
                ident = self._idents.get(wd)
                if mask & IN_IGNORED and ident is not None:
                    del self._idents[wd]
                    if self._by_ident.get(ident) == wd:
                        del self._by_ident[ident]
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                if ident is None or mask & _STRUCTURAL:
                    structural = True
                elif mask & _SELF_GONE:
                    gone.add((ident, None))
                elif mask & IN_ISDIR and mask & _GONE:
                    dirty.add(ident)
                    gone.add((ident, os.fsdecode(name.rstrip(b"\0"))))
                else:
                    dirty.add(ident)
        if overflow:
            # Hazard: the lost events include the IN_IGNORED of watches whose directories
            # were removed; their inode numbers, reused by new directories, would read as
            # watched and never report. Every watch is dropped with the instance, and the
            # next walk adds them again.
            self.close()
            self._pid = os.getpid()
            self._open()
            return dirty, gone, True
        assert self._poll is not None
        try:
            if self._poll.poll(0):
                structural = True
        except OSError:  # pragma: no cover - poll of a proc file does not fail
            self.close()
            return dirty, gone, True
        return dirty, gone, structural

    def __del__(self) -> None:
        # Instances are few per user (fs.inotify.max_user_instances, 128 by default, shared
        # with every process of the user): a dropped spec gives its one back.
        self.close()

    def close(self) -> None:
        """Stop for good (the walk goes on by timestamps alone)."""
        self.usable = False
        self._by_ident.clear()
        self._idents.clear()
        self._poll = None
        # Hazard: a forked copy must not close its owner's numbers (reused by then).
        if os.getpid() != self._pid:
            self._fd = self._mounts = -1
            return
        for fd in (self._fd, self._mounts):
            if fd >= 0:
                os.close(fd)
        self._fd = self._mounts = -1
