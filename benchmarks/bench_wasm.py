"""Wasm backend benchmark: a json_parse of a 1 KiB document vs bare wasmtime-py, same run.

    python benchmarks/bench_wasm.py

``run_benchmark()`` returns (microseconds, medians over ``rounds`` calls):

- ``wasm_call_us``: one ``json_parse`` through ``WasmBackend.run_sync`` (fresh Store and
  instance, argument encoding, guest call, result decoding, usage);
- ``wasm_async_call_us``: the same through ``await WasmBackend.run`` (worker thread);
- ``bare_wasmtime_us``: wasmtime-py "new Store + instantiate a trivial module + call";
- ``wasm_vs_bare``: the ratio (goal <= 1.5), ``wasm_calls_per_s`` (goal >= 10,000 on 2 cores,
  from two threads calling ``run_sync``).

The integrator's ``runtime bench perf`` switches the wasm call to go through SyncBroker.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import wasmtime

from runtime.backends.base import ExecRequest
from runtime.backends.wasm import WasmBackend
from runtime.models import Decision, Limits, ToolSpec
from runtime.toolkit import builtin_tools_dir

TRIVIAL_WAT = '(module (func (export "f") (result i32) i32.const 42))'


def document_1kib() -> str:
    items = [{"id": i, "name": f"item {i}", "tags": ["a"], "price": i * 1.5} for i in range(24)]
    doc = json.dumps({"items": items})
    while len(doc) > 1024:
        items.pop()
        doc = json.dumps({"items": items})
    return doc + " " * (1024 - len(doc))


def _request() -> ExecRequest:
    path = builtin_tools_dir() / "data" / "json_parse.json"
    spec = ToolSpec.model_validate(json.loads(path.read_text()))
    spec.source = path
    return ExecRequest(
        call_id="bench",
        spec=spec,
        arguments={"text": document_1kib()},
        workspace=Path("/nonexistent"),
        limits=Limits(),
        decision=Decision(action="allow", rule="bench"),
    )


def _median_us(fn: Any, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def _throughput(backend: WasmBackend, request: ExecRequest, seconds: float, threads: int) -> float:
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < stop:
            backend.run_sync(request)
            counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def run_benchmark(rounds: int = 2000, cache_dir: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        backend = WasmBackend(cache_dir=cache_dir or Path(tmp))
        request = _request()
        backend.run_sync(request)  # build, compile and warm up outside the measurement

        engine = wasmtime.Engine()
        module = wasmtime.Module(engine, wasmtime.wat2wasm(TRIVIAL_WAT))

        def bare() -> None:
            store = wasmtime.Store(engine)
            instance = wasmtime.Instance(store, module, [])
            instance.exports(store)["f"](store)

        def wasm() -> None:
            backend.run_sync(request)

        # Interleave the two in blocks so machine noise hits both alike.
        wasm_us: list[float] = []
        bare_us: list[float] = []
        for _ in range(10):
            wasm_us.append(_median_us(wasm, rounds // 10))
            bare_us.append(_median_us(bare, rounds // 10))

        async def run_async() -> float:
            await backend.start()
            samples = []
            for _ in range(rounds // 4):
                t0 = time.perf_counter()
                await backend.run(request)
                samples.append(time.perf_counter() - t0)
            return statistics.median(samples) * 1e6

        async_us = anyio.run(run_async)
        calls_per_s = _throughput(backend, request, 2.0, 2)
        backend.close()
    wasm_call_us = statistics.median(wasm_us)
    bare_wasmtime_us = statistics.median(bare_us)
    return {
        "wasm_call_us": round(wasm_call_us, 1),
        "wasm_async_call_us": round(async_us, 1),
        "bare_wasmtime_us": round(bare_wasmtime_us, 1),
        "wasm_vs_bare": round(wasm_call_us / bare_wasmtime_us, 3),
        "wasm_calls_per_s": round(calls_per_s),
        "document_bytes": len(document_1kib()),
    }


if __name__ == "__main__":
    print(json.dumps(run_benchmark(), indent=2))
