"""Sandbox benchmark: an isolated 4 KiB read_file through SyncBroker, side by side with bwrap.

    python benchmarks/bench_sandbox.py [--json] [-n 200]

``run_benchmark()`` returns the figures as a dict (for ``runtime bench perf``):
``isolated_read_ms`` {median, p99}, ``bwrap_true_ms`` {median, p99}, ``naive_python_ms``
{median, p99}, ``isolated_vs_bwrap`` (median ratio; goal <= 0.5) and
``isolated_calls_per_s`` {concurrency: calls/s} (goal >= 400 on 2 cores), plus CPU time per
run (``*_cpu_ms``, rusage: ``isolated_cpu_ms`` is the zygote, its cloner and the call's processes,
``broker_cpu_ms`` the broker's own pipeline), ``isolated_page_faults`` (minor faults of the
zygote, its cloner and the call's processes per call: exact, where the CPU times are tick-sampled),
``broker_async_cpu_ms`` (the event-loop thread's CPU time per ``await Broker.call`` of the
same read, the async path an MCP server takes; ``time.thread_time``, measured after the
rest), ``loadavg`` and ``cpus``.

The isolated call goes through the public API: ``SyncBroker(workspace=ws)`` on the default
policy, ``broker.call({"tool": "read_file", "arguments": {"path": "f.txt"}})``. The three
measurements are interleaved sample by sample, because the machines this runs on are shared
and noisy: only figures taken side by side in one run compare.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.backends.sandbox.zygote import CLONER_NAME  # noqa: E402
from runtime.broker import Broker, SyncBroker  # noqa: E402

__all__ = ["run_benchmark"]

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

CALL = {"tool": "read_file", "arguments": {"path": "f.txt"}}


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"median": round(statistics.median(ordered), 3), "p99": round(p99, 3)}


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ru.ru_utime + ru.ru_stime) * 1000.0


def _cpu_sandbox(sandbox: list[psutil.Process]) -> tuple[float, float]:
    """CPU ms of (this process: broker and event loop, the fork-server's processes with
    their reaped calls)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    own = (ru.ru_utime + ru.ru_stime) * 1000.0
    total = 0.0
    for proc in sandbox:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += (t.user + t.system + t.children_user + t.children_system) * 1000.0
    return own, total


def _faults(sandbox: list[psutil.Process]) -> int:
    """Minor page faults of the fork-server's processes and their reaped children (every
    call's processes): exact counts, unlike the tick-sampled CPU times; each is mostly a
    copy-on-write copy."""
    total = 0
    for proc in sandbox:
        try:
            with open(f"/proc/{proc.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[7]) + int(fields[8])  # minflt, cminflt
    return total


def _run_process(argv: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of argv."""
    cpu = _cpu_children()
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000.0, _cpu_children() - cpu


def _sandbox_processes(broker: SyncBroker) -> list[psutil.Process]:
    """The fork-server and its long-lived cloner (which makes every call's clone and is
    never reaped, so its own faults and CPU are not in the zygote's children counts)."""
    for child in psutil.Process().children():
        if "runtime.backends.sandbox.zygote" in " ".join(child.cmdline()):
            helpers = [c for c in child.children() if c.name() == CLONER_NAME.decode()]
            return [child, *helpers]
    return []


def _one(broker: SyncBroker) -> str | None:
    """One isolated read; returns the backend that ran it."""
    result = broker.call(CALL)
    if not result.success or "x" * 4096 not in json.dumps(result.result):
        raise RuntimeError(f"isolated read failed: {result.error}")
    return result.backend


def _rate(broker: SyncBroker, level: int, total: int) -> float:
    """Calls per second with ``level`` threads calling the SyncBroker at once."""
    counts = [total // level + (1 if i < total % level else 0) for i in range(level)]
    errors: list[BaseException] = []

    def worker(count: int) -> None:
        try:
            for _ in range(count):
                _one(broker)
        except BaseException as exc:  # reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(c,)) for c in counts]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - t
    if errors:
        raise errors[0]
    return round(total / elapsed, 1)


def _async_cpu(workspace: Path, n: int) -> list[float]:
    """The event-loop thread's CPU ms per ``await broker.call`` (the async path)."""
    import anyio

    async def main() -> list[float]:
        samples: list[float] = []
        async with Broker(workspace=workspace) as broker:
            for i in range(10 + n):  # 10 warm-up calls first
                t = time.thread_time()
                result = await broker.call(CALL)
                cpu = (time.thread_time() - t) * 1000.0
                if not result.success:
                    raise RuntimeError(f"isolated read failed: {result.error}")
                if i >= 10:
                    samples.append(cpu)
        return samples

    return anyio.run(main)


def run_benchmark(n: int = 200, concurrency: Iterable[int] = (1, 2, 8, 64)) -> dict[str, Any]:
    """Measure everything in one run and return the figures (see the module docstring)."""
    tmp = Path(tempfile.mkdtemp(prefix="rt-bench-"))
    has_bwrap = shutil.which("bwrap") is not None
    try:
        os.chmod(tmp, 0o755)
        workspace = tmp / "ws"
        workspace.mkdir()
        (workspace / "f.txt").write_bytes(b"x" * 4096)
        tool = tmp / "tool.py"
        tool.write_text(NAIVE_TOOL)
        naive_argv = [sys.executable, str(tool), str(workspace / "f.txt")]
        iso: list[float] = []
        iso_cpu: list[float] = []
        broker_cpu: list[float] = []
        faults: list[float] = []
        bw: list[float] = []
        bw_cpu: list[float] = []
        naive: list[float] = []
        naive_cpu: list[float] = []
        load_before = os.getloadavg()
        with SyncBroker(workspace=workspace) as broker:
            for _ in range(10):  # warm-up: zygote start, tool import, spare pool
                backend = _one(broker)
            sandbox = _sandbox_processes(broker)
            naive_every = max(1, n // max(20, n // 10))
            for i in range(n):
                # Interleaved: a load spike hits all three measurements alike.
                own0, zyg0 = _cpu_sandbox(sandbox)
                flt0 = _faults(sandbox)
                t = time.perf_counter()
                _one(broker)
                iso.append((time.perf_counter() - t) * 1000.0)
                # The call's processes are reaped before call() returns: its CPU is counted.
                own1, zyg1 = _cpu_sandbox(sandbox)
                faults.append(_faults(sandbox) - flt0)
                broker_cpu.append(own1 - own0)
                iso_cpu.append(zyg1 - zyg0)
                if has_bwrap:
                    wall, cpu_ms = _run_process(BWRAP)
                    bw.append(wall)
                    bw_cpu.append(cpu_ms)
                if i % naive_every == 0:
                    wall, cpu_ms = _run_process(naive_argv)
                    naive.append(wall)
                    naive_cpu.append(cpu_ms)
            rates = {str(level): _rate(broker, level, max(n, 4 * level)) for level in concurrency}
        async_cpu = _async_cpu(workspace, n)
        result: dict[str, Any] = {
            "isolated_read_ms": _stats(iso),
            "isolated_cpu_ms": _stats(iso_cpu),
            "broker_cpu_ms": _stats(broker_cpu),
            "broker_async_cpu_ms": _stats(async_cpu),
            "isolated_page_faults": _stats(faults),
            "isolated_calls_per_s": rates,
            "naive_python_ms": _stats(naive),
            "naive_python_cpu_ms": _stats(naive_cpu),
            "bwrap_true_ms": _stats(bw) if bw else None,
            "bwrap_true_cpu_ms": _stats(bw_cpu) if bw_cpu else None,
            "isolated_vs_bwrap": (
                round(statistics.median(iso) / statistics.median(bw), 3) if bw else None
            ),
            "backend": backend,
            "cpus": os.cpu_count(),
            "loadavg": [round(x, 2) for x in (*load_before, *os.getloadavg())],
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
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
    print(f"  CPU zygote+cloner+call : {result['isolated_cpu_ms']} ms")
    print(f"  CPU broker (pipeline)  : {result['broker_cpu_ms']} ms")
    print(f"  CPU broker, async call : {result['broker_async_cpu_ms']} ms (event-loop thread)")
    print(f"  page faults per call   : {result['isolated_page_faults']}")
    print(f"bwrap --unshare-all true : {result['bwrap_true_ms']} ms")
    print(f"  CPU                    : {result['bwrap_true_cpu_ms']} ms")
    print(f"naive python tool.py     : {result['naive_python_ms']} ms")
    print(f"  CPU                    : {result['naive_python_cpu_ms']} ms")
    print(f"isolated / bwrap         : {result['isolated_vs_bwrap']} (goal <= 0.5)")
    print(f"isolated calls/s         : {result['isolated_calls_per_s']} (goal >= 400)")
    print(f"load average before/after: {result['loadavg']} on {result['cpus']} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
