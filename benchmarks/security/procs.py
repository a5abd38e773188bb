"""The host's process table around a case: who is ours, peak use, survivors, clean-up.

"Ours" means: descendants of this process (every backend's children are: the sandbox's
fork-server and its pid namespaces hang below the broker, the baselines' workers below the
runner), any process of the baselines' private uid (setsid/double-fork escapes are reparented
away from us but keep the uid), and any process whose command line carries the case's nonce.
Nothing else on the machine is ever counted or signalled.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import threading
import time

import psutil

__all__ = [
    "BASELINE_UIDS",
    "INFRA_MARKERS",
    "Monitor",
    "baseline_uid",
    "host_responsive",
    "kill_pids",
    "our_processes",
    "reap_uid",
]

#: Command lines of the backends' own long-lived processes. The sandbox keeps a pre-forked
#: spare per profile (its tool process, a copy of the zygote, and its pid 1, the tiny
#: reaper), which is replaced after every call: new after a case, yet not the case's.
#: Attack code never runs under this command line: shell_exec execs /bin/sh, and an
#: interpreter started from it shows its own command line; anything carrying the case's
#: nonce counts whatever its command line.
INFRA_MARKERS = ("runtime.backends.sandbox.zygote", "runtime.backends.sandbox.pid1")

#: Uids used by nothing else on the host, one per baseline (so the two can run at once in
#: separate processes): every process such a uid owns is one the harness started. These are
#: the first choices; a run takes the first free one of its series (:func:`baseline_uid`).
BASELINE_UIDS = {"seed": 64998, "none": 64999}
_UID_CHOICES = 32
_claimed: dict[str, tuple[int, int]] = {}


def _claim(first: int) -> tuple[int, int]:
    """(uid, fd of its held lock) for the first of ``first``, ``first - 2``, ... that no
    other process holds.

    Hazard: the harness kills every process of its uid (``reap_uid``). Two runs on one host
    (two checkouts' test suites, a bench beside a test run) with the same uid killed each
    other's workers and survivors: an uncontained case then showed no effect and was scored
    contained. The lock (flock, released by the kernel when the run ends, however it ends)
    gives each concurrent run its own uid."""
    for k in range(_UID_CHOICES):
        uid = first - 2 * k
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW  # /tmp: never through a planted link
        try:
            fd = os.open(f"/tmp/.secbench-uid-{uid}.lock", flags, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return uid, fd
    raise RuntimeError(f"no free baseline uid among {_UID_CHOICES} choices below {first}")


def baseline_uid(mode: str) -> int:
    """This process's private uid for baseline ``mode`` (``seed`` or ``none``), claimed on
    first use and held until the process ends."""
    if mode not in _claimed:
        _claimed[mode] = _claim(BASELINE_UIDS[mode])
    return _claimed[mode][0]


def _mem(p: psutil.Process) -> int:
    # PSS, not RSS: forked children share their parent's pages copy-on-write, and a sum of
    # RSS over a fork bomb would count the interpreter once per child.
    try:
        return int(p.memory_full_info().pss)
    except (psutil.AccessDenied, AttributeError):
        return int(p.memory_info().rss)


def _entry(p: psutil.Process) -> tuple[int, float] | None:
    """(memory, create time) of a live process; None when it is gone (or a zombie).

    Hazard: a process whose memory cannot be read at this moment (mid-``execve``, its mm
    being replaced) is still alive and still ours. Dropping it from one look made it "new"
    in a later one: a long-lived process missed by the snapshot before a case was reported as
    that case's survivor, and a survivor missed by the look after it was not reported."""
    try:
        created = p.create_time()
    except psutil.Error:
        return None
    try:
        return _mem(p), created
    except psutil.NoSuchProcess:  # ZombieProcess included: dead, only not yet reaped
        return None
    except psutil.Error:
        return 0, created


def _fds(pids: dict[int, tuple[int, float]]) -> int:
    """Open file descriptors held by ``pids`` (one listing of /proc/PID/fd each; a process
    gone or unreadable counts none)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += len(os.listdir(f"/proc/{pid}/fd"))
    return total


def our_processes(nonce: str | None = None, uid: int | None = None) -> dict[int, tuple[int, float]]:
    """pid -> (rss bytes, create time) of every process that is ours (see module doc).
    ``uid``: the private uid whose processes count as ours (None when no baseline runs, so
    that a concurrent baseline run in another process is never counted or signalled)."""
    me = psutil.Process()
    found: dict[int, tuple[int, float]] = {}
    try:
        kids = me.children(recursive=True)
    except psutil.Error:
        kids = []
    for p in kids:
        if (entry := _entry(p)) is not None:
            found[p.pid] = entry
    for p in psutil.process_iter(["uids", "cmdline"]):
        if p.pid in found or p.pid == me.pid:
            continue
        try:
            uids = p.info.get("uids")
            cmd = " ".join(p.info.get("cmdline") or ())
            mine = (uid is not None and uids and uids.real == uid) or (nonce and nonce in cmd)
            if mine and (entry := _entry(p)) is not None:
                found[p.pid] = entry
        except (psutil.Error, TypeError):
            continue
    return found


class Monitor:
    """Samples our processes (and this process's own RSS: the wasm backend runs in it) on a
    thread while a case runs; keeps the peaks above the starting point."""

    def __init__(self, nonce: str, uid: int | None = None, interval_s: float = 0.05) -> None:
        self.nonce = nonce
        self.uid = uid
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.before = our_processes(nonce, uid)
        self._self = psutil.Process()
        self._rss0 = sum(r for r, _ in self.before.values()) + self._self.memory_info().rss
        self._n0 = len(self.before)
        self.peak_rss_delta = 0
        self.peak_procs_delta = 0
        self._fds0 = _fds(self.before)
        #: open file descriptors of our processes, at the peak, beyond the starting point
        self.peak_fds_delta = 0

    def _sample(self) -> None:
        now = our_processes(self.nonce, self.uid)
        rss = sum(r for r, _ in now.values()) + self._self.memory_info().rss
        self.peak_rss_delta = max(self.peak_rss_delta, rss - self._rss0)
        self.peak_procs_delta = max(self.peak_procs_delta, len(now) - self._n0)
        self.peak_fds_delta = max(self.peak_fds_delta, _fds(now) - self._fds0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            # a process vanished mid-sample; the next sample counts again
            with contextlib.suppress(psutil.Error, OSError, KeyError):
                self._sample()
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Monitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def survivors(self, grace_s: float = 1.5) -> dict[int, str]:
        """Processes that appeared during the case and are still alive after ``grace_s``.

        One look at /proc is not atomic: it lists the pids, then reads each, while processes
        fork, exec and exit (a daemonising chain forks its child into a part of the listing
        already passed and exits before its own entry is read). So a process seen in any look
        stays a candidate until it is seen dead, and "none" needs two empty looks in a row;
        on a loaded machine a single empty look scored an uncontained run as contained."""
        deadline = time.monotonic() + grace_s
        seen: dict[int, tuple[float, str]] = {}
        empty_looks = 0
        while True:
            look = self._new_live()
            seen.update(look)
            empty_looks = 0 if look else empty_looks + 1
            alive = {
                pid: cmd
                for pid, (ct, cmd) in seen.items()
                if _alive(pid, ct) and not self._infra_now(pid, ct)
            }
            if (not alive and empty_looks >= 2) or time.monotonic() >= deadline:
                return alive
            time.sleep(0.1 if alive else 0.05)

    def _new_live(self) -> dict[int, tuple[float, str]]:
        """pid -> (create time, command line) of the new, live processes in one look."""
        out: dict[int, tuple[float, str]] = {}
        for pid, (_, ct) in our_processes(self.nonce, self.uid).items():
            if pid in self.before and self.before[pid][1] == ct:
                continue
            try:
                p = psutil.Process(pid)
                if p.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                    continue  # dead, only not yet reaped: it can do nothing any more
                cmd = " ".join(p.cmdline())
                if self.nonce not in cmd and any(m in cmd for m in INFRA_MARKERS):
                    continue  # the sandbox's own spare (pre-forked for the next call)
                out[pid] = (ct, cmd[:120] or p.name())
            except psutil.Error:
                continue
        return out

    def _infra_now(self, pid: int, created: float) -> bool:
        """``pid`` (still the process created at ``created``) now shows the command line of
        the sandbox's own infrastructure. A look can catch a spare's pid 1 inside its
        ``execve`` of the tiny reaper, when its command line reads empty; that look recorded
        it as a new process, and only a later read shows what it is."""
        try:
            p = psutil.Process(pid)
            if p.create_time() != created:
                return False
            cmd = " ".join(p.cmdline())
        except psutil.Error:
            return False
        return self.nonce not in cmd and any(m in cmd for m in INFRA_MARKERS)


def _alive(pid: int, created: float) -> bool:
    """``pid`` is still the process created at ``created`` and not dead (pids are reused)."""
    try:
        p = psutil.Process(pid)
        return p.create_time() == created and p.status() not in (
            psutil.STATUS_ZOMBIE,
            psutil.STATUS_DEAD,
        )
    except psutil.Error:
        return False


def kill_pids(pids: list[int]) -> None:
    """SIGKILL exactly these pids (never by name), then reap what is ours."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    for pid in pids:
        try:
            psutil.Process(pid).wait(timeout=2)
        except (psutil.Error, psutil.TimeoutExpired):
            continue


def reap_uid(uid: int, rounds: int = 100) -> int:
    """Kill every process of the harness's private ``uid`` (a fork bomb keeps forking while
    it is being killed: stop them all first, then kill, and repeat until none is left).
    Returns how many were signalled. Only ever called with a uid the harness owns alone."""
    total = 0
    for _ in range(rounds):
        pids = [
            p.pid
            for p in psutil.process_iter(["uids"])
            if p.info.get("uids") is not None and p.info["uids"].real == uid
        ]
        if not pids:
            break
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    continue
        total += len(pids)
        time.sleep(0.02)
    return total


def host_responsive(timeout_s: float = 10.0) -> bool:
    """The host still runs a program and answers in time."""
    try:
        subprocess.run(["/bin/true"], timeout=timeout_s, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True
