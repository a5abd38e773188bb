"""Starting an external MCP server as untrusted code: inside the Linux sandbox.

An MCP server is a long-lived process that speaks over its stdin/stdout, not a one-shot call,
so it is not forked from the zygote: it runs behind the sandbox's long-lived-process entry
(:mod:`runtime.backends.sandbox.process`), which applies the same phases as a call —

* never host root (the sandbox uid), user/mount/pid/ipc/uts namespaces, and an empty network
  namespace unless the policy entry says ``network = true``;
* a fresh root (pivot_root) with the system directories read-only, the server's own program
  (its installation prefix: a virtualenv, a pyenv tree), the absolute paths in its command
  and ``PYTHONPATH`` and the entry's ``read_only`` paths read-only, a private size-capped
  ``/tmp`` that is its HOME and TMPDIR, ``/proc`` of its own pid namespace, a minimal
  ``/dev``; never ``/home``, ``/root``, ``/run``, ``/var``, the audit DB or the host ``/proc``;
* pid 1 reaper (the whole tree dies with the server), pdeathsig (it dies with the broker),
  no_new_privs, capabilities dropped, rlimits, cgroup memory/pids where the host allows,
  Landlock (writes only in its scratch), and seccomp (the exec allowlist) last.

``strict`` refuses to start a server when user namespaces, Landlock or seccomp are missing;
``best_effort`` starts it with what the host has and the fingerprint (in every audit record
of its calls) names what is missing.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Literal

from runtime.backends.base import Fingerprint
from runtime.backends.sandbox.process import (
    LaunchPlan,
    ProcessLimits,
    host_capabilities,
    plan_process,
)
from runtime.errors import SandboxError
from runtime.mcp.external import ExternalServer

__all__ = ["Launch", "isolation_available", "launch_for"]

_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # The generated /etc/passwd of the sandbox names uid 1000 "sandbox".
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "SHELL": "/bin/false",
    "TERM": "dumb",
}


@dataclass(frozen=True, slots=True)
class Launch:
    """What to spawn (the sandbox launcher, with the server's plan in its environment) and
    what it will be behind. :meth:`cleanup` after the process has exited."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    fingerprint: Fingerprint
    plan: LaunchPlan | None = None

    def cleanup(self) -> None:
        if self.plan is not None:
            self.plan.cleanup()


@functools.cache
def isolation_available() -> str | None:
    """None when this host can run servers fully isolated (strict mode), else what is
    missing. Probed once per process."""
    caps = host_capabilities()
    missing = caps.missing_required()
    if missing:
        detail = f" ({caps.user_namespaces_error})" if caps.user_namespaces_error else ""
        return f"missing isolation mechanism(s): {', '.join(missing)}{detail}"
    return None


def launch_for(server: ExternalServer, *, mode: str) -> Launch:
    """How to start ``server``: isolated; in ``strict`` mode, only fully (else
    :class:`~runtime.errors.SandboxUnavailable`)."""
    fp_mode: Literal["strict", "best_effort"] = "strict" if mode == "strict" else "best_effort"
    if server.command is None:
        raise SandboxError(
            f"mcp server {server.name!r} is reached by url: there is nothing to start",
            server=server.name,
        )
    try:
        plan = plan_process(
            list(server.command),
            env={**_BASE_ENV, **server.env},
            limits=ProcessLimits(memory_mb=server.memory_mb, pids=server.pids),
            read_only=server.read_only,
            network=server.network,
            mode=fp_mode,
            name=f"mcp-{server.name}",
        )
    except SandboxError as exc:
        exc.details.setdefault("server", server.name)
        raise
    return Launch(
        argv=plan.argv,
        env=plan.env,
        cwd="/",
        fingerprint=dataclasses.replace(plan.fingerprint, backend="mcp"),
        plan=plan,
    )
