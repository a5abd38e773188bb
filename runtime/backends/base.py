"""The one interface every backend implements, and the request it receives.

The broker decides *whether* a call runs; a backend decides *how* it is isolated. A backend
gets an :class:`ExecRequest` whose arguments are already validated and whose limits and
grants are already decided by the policy, and returns an :class:`ExecOutcome` — or raises an
:class:`~runtime.errors.ExecutionError` subclass (``ToolFailed``, ``ToolTimeout``,
``ResourceLimitExceeded``, ``OutputTooLarge``, ``SandboxError``). Anything else escaping a
backend is a bug the broker maps to ``internal_error``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from runtime.models import Decision, Limits, ToolSpec

__all__ = [
    "Backend",
    "EgressHandler",
    "ExecOutcome",
    "ExecRequest",
    "Fingerprint",
    "SyncBackend",
    "fingerprint_for",
]

#: The broker's handler for requests a sandboxed tool makes *back* to the broker (egress
#: HTTP, ask_user). Takes (operation, payload) and returns a JSON/msgpack-safe reply.
EgressHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """Which isolation mechanisms were active for a call; goes into every audit record."""

    backend: str
    mechanisms: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    mode: str = "strict"

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "mechanisms": list(self.mechanisms),
            "missing": list(self.missing),
            "mode": self.mode,
        }


@dataclass(slots=True)
class ExecRequest:
    call_id: str
    spec: ToolSpec
    arguments: dict[str, Any]
    workspace: Path
    limits: Limits
    decision: Decision
    env: dict[str, str] = field(default_factory=dict)
    session: str = "default"
    #: Set by the broker for tools that may use egress / ask the user.
    broker_requests: EgressHandler | None = None
    #: The arguments' canonical JSON (RFC 8785, I-JSON: integers beyond 2**53 as strings),
    #: set by the broker, which hashed it for the write-ahead record; a backend whose input
    #: is that very text (the wasm ABI's, for text-only arguments) reuses it. None: not known.
    arguments_json: bytes | None = None


@dataclass(slots=True)
class ExecOutcome:
    result: Any
    usage: dict[str, Any] = field(default_factory=dict)
    fingerprint: Fingerprint | None = None


@runtime_checkable
class Backend(Protocol):
    """A place where tools run. Started once per broker; ``run`` is called concurrently.
    A backend whose tools run in different places may also have ``fingerprint_for(spec)``
    (see :func:`fingerprint_for`)."""

    name: str

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def run(self, request: ExecRequest) -> ExecOutcome: ...

    def fingerprint(self) -> Fingerprint: ...


def fingerprint_for(backend: Backend, spec: ToolSpec) -> Fingerprint:
    """What ``spec``'s calls run behind, for the write-ahead record (and the completion,
    unless the outcome names its own). A backend whose tools run in different places (the
    mcp backend: one sandbox or gateway per server) has ``fingerprint_for(spec)``; any
    other says the same for each of its tools: ``fingerprint()``."""
    per_tool = getattr(backend, "fingerprint_for", None)
    if per_tool is None:
        return backend.fingerprint()
    found: Fingerprint = per_tool(spec)
    return found


@runtime_checkable
class SyncBackend(Backend, Protocol):
    """A backend that can also run a call in the calling thread, without the event loop.

    ``SyncBroker`` uses it as a fast path (an event-loop hop costs ~250 µs here, several
    times a whole wasm call). ``sync_capable`` may be False on an instance that cannot (a
    mock with an async handler); the broker checks it before using ``run_sync``.
    """

    sync_capable: bool

    def run_sync(self, request: ExecRequest) -> ExecOutcome: ...
