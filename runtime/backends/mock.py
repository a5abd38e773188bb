"""A backend for tests, shipped in the package (like httpx's ``MockTransport``).

It runs nothing: a handler function decides each call's outcome. Use it to test the broker,
policy, audit and adapters without a sandbox::

    def handler(request: ExecRequest) -> Any:
        return {"echo": request.arguments}

    broker = Broker(workspace=ws, backends={"subprocess": MockBackend(handler)})
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint

__all__ = ["MockBackend"]

Handler = Callable[[ExecRequest], Any | Awaitable[Any]]


# One value for every call (frozen): the broker memoises the audit form of a fingerprint by
# identity first, as it comes from real backends (the wasm backend keeps one too).
_FINGERPRINT = Fingerprint(backend="mock", mechanisms=("none",), mode="mock")


def _echo(request: ExecRequest) -> Any:
    return {"tool": request.spec.name, "arguments": request.arguments}


class MockBackend:
    name = "mock"

    def __init__(self, handler: Handler | None = None, *, side_effect_free: bool = False) -> None:
        self._handler: Handler = handler or _echo
        #: True declares that the handler changes nothing outside the call (like a wasm
        #: guest). A label only since the broker journals the audit records of every call
        #: that runs; benchmarks/bench_broker.py keeps its "pure" figure with it.
        self.side_effect_free = side_effect_free
        #: A coroutine handler needs the event loop; a plain one can use the sync fast path.
        self.sync_capable = not inspect.iscoroutinefunction(self._handler)
        self.requests: list[ExecRequest] = []
        self.started = False
        self.closed = False

    async def start(self) -> None:
        self.started = True

    async def aclose(self) -> None:
        self.closed = True

    async def run(self, request: ExecRequest) -> ExecOutcome:
        self.requests.append(request)
        value = self._handler(request)
        if inspect.isawaitable(value):
            value = await value
        if isinstance(value, ExecOutcome):
            return value
        return ExecOutcome(result=value, usage={"cpu_ms": 0.0}, fingerprint=self.fingerprint())

    def run_sync(self, request: ExecRequest) -> ExecOutcome:
        self.requests.append(request)
        value = self._handler(request)
        # A JSON result (a dict, nearly always) is never awaitable: inspect.isawaitable is
        # Python code, ~20 opcodes of every call the broker benchmarks measure.
        if type(value) is not dict and inspect.isawaitable(value):
            raise TypeError("MockBackend.run_sync: the handler returned an awaitable")
        if isinstance(value, ExecOutcome):
            return value
        return ExecOutcome(result=value, usage={"cpu_ms": 0.0}, fingerprint=self.fingerprint())

    def fingerprint(self) -> Fingerprint:
        return _FINGERPRINT
