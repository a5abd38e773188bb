"""Wasm through the broker: a json_parse of a 1 KiB document vs bare wasmtime-py, same run.

    PYTHONPATH=. python benchmarks/bench_wasm.py [--quick]

``run_benchmark()`` returns (microseconds, medians of per-block medians; blocks of the three
measurements are interleaved so machine noise hits them alike):

- ``wasm_call_us``: one ``json_parse`` through ``SyncBroker.call`` (normalise, validate,
  policy, audit request + completion, ``Broker.call_sync`` → ``WasmBackend.run_sync``, result
  schema and size checks, ToolResult) — the figure DESIGN §10 sets against the bare baseline;
- ``wasm_backend_us``: the same call on ``WasmBackend.run_sync`` alone (fresh Store and
  instance, argument encoding, guest call, result decoding, usage);
- ``bare_wasmtime_us``: wasmtime-py "new Store + instantiate a trivial module + call";
- ``wasm_vs_bare`` (goal <= 1.5) and ``wasm_backend_vs_bare``;
- ``*_cpu_us``: this process's CPU time per call over the same blocks (steadier under load);
- ``wasm_calls_per_s``: through the broker from two threads for ``seconds`` (goal >= 10,000);
- beside it, for the share of each layer: ``wasm_backend_calls_per_s`` (``run_sync`` alone,
  two threads) and ``bare_wasmtime_calls_per_s`` (the bare baseline, two threads);
- the same three from one thread (``*_calls_per_s_1t``): two threads beat one only as far as
  the work releases the GIL (the guest and wasmtime do; encoding, decoding and the broker's
  Python do not);
- ``wasm_calls_per_s_2p``: through the broker from **two broker processes** (one per core, as
  a deployment that needs both cores runs the broker: the GIL keeps one process's Python on
  one core), each a ``SyncBroker`` calling for ``seconds``, both appending to **one audit log
  file** (one hash chain across processes). ``wasm_2p_audit_verified`` says the shared chain
  verifies afterwards and ``wasm_2p_audit_records`` that it holds both records of every call.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime

import runtime
from runtime.audit import AuditLog
from runtime.backends.base import ExecRequest
from runtime.backends.wasm import WasmBackend
from runtime.broker import SyncBroker
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


def _block(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """(median wall µs, mean CPU µs) of ``rounds`` calls."""
    samples = []
    cpu0 = time.process_time()
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / rounds
    return statistics.median(samples) * 1e6, cpu * 1e6


def _throughput(fn: Callable[[], Any], seconds: float, threads: int) -> float:
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < stop:
            fn()
            counts[i] += 1

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def _worker(audit: str, workspace: str, seconds: float, cache_dir: str) -> int:
    """One broker process of :func:`processes_throughput`: warm up, say ``ready``, wait for
    ``go`` on stdin, call for ``seconds``, print the count. Closing the broker inserts its
    journaled records into the shared log."""
    backend = WasmBackend(cache_dir=Path(cache_dir)) if cache_dir else WasmBackend()
    call = {"tool": "json_parse", "arguments": {"text": document_1kib()}}
    with SyncBroker(workspace=workspace, audit=audit, backends={"wasm": backend}) as broker:
        for _ in range(50):
            if not broker.call(call).success:
                raise RuntimeError("json_parse failed in the benchmark worker")
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        if sys.stdin.readline().strip() != "go":
            return 1
        count = 0
        t0 = time.perf_counter()
        stop = t0 + seconds
        while time.perf_counter() < stop:
            broker.call(call)
            count += 1
        elapsed = time.perf_counter() - t0
    sys.stdout.write(json.dumps({"calls": count, "seconds": elapsed}) + "\n")
    return 0


def processes_throughput(
    seconds: float, processes: int = 2, cache_dir: Path | None = None
) -> dict[str, Any]:
    """Calls/s of ``processes`` broker processes calling at once, sharing one audit log.

    Each worker is a fresh interpreter (``python bench_wasm.py --worker``), so start-up and
    warm-up are outside the timed window; they start together on a ``go`` line once every
    one is ready. The rate is the sum of each worker's calls over its own timed window."""
    env = dict(os.environ)
    # The workers import ``runtime`` from where this process did (a checkout or a venv).
    root = str(Path(runtime.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory() as tmp:
        audit = Path(tmp) / "audit.db"
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", str(audit)]
        workers = [
            subprocess.Popen(
                [*argv, str(Path(tmp) / f"ws{i}"), str(seconds), str(cache_dir or "")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for i in range(processes)
        ]
        try:
            for w in workers:
                assert w.stdout is not None
                if w.stdout.readline().strip() != "ready":
                    raise RuntimeError("a benchmark worker failed to start")
            for w in workers:
                assert w.stdin is not None
                w.stdin.write("go\n")
                w.stdin.flush()
            reports = []
            for w in workers:
                out, _ = w.communicate(timeout=seconds + 120)
                if w.returncode != 0:
                    raise RuntimeError(f"a benchmark worker exited {w.returncode}")
                reports.append(json.loads(out.strip().splitlines()[-1]))
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
                    w.wait()
        with AuditLog(audit) as log:
            verified = log.verify().ok
            records = log.head()[0]
    calls = sum(r["calls"] for r in reports)
    return {
        "wasm_calls_per_s_2p": round(sum(r["calls"] / r["seconds"] for r in reports)),
        "wasm_2p_audit_verified": verified,
        # 50 warm-up calls per worker, two records per call.
        "wasm_2p_audit_records": records == 2 * (calls + 50 * processes),
    }


def bare_wasmtime() -> Callable[[], None]:
    """The baseline: new Store + instantiate a trivial module + call, on a default Engine."""
    engine = wasmtime.Engine()
    module = wasmtime.Module(engine, wasmtime.wat2wasm(TRIVIAL_WAT))

    def bare() -> None:
        store = wasmtime.Store(engine)
        instance = wasmtime.Instance(store, module, [])
        instance.exports(store)["f"](store)

    return bare


def run_benchmark(
    rounds: int = 2000,
    seconds: float = 2.0,
    cache_dir: Path | None = None,
    blocks: int = 10,
) -> dict[str, Any]:
    """Measure (see the module docstring). ``cache_dir`` holds built guests and compiled
    modules; the default is the user's cache, so guests are built once, not per run."""
    backend = WasmBackend(cache_dir=cache_dir) if cache_dir else WasmBackend()
    request = _request()
    call = {"tool": "json_parse", "arguments": {"text": document_1kib()}}
    bare = bare_wasmtime()
    with (
        tempfile.TemporaryDirectory() as tmp,
        SyncBroker(
            workspace=Path(tmp) / "ws",
            audit=Path(tmp) / "audit.db",
            backends={"wasm": backend},
        ) as broker,
    ):
        # The first call starts the backend (guest build, compile) on the event loop; the
        # rest take the synchronous path. Warm both paths and the caches.
        for _ in range(50):
            result = broker.call(call)
            if not result.success:
                raise RuntimeError(f"json_parse failed in the benchmark: {result.error}")
            backend.run_sync(request)
            bare()

        def through_broker() -> None:
            broker.call(call)

        def backend_only() -> None:
            backend.run_sync(request)

        per = max(1, rounds // blocks)
        wall: dict[str, list[float]] = {"broker": [], "backend": [], "bare": []}
        cpu: dict[str, list[float]] = {"broker": [], "backend": [], "bare": []}
        for _ in range(blocks):
            for name, fn in (
                ("broker", through_broker),
                ("bare", bare),
                ("backend", backend_only),
            ):
                w, c = _block(fn, per)
                wall[name].append(w)
                cpu[name].append(c)
        calls_per_s = _throughput(through_broker, seconds, 2)
        backend_calls_per_s = _throughput(backend_only, seconds, 2)
        bare_calls_per_s = _throughput(bare, seconds, 2)
        one_thread = {
            name: _throughput(fn, seconds, 1)
            for name, fn in (
                ("wasm", through_broker),
                ("wasm_backend", backend_only),
                ("bare", bare),
            )
        }
        audit_ok = broker.audit.verify().ok
    two_processes = processes_throughput(seconds, 2, cache_dir)
    med = {k: statistics.median(v) for k, v in wall.items()}
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    return {
        "wasm_call_us": round(med["broker"], 1),
        "wasm_backend_us": round(med["backend"], 1),
        "bare_wasmtime_us": round(med["bare"], 1),
        "wasm_vs_bare": round(med["broker"] / med["bare"], 3),
        "wasm_backend_vs_bare": round(med["backend"] / med["bare"], 3),
        "wasm_call_cpu_us": round(cpu_med["broker"], 1),
        "wasm_backend_cpu_us": round(cpu_med["backend"], 1),
        "bare_wasmtime_cpu_us": round(cpu_med["bare"], 1),
        "wasm_calls_per_s": round(calls_per_s),
        "wasm_backend_calls_per_s": round(backend_calls_per_s),
        "bare_wasmtime_calls_per_s": round(bare_calls_per_s),
        "wasm_calls_per_s_1t": round(one_thread["wasm"]),
        "wasm_backend_calls_per_s_1t": round(one_thread["wasm_backend"]),
        "bare_wasmtime_calls_per_s_1t": round(one_thread["bare"]),
        "wasm_audit_verified": audit_ok,
        **two_processes,
        "document_bytes": len(document_1kib()),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--worker"]:
        audit, workspace, seconds, cache_dir = args[1:5]
        return _worker(audit, workspace, float(seconds), cache_dir)
    quick = "--quick" in args
    out = run_benchmark(rounds=600 if quick else 2000, seconds=0.5 if quick else 2.0)
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
