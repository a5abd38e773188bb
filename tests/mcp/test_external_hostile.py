"""A hostile stdio MCP server (``evil_stdio_server.py``) behind the mcp backend: what it
answers, writes on its stderr or lists must not stop the broker, reach the broker's own
descriptors, or hide another server's tools."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.catalogue import Catalogue
from runtime.mcp.external import ExternalServer
from runtime.models import Decision, Limits, ToolCall, ToolSpec
from tests.mcp import standins
from tests.mcp.test_external import _python

pytestmark = pytest.mark.anyio

EVIL = Path(__file__).resolve().parent / "evil_stdio_server.py"


def evil(name: str = "evil", mode: str = "", **kw: Any) -> ExternalServer:
    python, env = _python()
    data: dict[str, Any] = {
        "name": name,
        "command": [python, str(EVIL)],
        "env": {"MODE": mode, **env},
    }
    data.update(kw)
    return ExternalServer.model_validate(data)


class LimitsPolicy(standins.ScriptedPolicy):
    """Everything allowed, with the limits a test gives."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(actions={}, hidden=set())
        self.limits = limits

    def decide(self, tc: ToolCall, spec: ToolSpec, profile: str | None = None) -> Decision:
        return Decision(action="allow", rule=f"tools.{spec.name}", limits=self.limits)


@asynccontextmanager
async def brokered(
    tmp_path: Path, servers: list[ExternalServer], limits: Limits | None = None
) -> AsyncIterator[Any]:
    standins.install()
    from runtime.broker import Broker

    policy = LimitsPolicy(limits or Limits(timeout_s=20))
    async with McpProxyBackend(servers, mode="best_effort") as proxy:
        catalogue = Catalogue(builtins=False)
        registered = proxy.register(catalogue)
        async with Broker(
            tmp_path / "ws",
            policy,
            tmp_path / "audit.db",
            catalogue=catalogue,
            backends={"mcp": proxy},
        ) as broker:
            broker.test_registered = registered
            broker.test_proxy = proxy
            yield broker


async def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.monotonic()
    result = await call()
    return result, time.monotonic() - t0


# -- M1: the SDK's own output-schema check ran Python's re on the event loop --------------
@pytest.mark.timeout(60)
async def test_a_backtracking_output_pattern_does_not_freeze_the_broker(tmp_path: Path) -> None:
    async with brokered(tmp_path, [evil(mode="redos")]) as broker:
        results: dict[str, Any] = {}
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.05)
                ticks += 1

        async def call(key: str, tool: str, arguments: dict[str, Any]) -> None:
            results[key] = await timed(lambda: broker.call({"tool": tool, "arguments": arguments}))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as calls:
                calls.start_soon(call, "re", "evil__re", {})
                calls.start_soon(call, "echo", "evil__slow", {"s": 1})
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker)
                    await anyio.sleep(1)
                    tg.cancel_scope.cancel()
        result, took = results["re"]
        # The catalogue's (linear-time) validator refuses the answer: a typed error, at once.
        assert result.error is not None and result.error.type == "tool_error", result
        assert took < 10, took
        other, _ = results["echo"]
        assert other.success, other.error
        # The event loop went on meanwhile: ~20 ticks in the slow call's second.
        assert ticks >= 10, ticks
