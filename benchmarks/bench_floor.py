"""The kernel floor of the sandbox's isolation model, side by side with bwrap, in one run.

    PYTHONPATH=. python benchmarks/bench_floor.py [--json] [-n 300]

``benchmarks/floor.c`` (built here with the pinned zig) does, per sandbox, the kernel work
of an isolated ``read_file`` (user, pid, mount, network, IPC and UTS namespaces, a tmpfs
root with the workspace read-only, /tmp, /dev, the system directories, /proc, pivot_root,
no_new_privs, rlimits, Landlock, seccomp) and reads 4 KiB — in C, with no interpreter and
no fork-server. Beside it, ``bwrap --unshare-all`` with the same binds running ``cat`` of
the same file (its exec of itself and of ``cat`` included, as in ``bench_sandbox``).

Keys: ``floor_ms`` {median, p99} (one sandbox at a time), ``floor_cpu_ms`` and
``bwrap_cpu_ms`` (CPU per sandbox of every process involved, from rusage: the kernel
threads that finish a network namespace's teardown are not in it, ~0.5 ms more here),
``floor_calls_per_s`` and ``bwrap_calls_per_s`` at concurrency 1, 2 and 8 (that many
processes each running sandboxes back to back).
Run as root, both run as the runtime's sandbox uid (``SANDBOX_UID``) through ``setpriv``: a
sandbox never maps host root.
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime._zigcc import zig_cc  # noqa: E402
from runtime.backends.sandbox.backend import SANDBOX_UID  # noqa: E402

__all__ = ["build", "run_benchmark"]

SOURCE = Path(__file__).with_name("floor.c")
CFLAGS = ("-target", "x86_64-linux-musl", "-O2", "-static", "-Wall", "-Wextra", "-Werror")


def build(out_dir: Path) -> Path:
    target = out_dir / "floor"
    zig_cc([SOURCE], CFLAGS, target, what="the kernel-floor benchmark", mode=0o755)
    return target


def _as_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    return ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]


def _bwrap(workspace: Path) -> list[str]:
    # As bench_sandbox's: /usr read-only, the merged-/usr symlinks (floor.c binds only the
    # system directories that are directories, here /usr alone).
    return [
        "bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/bin", "/bin", "--ro-bind", str(workspace), "/workspace",
        "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc", "cat", "/workspace/f.txt",
    ]  # fmt: skip


def _children_cpu_ms() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000.0


def _floor_batch(binary: Path, root: Path, ws: Path, count: int) -> list[str]:
    return [*_as_user(), str(binary), str(count), str(root), str(ws)]


def _rate(commands: list[list[str]], total: int) -> tuple[float, float]:
    """Run ``commands`` concurrently; returns (sandboxes per second, system CPU ms each)."""
    cpu0, t0 = _children_cpu_ms(), time.perf_counter()
    procs = [
        subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands
    ]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{commands[0][-4:]} failed: {err.decode(errors='replace')}")
    wall = time.perf_counter() - t0
    return total / wall, (_children_cpu_ms() - cpu0) / total


def _bwrap_loop(argv: list[str], count: int) -> list[str]:
    # One process running `count` bwraps back to back (a shell loop: no Python per run).
    quoted = " ".join(f"'{a}'" for a in argv)
    return ["sh", "-c", f"i=0; while [ $i -lt {count} ]; do {quoted} >/dev/null || exit 1; "
            "i=$((i+1)); done"]  # fmt: skip


def run_benchmark(n: int = 300, concurrency: tuple[int, ...] = (1, 2, 8)) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-floor-", dir="/tmp"))
    try:
        os.chmod(tmp, 0o755)
        binary = build(tmp)
        root = tmp / "root"
        ws = tmp / "ws"
        root.mkdir(mode=0o755)
        ws.mkdir(mode=0o755)
        (ws / "f.txt").write_bytes(b"a" * 4096)
        os.chmod(ws / "f.txt", 0o644)
        out: dict[str, Any] = {"n": n}
        has_bwrap = shutil.which("bwrap") is not None
        # Latency: one sandbox at a time, per-sandbox times from the C side.
        proc = subprocess.run(
            _floor_batch(binary, root, ws, n), capture_output=True, text=True, check=True
        )
        us = sorted(float(x) for x in proc.stdout.split())
        out["floor_ms"] = {
            "median": round(statistics.median(us) / 1000, 3),
            "p99": round(us[min(len(us) - 1, int(len(us) * 0.99))] / 1000, 3),
        }
        out["floor_calls_per_s"], out["bwrap_calls_per_s"] = {}, {}
        for level in concurrency:
            each = max(1, n // level)
            rate, cpu = _rate(
                [_floor_batch(binary, root, ws, each) for _ in range(level)], each * level
            )
            out["floor_calls_per_s"][str(level)] = round(rate, 1)
            if level == 1:
                out["floor_cpu_ms"] = round(cpu, 2)
            if has_bwrap:
                each_b = max(1, each // 3)  # bwrap is slower: fewer runs, same minutes
                bw = [[*_as_user(), *_bwrap_loop(_bwrap(ws), each_b)] for _ in range(level)]
                rate, cpu = _rate(bw, each_b * level)
                out["bwrap_calls_per_s"][str(level)] = round(rate, 1)
                if level == 1:
                    out["bwrap_cpu_ms"] = round(cpu, 2)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-n", type=int, default=300, help="sandboxes per measurement")
    args = parser.parse_args(argv)
    res = run_benchmark(args.n)
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"floor sandbox (C)     : {res['floor_ms']} ms, {res['floor_cpu_ms']} ms CPU")
    print(f"  sandboxes/s         : {res['floor_calls_per_s']}")
    if res["bwrap_calls_per_s"]:
        print(f"bwrap --unshare-all   : {res['bwrap_cpu_ms']} ms CPU")
        print(f"  sandboxes/s         : {res['bwrap_calls_per_s']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
