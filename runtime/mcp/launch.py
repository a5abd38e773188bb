"""Starting an external MCP server as untrusted code.

An MCP server is a long-lived process that speaks over its stdin/stdout, not a one-shot call,
so it does not fit the fork-server of the subprocess backend. It is wrapped with util-linux
tools that only ever *drop* privilege, each layer useful on its own:

1. ``setpriv``: the host uid/gid become ``nobody`` (the broker may be root; the server must
   never be), supplementary groups cleared, ``no_new_privs`` (no setuid gain), and
   ``pdeathsig`` KILL so the server dies with the broker.
2. ``prlimit``: no core dumps, bounded open files.
3. ``unshare``: new user, pid (the server is pid 1's child; ``--kill-child`` ends the whole tree
   when the wrapper dies), ipc and uts namespaces, and a new *empty* network namespace unless
   the policy entry says ``network = true``.

Not covered (reported in the fingerprint as missing): a private mount tree, Landlock and
seccomp; the server sees the host filesystem with ``nobody``'s permissions.

``strict`` refuses to start a server when these tools or unprivileged user namespaces are
missing; ``best_effort`` starts it with a minimal environment only and says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from runtime.backends.base import Fingerprint
from runtime.errors import SandboxUnavailable
from runtime.mcp.external import ExternalServer

__all__ = ["Launch", "isolation_available", "launch_for"]

_NOBODY = 65534
_MECHANISMS = ("uid-nobody", "no_new_privs", "pdeathsig", "rlimits", "userns", "pidns", "ipcns")
_MISSING = ("mountns", "landlock", "seccomp")
_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/",
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


@functools.cache
def isolation_available() -> str | None:
    """None when the isolation wrapper works on this host, else why not."""
    for tool in ("setpriv", "unshare", "prlimit"):
        if shutil.which(tool) is None:
            return f"{tool} (util-linux) is not installed"
    probe = [*_wrapper(network=False), "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the isolation probe failed: {exc}"
    if done.returncode != 0:
        return f"the isolation probe failed: {done.stderr.decode(errors='replace').strip()}"
    return None


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


def launch_for(server: ExternalServer, *, mode: str) -> Launch:
    """How to start ``server``: isolated when possible; in ``strict`` mode, only isolated."""
    env = {**_BASE_ENV, **server.env}
    problem = isolation_available()
    if problem is None:
        mechanisms = _MECHANISMS if server.network else (*_MECHANISMS, "netns")
        return Launch(
            argv=[*_wrapper(network=server.network), *server.command],
            env=env,
            cwd="/",
            fingerprint=Fingerprint(
                backend="mcp",
                mechanisms=mechanisms,
                missing=_MISSING,
                mode="strict" if mode == "strict" else "best_effort",
            ),
        )
    if mode == "strict":
        raise SandboxUnavailable(
            f"mcp server {server.name!r}: cannot isolate it: {problem}",
            unavailable=True,
            server=server.name,
        )
    return Launch(
        argv=list(server.command),
        env=env,
        cwd="/",
        fingerprint=Fingerprint(
            backend="mcp",
            mechanisms=("minimal-env",),
            missing=("uid-nobody", "userns", "netns", "pidns", *_MISSING),
            mode="best_effort",
        ),
    )
