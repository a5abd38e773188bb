from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))

import standins

from runtime.backends.base import ExecRequest
from runtime.backends.mock import MockBackend
from runtime.catalogue import Catalogue
from runtime.errors import ToolFailed
from runtime.models import ToolSpec


def _spec(name: str) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": name,
            "description": f"Test {name}.",
            "category": "data",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "delay": {"type": "integer"}},
                "additionalProperties": False,
            },
            "backend": "mock",
        }
    )


class Gate:
    """Concurrency witness: every call waits until ``expected`` calls are in flight."""

    def __init__(self) -> None:
        self.expected = 1
        self.in_flight = 0
        self.peak = 0
        self.order: list[str] = []
        self.changed = anyio.Event()  # replaced on every arrival; waiters re-check

    async def __call__(self, request: ExecRequest) -> Any:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.changed.set()
        self.changed = anyio.Event()
        try:
            with anyio.move_on_after(10):
                while self.peak < self.expected:
                    await self.changed.wait()
            # Finish in reverse of the requested delay order, so completion order differs
            # from call order.
            for _ in range(int(request.arguments.get("delay", 0))):
                await anyio.lowlevel.checkpoint()
            if request.spec.name == "fail":
                raise ToolFailed("failed on purpose")
            self.order.append(request.arguments.get("text", ""))
            return {"echo": request.arguments.get("text", "")}
        finally:
            self.in_flight -= 1


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
async def broker(tmp_path: Path, gate: Gate) -> AsyncIterator[Any]:
    standins.install()
    from runtime.broker import Broker

    catalogue = Catalogue(builtins=False)
    for name in ("echo", "fail", "forbidden"):
        catalogue.register(_spec(name))
    policy = standins.ScriptedPolicy(actions={"forbidden": "deny"}, hidden=set())
    async with Broker(
        tmp_path / "ws",
        policy,
        tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(gate)},
    ) as b:
        yield b
