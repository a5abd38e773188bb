"""Sandbox backend benchmark: an isolated 4 KiB read side by side with bwrap and naive Python.

    python benchmarks/bench_sandbox.py [--json] [-n 200]

``run_benchmark()`` returns the figures as a dict (for ``runtime bench perf``):
``isolated_read_ms`` {median, p99}, ``bwrap_true_ms`` {median, p99}, ``naive_python_ms``
{median, p99}, ``isolated_vs_bwrap`` (median ratio; goal <= 0.5) and
``isolated_calls_per_s`` {concurrency: calls/s} (goal >= 400). All measured in one run,
because these machines are noisy and only ratios compare.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.backends.base import ExecRequest  # noqa: E402
from runtime.backends.sandbox import SandboxBackend  # noqa: E402
from runtime.models import (  # noqa: E402
    BackendKind,
    Decision,
    Limits,
    SandboxNeeds,
    ToolSpec,
    WorkspaceAccess,
)

__all__ = ["run_benchmark"]

# TEST-ONLY read_file (tests/sandbox/tools/files.py) stands in until the catalogue's exists.
READ_FILE = ToolSpec(
    name="read_file",
    description="read a file (benchmark)",
    category="file",
    parameters={"type": "object"},
    backend=BackendKind.SUBPROCESS,
    entry="files:read_file",
    sandbox=SandboxNeeds(workspace=WorkspaceAccess.READ),
    source=ROOT / "tests" / "sandbox" / "tools" / "read_file.json",
)

BWRAP = [
    "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
    "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev", "/bin/true",
]  # fmt: skip

NAIVE_TOOL = """
import json, sys
with open(sys.argv[1], "rb") as f:
    data = f.read()
print(json.dumps({"content": data.decode(), "size": len(data)}))
"""


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"median": round(statistics.median(ordered), 3), "p99": round(p99, 3)}


def _time_process(argv: list[str], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _request(workspace: Path, limits: Limits) -> ExecRequest:
    return ExecRequest(
        call_id="bench",
        spec=READ_FILE,
        arguments={"path": "data.txt"},
        workspace=workspace,
        limits=limits,
        decision=Decision(action="allow", rule="bench", limits=limits),
    )


async def _isolated(workspace: Path, n: int, concurrency: Iterable[int]) -> dict[str, Any]:
    limits = Limits()
    backend = SandboxBackend(preload=[READ_FILE])
    await backend.start()
    try:
        for _ in range(10):  # warm-up
            await backend.run(_request(workspace, limits))
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            outcome = await backend.run(_request(workspace, limits))
            samples.append((time.perf_counter() - t) * 1000)
            assert outcome.result["size"] == 4096
        rates: dict[str, float] = {}
        for level in concurrency:
            total = max(n, 4 * level)
            done = 0

            async def worker(count: int) -> None:
                nonlocal done
                for _ in range(count):
                    await backend.run(_request(workspace, limits))
                    done += 1

            t = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(level):
                    tg.start_soon(worker, total // level + (1 if i < total % level else 0))
            rates[str(level)] = round(done / (time.perf_counter() - t), 1)
        return {"samples": samples, "rates": rates, "fingerprint": backend.fingerprint().as_dict()}
    finally:
        await backend.aclose()


def run_benchmark(n: int = 200, concurrency: Iterable[int] = (1, 2, 8, 64)) -> dict[str, Any]:
    """Measure everything in one run and return the figures (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    try:
        os.chmod(tmp, 0o755)
        workspace = tmp / "ws"
        workspace.mkdir()
        (workspace / "data.txt").write_bytes(b"x" * 4096)
        tool = tmp / "tool.py"
        tool.write_text(NAIVE_TOOL)
        iso = anyio.run(_isolated, workspace, n, tuple(concurrency))
        result: dict[str, Any] = {
            "isolated_read_ms": _stats(iso["samples"]),
            "isolated_calls_per_s": iso["rates"],
            "sandbox": iso["fingerprint"],
            "naive_python_ms": _stats(
                _time_process(
                    [sys.executable, str(tool), str(workspace / "data.txt")], max(20, n // 10)
                )
            ),
        }
        if shutil.which("bwrap"):
            result["bwrap_true_ms"] = _stats(_time_process(BWRAP, n))
            result["isolated_vs_bwrap"] = round(
                result["isolated_read_ms"]["median"] / result["bwrap_true_ms"]["median"], 3
            )
        else:
            result["bwrap_true_ms"] = None
            result["isolated_vs_bwrap"] = None
        result["cpus"] = os.cpu_count()
        result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-n", type=int, default=200, help="samples per measurement")
    args = parser.parse_args(argv)
    result = run_benchmark(n=args.n)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"isolated read_file 4 KiB : {result['isolated_read_ms']} ms")
    print(f"bwrap --unshare-all true : {result['bwrap_true_ms']} ms")
    print(f"naive python tool.py     : {result['naive_python_ms']} ms")
    print(f"isolated / bwrap         : {result['isolated_vs_bwrap']} (goal <= 0.5)")
    print(f"isolated calls/s         : {result['isolated_calls_per_s']} (goal >= 400)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
