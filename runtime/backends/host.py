"""The host backend: tools that only touch broker state (session environment, snippets and
memory, asking the user). They run in the broker process, in a worker thread, and never run
untrusted code: their manifests name built-in entries, and their arguments are validated.

Custom (user) manifests may not use this backend: the catalogue refuses a host tool whose
manifest is outside the built-in catalogue (see ``Broker``), so a plugin cannot escape the
sandbox by declaring itself a host tool.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext, load_entry

__all__ = ["HostBackend"]


class HostBackend:
    name = "host"
    sync_capable = True

    def __init__(
        self,
        *,
        state_dir: Path | None,
        session_env: Callable[[str], dict[str, str]],
        ask_user: Callable[[str, list[str] | None], str] | None = None,
    ) -> None:
        self._state_dir = state_dir
        self._session_env = session_env
        self._ask_user = ask_user

    async def start(self) -> None:
        # Made here when it can be; a workspace this user may only read has none, and the
        # tools that keep state there (snippets, memory) say so per call (they make it too).
        # None: the broker found an unsafe one and does not use it (broker/_statedir.py).
        # Never its parents: this runs at the first host call, and a workspace removed
        # before it was made again, empty (red team Q7); the tools then say it is gone.
        if self._state_dir is not None:
            with contextlib.suppress(OSError):
                self._state_dir.mkdir(mode=0o700, exist_ok=True)

    async def aclose(self) -> None:
        return None

    def fingerprint(self) -> Fingerprint:
        return Fingerprint(backend="host", mechanisms=("broker-state-only",), mode="host")

    def _call_tool(self, request: ExecRequest) -> tuple[Any, float]:
        c0 = time.thread_time()
        spec = request.spec
        if spec.entry is None or spec.source is None:
            raise ToolFailed(f"host tool {spec.name!r} has no entry point")
        func = load_entry(spec.entry, spec.source.parent)
        ctx = ToolContext(
            workspace=request.workspace,
            limits=request.limits,
            env=dict(request.env),
            call_id=request.call_id,
            session=request.session,
            options={
                "session_env": self._session_env(request.session),
                "state_dir": self._state_dir,
                **({"ask_user": self._ask_user} if self._ask_user else {}),
            },
        )
        result = func(dict(request.arguments), ctx)
        return result, (time.thread_time() - c0) * 1000

    async def run(self, request: ExecRequest) -> ExecOutcome:
        return await anyio.to_thread.run_sync(self.run_sync, request)

    def run_sync(self, request: ExecRequest) -> ExecOutcome:
        t0 = time.perf_counter()
        result, cpu_ms = self._call_tool(request)
        usage = {"wall_ms": (time.perf_counter() - t0) * 1000, "cpu_ms": cpu_ms}
        return ExecOutcome(result=result, usage=usage, fingerprint=self.fingerprint())
