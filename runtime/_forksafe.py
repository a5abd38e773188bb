"""Locks that a forked child gets back unheld (:class:`ForkSafeLock`), and objects that
know they were forked (:func:`on_fork_in_child`).

Hazard: after ``os.fork()`` only the forking thread exists in the child, but every lock is
copied in the state it had. A module-level lock that another thread held at that instant (a
guest build running zig for seconds, the native helper being loaded) stays held for ever in
the child, and the child's first build waits on it for ever. Every module-level lock of the
runtime is a ``ForkSafeLock`` (``tests/test_forksafe.py`` checks that none is left a plain
``threading.Lock``); one after-fork hook gives each a fresh lock in the child.

What the locks guard survives that: the builds write through ``runtime._zigcc`` (a unique
temporary name, renamed into place), so a build the parent's thread left half done is only a
stray temporary file to the child, which builds for itself; the rest guard a decision made
once, which the child then makes itself. A lock that the forking thread itself held (it forks
inside its own ``with`` block) stays held in the child, where that block still releases it.

Acquiring in a ``before`` hook instead (so no fork catches a lock held) would make every fork
wait for a build: the sandbox's spawner forks on the hot path.

Objects that own another process's resources — a broker's event-loop thread, its fork-server,
an audit log's journal and SQLite connections — are worse than a held lock in a child: using
them there waits for threads that do not exist, or writes where the parent does not look,
and ending them ends the parent's. Each registers itself with :func:`on_fork_in_child`; its
``_forked_child()`` runs in every child forked while it lives (after the locks are renewed)
and marks it as the parent's, so that the child refuses to use it and lets it go without
touching what the parent still uses.
"""

from __future__ import annotations

import os
import threading
import weakref
from types import TracebackType
from typing import Protocol

__all__ = ["ForkSafeLock", "on_fork_in_child"]


class ForkSafeLock:
    """A non-reentrant ``threading.Lock`` (same methods) that is unheld in a forked child
    unless the forking thread held it (see the module)."""

    __slots__ = ("__weakref__", "_lock", "_owner")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The holder's thread id while held (None briefly inside acquire and release: a
        # fork in that window comes from another thread, whose lock the child drops).
        self._owner: int | None = None
        _LOCKS.add(self)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self._lock.acquire(blocking, timeout):
            return False
        self._owner = threading.get_ident()
        return True

    def release(self) -> None:
        self._owner = None
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _forked_child(self) -> None:
        # Only assignments and an uncontended acquire: nothing here can wait.
        lock = threading.Lock()
        if self._owner is not None and self._owner == threading.get_ident():
            lock.acquire()  # the forking thread's own: its with block releases it
        else:
            self._owner = None
        self._lock = lock


#: Every live ForkSafeLock (weak: an instance's lock goes with it).
_LOCKS: weakref.WeakSet[ForkSafeLock] = weakref.WeakSet()


class ForkAware(Protocol):
    def _forked_child(self) -> None:
        """Called in a forked child: only assignments and closing this process's own
        descriptors (the parent's threads and processes are not this process's to wait
        for or to end)."""


#: Every live object registered with on_fork_in_child (weak: it goes with its object).
_OBJECTS: weakref.WeakSet[ForkAware] = weakref.WeakSet()


def on_fork_in_child(obj: ForkAware) -> None:
    """Call ``obj._forked_child()`` in every child forked from now on while ``obj`` lives."""
    _OBJECTS.add(obj)


def _forked_child() -> None:
    for lock in list(_LOCKS):
        lock._forked_child()
    for obj in list(_OBJECTS):
        obj._forked_child()


os.register_at_fork(after_in_child=_forked_child)
