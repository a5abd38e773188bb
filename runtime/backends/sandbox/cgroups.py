"""cgroup v1 memory + pids for each call, where the host lets us (root, writable hierarchy).

Each zygote owns ``/sys/fs/cgroup/{memory,pids}/runtime-sandbox-<pid>/``; each call gets a
child group sized from its limits, which the zygote puts the call's pid 1 in before the
tool is forked. After the call the counters (peak memory, OOM kills, pids limit hits) go
into the exit report and the group is removed. Without a writable hierarchy the rlimits are
the only limits, and the fingerprint says so.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import queue
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from runtime.backends.sandbox._setup import write

__all__ = ["PREFIX", "Janitor", "bases", "create", "remove", "stats", "sweep"]

_ROOT = "/sys/fs/cgroup"
#: A zygote's parent cgroup is ``PREFIX + str(pid)`` under each controller.
PREFIX = "runtime-sandbox-"
#: Distinct limits (memory, pids) for which a :class:`Janitor` keeps groups ready.
_READY_KEYS = 16


def bases(controllers: Iterable[str], tag: str) -> tuple[dict[str, str], dict[str, str]]:
    """Make this zygote's parent cgroup per writable controller: ({ctrl: dir}, {ctrl: error})."""
    made: dict[str, str] = {}
    errors: dict[str, str] = {}
    for ctrl in controllers:
        base = f"{_ROOT}/{ctrl}/{tag}"
        try:
            os.makedirs(base, exist_ok=True)
        except OSError as exc:
            errors[f"cgroup_{ctrl}"] = str(exc)
        else:
            made[ctrl] = base
    return made, errors


def create(
    base: Mapping[str, str],
    name: str,
    limits: Mapping[str, Any],
    *,
    procs_owner: tuple[int, int] | None = None,
) -> list[str]:
    """One call's cgroups, sized from its limits; removes what it made if a step fails.

    ``procs_owner`` (uid, gid): who may write ``cgroup.procs``, so that the call's own
    process joins (cgroup v1 then lets it move only tasks of its own uid). The limit files
    stay root's."""
    paths: list[str] = []
    try:
        for ctrl, parent in base.items():
            path = f"{parent}/{name}"
            os.mkdir(path)
            paths.append(path)
            if ctrl == "memory":
                write(f"{path}/memory.limit_in_bytes", str(int(limits["memory_mb"]) << 20))
            elif ctrl == "pids":
                write(f"{path}/pids.max", str(int(limits["pids"])))
            if procs_owner is not None:
                os.chown(f"{path}/cgroup.procs", *procs_owner)
    except BaseException:
        remove(paths)
        raise
    return paths


def _read(path: str) -> bytes:
    """A counter file's bytes: raw ``os`` calls, not a text-mode ``open`` (its buffered
    reader and decoder cost more than the read; this runs between a call's reap and its
    exit report, on the call's latency path)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def stats(paths: list[str]) -> dict[str, Any]:
    """Counters of a finished call: peak memory, OOM kills, pids limit hits."""
    stats: dict[str, Any] = {}
    for path in paths:
        try:
            if "/memory/" in path:
                stats["peak_memory_bytes"] = int(_read(f"{path}/memory.max_usage_in_bytes"))
                for line in _read(f"{path}/memory.oom_control").splitlines():
                    key, _, value = line.partition(b" ")
                    if key == b"oom_kill":
                        stats["oom_kills"] = int(value)
                stats["memory_failcnt"] = int(_read(f"{path}/memory.failcnt"))
            elif "/pids/" in path:
                stats["pids_max_hits"] = int(_read(f"{path}/pids.events").split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return stats


def remove(paths: list[str]) -> None:
    for path in paths:
        # The namespace is gone by the time its pid 1 is reaped; a straggler (an exiting task
        # still charged) makes rmdir EBUSY for a moment, so retry briefly.
        for _ in range(50):
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.002)


def sweep(controllers: Iterable[str], root: str = _ROOT) -> list[str]:
    """Remove the cgroups of zygotes that died without cleaning up; return what was removed.

    A broker killed with SIGKILL takes its zygote with it (parent-death signal) before the
    zygote can rmdir anything, so every such crash left a parent group and the groups of the
    calls in flight. Hazards: a live zygote's groups must stay — a base whose pid exists is
    skipped (a reused pid only delays the sweep), and the kernel refuses to remove a group
    that still has tasks (EBUSY). A zygote in another pid namespace sharing this hierarchy
    is invisible in our /proc; its groups with tasks are safe, but an empty one could go.
    """
    removed: list[str] = []
    for ctrl in controllers:
        try:
            entries = os.listdir(f"{root}/{ctrl}")
        except OSError:
            continue
        for entry in entries:
            pid = entry.removeprefix(PREFIX)
            if pid == entry or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
                continue
            base = f"{root}/{ctrl}/{entry}"
            with contextlib.suppress(OSError):
                for name in os.listdir(base):
                    if os.path.isdir(f"{base}/{name}"):
                        with contextlib.suppress(OSError):
                            os.rmdir(f"{base}/{name}")
                            removed.append(f"{base}/{name}")
                os.rmdir(base)
                removed.append(base)
    return removed


class Janitor:
    """cgroup ``mkdir`` and ``rmdir`` (and a finished call's mount namespace, see
    :meth:`release`) off the fork-server's loop, on a thread of their own.

    Why: in the zygote they took ~0.6 ms (mkdir) and ~0.9 ms (rmdir) each, two of each per
    call, measured with cProfile while calls ran, against ~0.05 ms alone: cgroup v1 takes
    ``cgroup_mutex``, which a call joining its group holds across an RCU grace period (and
    the kernel's offlining of the last call's groups takes too). Blocked there, the loop
    could neither start the next call nor reap the last one. Now a finished call's groups
    are removed here, and a spare's groups are made ahead (one ready set per limits), so
    the loop only pops a list.

    Hazard: a thread in the zygote. Start it only once nothing forks or clones Python from
    the zygote any more (after the cloner is forked; the zygote without a cloner clones
    calls itself, with changes of its effective ids that glibc broadcasts to every thread,
    and keeps doing everything inline). ``close`` waits for every queued job: the groups
    are gone before the zygote removes its base and exits.
    """

    def __init__(
        self, base: Mapping[str, str], procs_owner: tuple[int, int] | None, depth: int = 1
    ) -> None:
        self._base = dict(base)
        self._owner = procs_owner
        self._depth = depth
        self._jobs: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self._ready: dict[tuple[int, int], list[list[str]]] = {}
        self._filling: set[tuple[int, int]] = set()
        self._lock = threading.Lock()
        self._names = itertools.count(1)
        self._thread = threading.Thread(target=self._run, name="cgroup-janitor", daemon=True)
        self._thread.start()

    @staticmethod
    def _key(limits: Mapping[str, Any]) -> tuple[int, int]:
        return int(limits["memory_mb"]), int(limits["pids"])

    def take(self, limits: Mapping[str, Any]) -> list[str] | None:
        """A ready set of groups sized for ``limits`` (None if none is ready: make them
        inline); a replacement is queued either way."""
        if not self._base:
            return None  # no writable hierarchy: calls have no groups
        key = self._key(limits)
        with self._lock:
            ready = self._ready.get(key)
            groups = ready.pop() if ready else None
            queue_fill = key not in self._filling
            if queue_fill:
                self._filling.add(key)
        if queue_fill:
            self._jobs.put(("fill", dict(limits)))
        return groups

    def remove(self, paths: list[str]) -> None:
        if paths:
            self._jobs.put(("remove", list(paths)))

    def release(self, fd: int) -> None:
        """Close ``fd`` here: a finished call's mount namespace, whose teardown (unmounting
        its tree, an expedited RCU grace period) the zygote holds off the call's exit."""
        self._jobs.put(("close", fd))

    def close(self) -> None:
        """Wait for every queued job, remove the ready groups, end the thread."""
        self._jobs.put(None)
        self._thread.join()
        with self._lock:
            leftover = [groups for ready in self._ready.values() for groups in ready]
            self._ready.clear()
        for groups in leftover:
            remove(groups)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                self._do(*job)
            except Exception:  # noqa: S110 - one failed job must not stop the later ones
                pass  # (a group left behind is swept when this zygote is gone)
            finally:
                self._jobs.task_done()

    def _do(self, kind: str, arg: Any) -> None:
        if kind == "remove":
            remove(arg)
            return
        if kind == "close":
            os.close(arg)
            return
        key = self._key(arg)
        try:
            groups: list[str] | None = create(
                self._base, f"s-{next(self._names)}", arg, procs_owner=self._owner
            )
        except OSError:
            groups = None  # the loop makes them inline, and says why if that fails
        evicted: list[list[str]] = []
        with self._lock:
            self._filling.discard(key)
            if groups is not None:
                if key not in self._ready and len(self._ready) >= _READY_KEYS:
                    # Bounded: the limits seen least recently filled give way.
                    evicted = self._ready.pop(next(iter(self._ready)))
                ready = self._ready.setdefault(key, [])
                if len(ready) < self._depth:
                    ready.append(groups)
                    groups = None
        for old in evicted:
            remove(old)
        if groups is not None:
            remove(groups)
