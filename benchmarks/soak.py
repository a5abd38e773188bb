"""``runtime bench soak --calls N [--json]``: many calls through one broker, sampling the
broker's (and its zygote's) RSS and open file descriptors at intervals. A long-running agent
must see no growth beyond noise: the report compares the median of the first and last
quarter of the samples, and checks that closing the broker leaves no child process and no
extra fd behind. Exit status 1 when a check fails.

The mix: sandboxed reads, writes and shell commands, wasm json_parse, and failing calls (bad
arguments, denied paths), so error paths are soaked too.

Noise: the broker's RSS grows early on (imports, SQLite's page cache of up to ~2 MiB per
connection, allocator arenas), so the default budget for the last-vs-first-quarter growth
is 16 MiB; a leak of even 2 KiB a call shows as 20 MiB over 10,000 calls.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from runtime.broker import SyncBroker

__all__ = ["MIX", "WARMUP_ROUNDS", "main", "run_soak"]

MIX: list[dict[str, Any]] = [
    {"tool": "read_file", "arguments": {"path": "data.txt"}},
    {"tool": "write_file", "arguments": {"path": "out/soak.txt", "content": "soak\n"}},
    {"tool": "json_parse", "arguments": {"text": '{"a": [1, 2, 3], "b": {"c": "d"}}'}},
    {"tool": "read_file", "arguments": {"path": "../outside.txt"}},
    {"tool": "list_files", "arguments": {"path": "."}},
    {"tool": "read_file", "arguments": {"path": 42}},
    {"tool": "shell_exec", "arguments": {"command": "echo soak"}},
]


#: Rounds of the mix run before sampling starts (and counted in the audit only).
WARMUP_ROUNDS = 3


def _proc_stats(pid: int | None, reads: int = 5) -> tuple[float, int]:
    """(RSS MiB, open fds) of a process; (0, 0) when it is gone. The fds are the fewest of
    ``reads`` looks 10 ms apart: the zygote holds a finished call's mount namespace until
    its janitor thread closes it, just after the call's exit report, so a look right after
    a call may see that one descriptor on its way out. A leaked descriptor stays in every
    look."""
    if pid is None:
        return 0.0, 0
    try:
        proc = psutil.Process(pid)
        fds = proc.num_fds()
        for _ in range(reads - 1):
            time.sleep(0.01)
            fds = min(fds, proc.num_fds())
        return proc.memory_info().rss / 2**20, fds
    except psutil.Error:
        return 0.0, 0


def _growth(points: list[dict[str, Any]], key: str) -> float:
    q = max(1, len(points) // 4)
    first = statistics.median(p[key] for p in points[:q])
    last = statistics.median(p[key] for p in points[-q:])
    return float(last - first)


def run_soak(calls: int, samples: int = 20, max_rss_growth_mb: float = 16.0) -> dict[str, Any]:
    """Run ``calls`` calls; return the samples, the growth figures and the checks."""
    if calls < 1 or samples < 1:
        raise ValueError(f"calls and samples must be at least 1, not {calls} and {samples}")
    me = psutil.Process()
    every = max(1, calls // samples)
    points: list[dict[str, Any]] = []
    outcomes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="runtime-soak-") as tmp:
        os.chmod(tmp, 0o755)  # the sandbox uid must be able to reach the workspace
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "data.txt").write_text("x" * 4096)
        fds_before = me.num_fds()
        children_before = {p.pid for p in me.children(recursive=True)}
        t0 = time.perf_counter()
        with SyncBroker(workspace=ws, audit=Path(tmp) / "audit.db") as broker:
            # Warm-up, not sampled: backends start, the zygote pre-forks a spare per call
            # profile (each holds an fd), caches fill.
            for call in MIX * WARMUP_ROUNDS:
                broker.call(call)
            for i in range(calls):
                result = broker.call(MIX[i % len(MIX)])
                key = (
                    "success" if result.success else str(result.error.type if result.error else "?")
                )
                outcomes[key] = outcomes.get(key, 0) + 1
                if i % every == 0 or i == calls - 1:
                    # The zygote is the sandbox backend's; a leak there would not show in
                    # the broker's own figures.
                    assert broker.broker is not None
                    sandbox = broker.broker._backends.get("subprocess")
                    z_rss, z_fds = _proc_stats(getattr(sandbox, "zygote_pid", None))
                    points.append(
                        {
                            "call": i + 1,
                            "rss_mb": me.memory_info().rss / 2**20,
                            "fds": me.num_fds(),
                            "children": len(me.children(recursive=True)),
                            "zygote_rss_mb": z_rss,
                            "zygote_fds": z_fds,
                        }
                    )
            verified = broker.audit.verify()
            interrupted = broker.audit.interrupted()
        elapsed = time.perf_counter() - t0
        leftover_children = {p.pid for p in me.children(recursive=True)} - children_before
        fds_after = me.num_fds()
    out: dict[str, Any] = {
        "calls": calls,
        "seconds": elapsed,
        "calls_per_s": calls / elapsed,
        "outcomes": outcomes,
        "audit_ok": verified.ok,
        "audit_records": verified.count,
        "audit_interrupted": len(interrupted),
        "rss_mb_first": points[0]["rss_mb"],
        "rss_mb_last": points[-1]["rss_mb"],
        "rss_growth_mb": _growth(points, "rss_mb"),
        "fd_growth": _growth(points, "fds"),
        "zygote_rss_growth_mb": _growth(points, "zygote_rss_mb"),
        "zygote_fd_growth": _growth(points, "zygote_fds"),
        "fds_leaked_after_close": fds_after - fds_before,
        "children_after_close": len(leftover_children),
        "max_rss_growth_mb": max_rss_growth_mb,
        "samples": points,
    }
    checks = {
        "audit": verified.ok
        and verified.count == 2 * (calls + WARMUP_ROUNDS * len(MIX))
        and not interrupted,
        "fd_growth": out["fd_growth"] == 0 and out["zygote_fd_growth"] == 0,
        "rss_growth": out["rss_growth_mb"] <= max_rss_growth_mb
        and out["zygote_rss_growth_mb"] <= max_rss_growth_mb,
        "closed_clean": out["fds_leaked_after_close"] == 0 and not leftover_children,
    }
    out["checks"] = checks
    out["ok"] = all(checks.values())
    return out


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (0 calls divided by zero and indexed an empty
    list of samples: tracebacks, not usage errors)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _megabytes(text: str) -> float:
    """argparse type: a finite number >= 0 (NaN would fail every check, silently)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text!r}")
    return value


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="runtime bench soak")
    parser.add_argument("--calls", type=_positive_int, default=10_000, help="Calls (>= 1).")
    parser.add_argument(
        "--samples", type=_positive_int, default=20, help="Samples over the run (>= 1)."
    )
    parser.add_argument(
        "--max-rss-growth-mb",
        type=_megabytes,
        default=16.0,
        help="Allowed RSS growth, last vs first quarter (MiB). Default 16.",
    )
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse(argv)
    except SystemExit as exc:
        # argparse exits 2 on a usage error; the CLI's contract (DESIGN §7) says 64.
        return 0 if exc.code == 0 else 64
    out = run_soak(args.calls, args.samples, args.max_rss_growth_mb)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        for p in out["samples"]:
            sys.stdout.write(
                f"call {p['call']:>7}  rss {p['rss_mb']:8.1f} MiB  fds {p['fds']:4d}  "
                f"children {p['children']:2d}  zygote rss {p['zygote_rss_mb']:6.1f} MiB  "
                f"fds {p['zygote_fds']:3d}\n"
            )
        sys.stdout.write(
            f"{out['calls']} calls in {out['seconds']:.1f} s ({out['calls_per_s']:.0f}/s); "
            f"RSS growth {out['rss_growth_mb']:+.1f} MiB (zygote "
            f"{out['zygote_rss_growth_mb']:+.1f}), fd growth {out['fd_growth']:+.0f} (zygote "
            f"{out['zygote_fd_growth']:+.0f}); after close: {out['fds_leaked_after_close']} "
            f"fds, {out['children_after_close']} children; audit ok={out['audit_ok']} "
            f"records={out['audit_records']}; checks {out['checks']}\n"
        )
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
