"""``runtime bench soak --calls N [--json]``: many calls through one broker, sampling the
broker's RSS and open file descriptors at intervals. A long-running agent must see no growth
beyond noise: the report compares the first and last quarter of the samples.

The mix: sandboxed reads and writes, wasm json_parse, and failing calls (bad arguments,
denied paths), so error paths are soaked too.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from runtime.broker import SyncBroker

MIX: list[dict[str, Any]] = [
    {"tool": "read_file", "arguments": {"path": "data.txt"}},
    {"tool": "write_file", "arguments": {"path": "out/soak.txt", "content": "soak\n"}},
    {"tool": "json_parse", "arguments": {"text": '{"a": [1, 2, 3], "b": {"c": "d"}}'}},
    {"tool": "read_file", "arguments": {"path": "../outside.txt"}},
    {"tool": "list_files", "arguments": {"path": "."}},
    {"tool": "read_file", "arguments": {"path": 42}},
]


def _fds(proc: psutil.Process) -> int:
    return proc.num_fds()


def run_soak(calls: int, samples: int = 20) -> dict[str, Any]:
    proc = psutil.Process()
    every = max(1, calls // samples)
    points: list[dict[str, float]] = []
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "data.txt").write_text("x" * 4096)
        t0 = time.perf_counter()
        with SyncBroker(workspace=ws, audit=Path(tmp) / "audit.db") as broker:
            for i in range(calls):
                result = broker.call(MIX[i % len(MIX)])
                key = (
                    "success" if result.success else str(result.error.type if result.error else "?")
                )
                outcomes[key] = outcomes.get(key, 0) + 1
                if i % every == 0:
                    points.append(
                        {
                            "call": i,
                            "rss_mb": proc.memory_info().rss / 2**20,
                            "fds": _fds(proc),
                            "children": len(proc.children(recursive=True)),
                        }
                    )
            verified = broker.audit.verify()
        elapsed = time.perf_counter() - t0
    q = max(1, len(points) // 4)
    first = points[:q]
    last = points[-q:]
    rss_growth = statistics.median(p["rss_mb"] for p in last) - statistics.median(
        p["rss_mb"] for p in first
    )
    fd_growth = statistics.median(p["fds"] for p in last) - statistics.median(
        p["fds"] for p in first
    )
    return {
        "calls": calls,
        "seconds": elapsed,
        "calls_per_s": calls / elapsed,
        "outcomes": outcomes,
        "audit_ok": verified.ok,
        "audit_records": verified.count,
        "rss_mb_first": first[0]["rss_mb"],
        "rss_mb_last": last[-1]["rss_mb"],
        "rss_growth_mb": rss_growth,
        "fd_growth": fd_growth,
        "samples": points,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="runtime bench soak")
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    out = run_soak(args.calls)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        for p in out["samples"]:
            sys.stdout.write(
                f"call {p['call']:>7}  rss {p['rss_mb']:8.1f} MiB  fds {p['fds']:4.0f}  "
                f"children {p['children']:.0f}\n"
            )
        sys.stdout.write(
            f"{out['calls']} calls in {out['seconds']:.1f} s ({out['calls_per_s']:.0f}/s); "
            f"RSS growth {out['rss_growth_mb']:+.1f} MiB, fd growth {out['fd_growth']:+.0f}; "
            f"audit ok={out['audit_ok']} records={out['audit_records']}\n"
        )
    return 0 if out["audit_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
