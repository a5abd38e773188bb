"""Linux subprocess sandbox: a fork-server (zygote) and one namespaced child per call.

Public surface::

    backend = SandboxBackend(mode="strict", preload=specs)
    await backend.start()
    outcome = await backend.run(request)
    await backend.aclose()
    probe_host().as_dict()      # for `runtime doctor`

Layout: ``backend`` (broker side), ``zygote`` (fork-server), ``child`` (the per-call set-up,
one linear function), ``landlock`` / ``seccomp`` (rulesets), ``probe`` (host capabilities),
``_linux`` (raw syscalls).
"""

from __future__ import annotations

from runtime.backends.sandbox.backend import DISABLE_NAMES, SandboxBackend
from runtime.backends.sandbox.probe import HostCapabilities, probe_host

__all__ = ["DISABLE_NAMES", "HostCapabilities", "SandboxBackend", "probe_host"]
