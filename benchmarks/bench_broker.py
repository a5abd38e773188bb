"""Broker overhead per call: normalise + validate + policy + both audit records + result
checks, with the mock backend (which does no work). Target: ≤ 50 µs (DESIGN §10)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from runtime.backends.mock import MockBackend
from runtime.broker import Broker
from runtime.catalogue import Catalogue
from runtime.models import ToolSpec

SPEC = ToolSpec.model_validate(
    {
        "name": "bench_echo",
        "description": "Benchmark tool: returns a constant.",
        "category": "data",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 4096}},
            "required": ["text"],
            "additionalProperties": False,
        },
        "result": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        "backend": "mock",
    }
)


async def _measure(n: int, workdir: Path) -> dict[str, Any]:
    catalogue = Catalogue(builtins=False)
    catalogue.register(SPEC)
    backend = MockBackend(lambda _req: {"ok": True})
    call = {"tool": "bench_echo", "arguments": {"text": "x" * 64}}
    async with Broker(
        workspace=workdir / "ws",
        audit=workdir / "audit.db",
        catalogue=catalogue,
        backends={"mock": backend},
    ) as broker:
        for _ in range(min(200, n)):  # warm-up: imports, prepared statements, caches
            await broker.call(call)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            result = await broker.call(call)
            samples.append((time.perf_counter() - t0) * 1e6)
            assert result.success, result.error
        backend.requests.clear()
    samples.sort()
    return {
        "broker_overhead_us": statistics.median(samples),
        "broker_overhead_p99_us": samples[int(len(samples) * 0.99) - 1],
        "broker_calls": n,
    }


def run_benchmark(n: int = 5000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return anyio.run(_measure, n, Path(tmp))


def main(argv: list[str] | None = None) -> int:
    import json
    import sys

    out = run_benchmark()
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
