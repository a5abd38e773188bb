"""Where an isolated call's wall time goes, step by step, through the public API.

    PYTHONPATH=. python benchmarks/bench_latency.py [--json] [-n 60] [--gap 0.05]

``SyncBroker(workspace=ws)`` on the default policy reads a 4 KiB file ``n`` times, ``gap``
seconds apart (so that a spare is ready, as for an agent's calls; ``--gap 0`` for calls
back to back). Time marks (CLOCK_MONOTONIC) around the sandbox backend's steps split each
call into:

* ``broker_before_ms``: the broker's pipeline before the backend (shape, schema, policy,
  the write-ahead audit record);
* ``spawn_ms``: the backend's spawn (call socket, plan, the call frame written, the spawn
  message sent to the fork-server);
* ``call_ms``: spawn sent → the result frame in the broker (the zygote activates a spare,
  the tool runs);
* ``exit_ms``: result frame → the call's last process reaped by the zygote (its exit,
  ``reaped_at`` of the exit report: the clock is system-wide);
* ``report_ms``: reaped → the exit report read by the broker;
* ``broker_after_ms``: the backend's outcome and the broker's completion record and result;
* ``total_ms``.

Medians, and the load average before and after. The marks wrap the backend's methods in
this process only (nothing of the product is changed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime import SyncBroker  # noqa: E402
from runtime.backends.sandbox import _channels, backend  # noqa: E402

STEPS = (
    "broker_before_ms",
    "spawn_ms",
    "call_ms",
    "exit_ms",
    "report_ms",
    "broker_after_ms",
    "total_ms",
)


def _marked(marks: dict[str, float]) -> list[tuple[Any, str, Callable[..., Any]]]:
    """Wrappers that note when the backend's steps start and end; (owner, name, original)."""
    clock = time.monotonic
    run_sync = backend.SandboxBackend.run_sync
    converse = backend.SandboxBackend._converse_sync
    wait_for = _channels.ControlChannel.wait_for_sync

    def run_sync_marked(self: Any, request: Any) -> Any:
        marks["run"] = clock()
        try:
            return run_sync(self, request)
        finally:
            marks["returned"] = clock()

    def converse_marked(self: Any, *args: Any, **kwargs: Any) -> Any:
        marks["spawned"] = clock()
        try:
            return converse(self, *args, **kwargs)
        finally:
            marks["result"] = clock()

    def wait_for_marked(self: Any, call_id: int, deadline: float) -> Any:
        report = wait_for(self, call_id, deadline)
        marks["report"] = clock()
        marks["reaped"] = float(report.get("reaped_at", marks["report"]))
        return report

    backend.SandboxBackend.run_sync = run_sync_marked  # type: ignore[method-assign]
    backend.SandboxBackend._converse_sync = converse_marked  # type: ignore[method-assign]
    _channels.ControlChannel.wait_for_sync = wait_for_marked  # type: ignore[method-assign]
    return [
        (backend.SandboxBackend, "run_sync", run_sync),
        (backend.SandboxBackend, "_converse_sync", converse),
        (_channels.ControlChannel, "wait_for_sync", wait_for),
    ]


def run_benchmark(n: int = 60, gap: float = 0.05) -> dict[str, Any]:
    marks: dict[str, float] = {}
    load_before = os.getloadavg()
    rows: list[dict[str, float]] = []
    originals = _marked(marks)
    try:
        with tempfile.TemporaryDirectory(prefix="runtime-latency-") as tmp:
            os.chmod(tmp, 0o755)  # the sandbox uid must reach the workspace
            ws = Path(tmp) / "ws"
            ws.mkdir()
            (ws / "f.txt").write_text("x" * 4096)
            call = {"tool": "read_file", "arguments": {"path": "f.txt"}}
            with SyncBroker(workspace=ws) as broker:
                for _ in range(10):  # the fork-server, its spares, caches
                    if not broker.call(call).success:
                        raise RuntimeError("the isolated read_file failed")
                for _ in range(n):
                    time.sleep(gap)
                    marks.clear()
                    start = time.monotonic()
                    result = broker.call(call)
                    end = time.monotonic()
                    if not result.success:
                        raise RuntimeError(f"the isolated read_file failed: {result.error}")
                    m = marks
                    rows.append(
                        {
                            "broker_before_ms": m["run"] - start,
                            "spawn_ms": m["spawned"] - m["run"],
                            "call_ms": m["result"] - m["spawned"],
                            "exit_ms": m["reaped"] - m["result"],
                            "report_ms": m["report"] - m["reaped"],
                            "broker_after_ms": end - m["report"],
                            "total_ms": end - start,
                        }
                    )
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    out: dict[str, Any] = {
        step: round(statistics.median(r[step] for r in rows) * 1000, 3) for step in STEPS
    }
    out.update(calls=n, gap_s=gap, load_avg=[*load_before, *os.getloadavg()])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-n", type=int, default=60, help="calls measured")
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between calls")
    args = parser.parse_args(argv)
    res = run_benchmark(args.n, args.gap)
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    for step in STEPS:
        print(f"{step:17s}: {res[step]:7.3f} ms")
    print(f"load average before/after: {res['load_avg']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
