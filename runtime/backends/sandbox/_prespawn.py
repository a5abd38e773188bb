"""Spawning the fork-server's process, now or ahead of its backend.

A fresh zygote spends ~0.1-0.2 s booting (an interpreter, then the sandbox modules) before
it can read its ``init``, and nothing of that depends on the policy or the catalogue: only
on this package's location and the interpreter. :class:`PrespawnedZygote` starts that boot
early (``Broker(prespawn_sandbox=True)``: ``runtime exec`` of a sandboxed tool, as its first
step), so that it runs on another core while the broker loads its policy, catalogue and audit
log; :meth:`SandboxBackend.start` then adopts the process and sends ``init`` as it would to one
it had just spawned. What the zygote is told, checks and reports is unchanged.

Hazard: a pre-spawned process that is never adopted (the call was refused, the broker failed
to open) must not outlive its owner: :meth:`PrespawnedZygote.close` (called by the broker's
close, and by a finalizer for one dropped) ends it; the zygote also exits by itself on EOF of
its control socket, which the owner's exit closes, and by its parent-death signal when the
owner process dies (armed for the spawner thread, which lives as long as the process: see
``_spawner``), so a broker made in a thread that then ends keeps its zygote.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import weakref

from runtime import _speedups
from runtime.backends.sandbox._boot import PKG_ROOT, boot_source
from runtime.backends.sandbox._spawner import spawn_in_owner_thread
from runtime.errors import SandboxUnavailable

__all__ = ["PrespawnedZygote", "spawn_zygote"]

_ZYGOTE_BOOT = boot_source("zygote", "sys.exit(main())")


def spawn_zygote() -> tuple[socket.socket, subprocess.Popen[bytes]]:
    """Start a zygote process: the broker's end of its control socket, and the process.

    Forked by the spawner thread (``_spawner``), whatever thread calls: the zygote's
    parent-death signal then follows this process, not the caller's thread.
    Raises SandboxUnavailable when the process cannot be started."""
    return spawn_in_owner_thread(_spawn, lambda parts: _end(*parts))


def _spawn() -> tuple[socket.socket, subprocess.Popen[bytes]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # The zygote's environment is its own, never the broker's (which may hold secrets):
    # just enough to find this package and the broker's installed dependencies.
    # PURE_ENV: until its init names the C accelerator the broker loaded (``_speedups.adopt``),
    # nothing in it may build or load one from a cache of its own finding (no
    # XDG_CACHE_HOME here: its passwd HOME's, which the broker never judged).
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    env = {
        "PYTHONPATH": os.pathsep.join([PKG_ROOT, *site]),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        _speedups.PURE_ENV: "1",
    }
    # zygote.main's arguments: its end of the socket, and its owner's pid (checked once its
    # parent-death signal is armed).
    args = [str(theirs.fileno()), str(os.getpid())]
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-s", "-c", _ZYGOTE_BOOT, PKG_ROOT, *args],
            pass_fds=(theirs.fileno(),),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            cwd="/",
            close_fds=True,
        )
    except OSError as exc:
        ours.close()
        raise SandboxUnavailable(f"cannot start the sandbox fork-server: {exc}") from exc
    finally:
        theirs.close()
    return ours, proc


def _end(sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
    """End a zygote that was never sent its init. SIGKILL at once: before its init it has
    made nothing (no call, cloner or cgroup) to clean up, and it would notice the closed
    socket only after its boot (~0.1 s that a refused call's exit would wait for)."""
    sock.close()
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()


class PrespawnedZygote:
    """A zygote process spawned ahead of its backend; adopted once, or closed."""

    def __init__(self) -> None:
        sock, proc = spawn_zygote()
        self._parts: tuple[socket.socket, subprocess.Popen[bytes]] | None = (sock, proc)
        self._finalizer = weakref.finalize(self, _end, sock, proc)

    def take(self) -> tuple[socket.socket, subprocess.Popen[bytes]] | None:
        """The socket and process, now the caller's; None when already taken or closed, or
        when the process has exited (the caller then spawns one as usual)."""
        parts, self._parts = self._parts, None
        self._finalizer.detach()
        if parts is not None and parts[1].poll() is not None:
            _end(*parts)
            return None
        return parts

    def close(self) -> None:
        """End the process if nobody adopted it. Idempotent."""
        parts, self._parts = self._parts, None
        self._finalizer.detach()
        if parts is not None:
            with contextlib.suppress(OSError):
                _end(*parts)

    def __enter__(self) -> PrespawnedZygote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
