"""Starting an external MCP server as untrusted code.

An MCP server is a long-lived process that speaks over its stdin/stdout, not a one-shot call,
so it does not fit the fork-server of the subprocess backend. It is wrapped with small tools
that only ever *drop* privilege, each layer useful on its own:

1. ``setpriv``: the host uid/gid become ``nobody`` (the broker may be root; the server must
   never be), supplementary groups cleared, ``no_new_privs`` (no setuid gain), and
   ``pdeathsig`` KILL so the server dies with the broker.
2. ``prlimit``: no core dumps, bounded open files.
3. ``unshare``: new user, pid (``--kill-child`` ends the whole tree when the wrapper dies), ipc
   and uts namespaces, and a new *empty* network namespace unless the policy entry says
   ``network = true``.
4. Landlock (``_landlock_shim``, run by the system interpreter): every write-type filesystem
   access is refused except beneath the server's private scratch directory (its HOME and
   TMPDIR) and on /dev/null. Reads stay as ``nobody``'s permissions allow.

Not covered (reported in the fingerprint as missing): a private mount tree and seccomp.

``strict`` refuses to start a server when any layer is missing on this host; ``best_effort``
starts it with the layers that work (at least a minimal environment) and says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runtime.backends.base import Fingerprint
from runtime.errors import SandboxError, SandboxUnavailable
from runtime.mcp.external import ExternalServer

__all__ = ["Launch", "isolation_available", "landlock_available", "launch_for"]

_NOBODY = 65534
_BASE_MECHANISMS = ("uid-nobody", "no_new_privs", "pdeathsig", "rlimits", "userns", "pidns")
_MISSING = ("mountns", "seccomp")
_SHIM = Path(__file__).with_name("_landlock_shim.py")
#: An interpreter the unprivileged server user can execute (a venv under a private home
#: directory may not be reachable); the shim uses only the standard library.
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")
_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # stdio_client adds a few "safe" variables from the broker's environment; these
    # values replace them so nothing of the broker's account leaks into the server.
    "USER": "nobody",
    "LOGNAME": "nobody",
    "SHELL": "/bin/false",
    "TERM": "dumb",
}


@dataclass(frozen=True, slots=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    fingerprint: Fingerprint
    #: The server's private writable directory; remove it after the server has exited.
    scratch: Path | None = None

    def cleanup(self) -> None:
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _system_python() -> str | None:
    return next((p for p in _SYSTEM_PYTHONS if os.access(p, os.X_OK)), None)


def _wrapper(*, network: bool) -> list[str]:
    argv = ["setpriv"]
    if os.geteuid() == 0:
        argv += [f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups"]
    argv += ["--no-new-privs", "--pdeathsig", "KILL", "--"]
    argv += ["prlimit", "--core=0", "--nofile=1024", "--"]
    argv += ["unshare", "--user", "--pid", "--fork", "--kill-child", "--ipc", "--uts"]
    if not network:
        argv.append("--net")
    argv.append("--")
    return argv


def _shim(python: str, scratch: str) -> list[str]:
    return [python, "-I", "-S", "-c", _SHIM.read_text(encoding="utf-8"), scratch, "--"]


def _probe(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the isolation probe failed: {exc}"
    if done.returncode != 0:
        return f"the isolation probe failed: {done.stderr.decode(errors='replace').strip()}"
    return None


@functools.cache
def isolation_available() -> str | None:
    """None when the namespace wrapper works on this host, else why not. Probed once."""
    for tool in ("setpriv", "unshare", "prlimit"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    return _probe([*_wrapper(network=False), "/bin/true"])


@functools.cache
def landlock_available() -> str | None:
    """None when the Landlock layer works under the wrapper, else why not. Probed once."""
    if isolation_available() is not None:
        return "the namespace wrapper is not available"
    python = _system_python()
    if python is None:
        return "no system python3 to apply Landlock with"
    scratch = tempfile.gettempdir()
    return _probe([*_wrapper(network=False), *_shim(python, scratch), "/bin/true"])


def _make_scratch(name: str) -> Path:
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f"runtime-mcp-{name}-"))
        if os.geteuid() == 0:
            os.chown(scratch, _NOBODY, _NOBODY)
    except OSError as exc:
        raise SandboxError(f"mcp server {name!r}: cannot create its scratch directory") from exc
    return scratch


def launch_for(server: ExternalServer, *, mode: str) -> Launch:
    """How to start ``server``: isolated when possible; in ``strict`` mode, only fully."""
    namespaces = isolation_available()
    landlock = landlock_available()
    if mode == "strict" and (namespaces or landlock):
        raise SandboxUnavailable(
            f"mcp server {server.name!r}: cannot isolate it: {namespaces or landlock}",
            unavailable=True,
            server=server.name,
        )
    scratch = _make_scratch(server.name)
    env = {**_BASE_ENV, "HOME": str(scratch), "TMPDIR": str(scratch), **server.env}
    fp_mode = "strict" if mode == "strict" else "best_effort"
    if namespaces is not None:
        return Launch(
            argv=list(server.command),
            env=env,
            cwd=str(scratch),
            scratch=scratch,
            fingerprint=Fingerprint(
                backend="mcp",
                mechanisms=("minimal-env",),
                missing=("uid-nobody", "userns", "netns", "pidns", "landlock", *_MISSING),
                mode=fp_mode,
            ),
        )
    argv = _wrapper(network=server.network)
    mechanisms = list(_BASE_MECHANISMS)
    if not server.network:
        mechanisms.append("netns")
    missing = list(_MISSING)
    python = _system_python()
    if landlock is None and python is not None:
        argv += _shim(python, str(scratch))
        mechanisms.append("landlock-writes")
    else:
        missing.append("landlock")
    return Launch(
        argv=[*argv, *server.command],
        env=env,
        cwd=str(scratch),
        scratch=scratch,
        fingerprint=Fingerprint(
            backend="mcp", mechanisms=tuple(mechanisms), missing=tuple(missing), mode=fp_mode
        ),
    )
