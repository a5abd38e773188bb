"""What a call's process costs to end, by its shape: a Python copy against a small static program.

    PYTHONPATH=. python benchmarks/bench_exit_shape.py [--json] [-n 150]

An isolated call returns only once its processes are reaped (DESIGN §3: nothing of a call
outlives it), so the exit of the call's process is on every call's path. This measures that
exit outside any sandbox, in one process that has imported what the fork-server imports (its
module, its preloads, the file tools), alternating sample by sample:

- ``python``: a fork of that process waits for a byte, reads a 4 KiB file, writes it to a
  pipe and ``_exit``s: the shape of today's spare;
- ``static``: a fork of the same process that ``exec``s a small static C program (built here
  with the pinned zig) before it is started: the same wait, read, write and exit.

Keys: ``call_us`` (the byte sent to the 4 KiB back) and ``exit_us`` (the 4 KiB back to the
reap, through a pidfd), each {median, p90} per shape, and ``parent_rss_kb``. The figure this
is for is ``exit_us``: the ``python`` shape's is the ~2 ms that ``benchmarks/SANDBOX.md``
(seventh round) found on every call's path; the gap is what a call served by a small native
image instead of a copy of the fork-server would save.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime._zigcc import zig_cc  # noqa: E402

__all__ = ["run_benchmark"]

_RUNNER = r"""
#include <fcntl.h>
#include <unistd.h>
/* fd 3: wait for one byte; then read argv[1] and write it to fd 4. */
int main(int argc, char **argv) {
    char go, buf[8192];
    if (argc != 2 || read(3, &go, 1) != 1) return 1;
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 2;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 || write(4, buf, (size_t)n) != n) return 3;
    return 0;
}
"""
_CFLAGS = ("-target", "x86_64-linux-musl", "-O2", "-static", "-Wall", "-Wextra", "-Werror")


def _load_fork_server_imports(freeze: bool) -> None:
    """Import what the fork-server's heap holds: its module, its preloads, the file tools."""
    from runtime.backends.sandbox import zygote

    for name in zygote._PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    path = ROOT / "tools" / "files" / "files.py"
    spec = importlib.util.spec_from_file_location("_bench_files_tool", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    if freeze:  # as the fork-server does: the copies do not touch these objects' pages
        gc.freeze()


def _one(shape: str, runner: Path, data: Path) -> tuple[float, float]:
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the measured child
        try:
            os.close(go_w)
            os.close(res_r)
            if shape == "static":
                # Both out of the way first: either pipe end may already be fd 3 or 4.
                os.dup2(go_r, 30)
                os.dup2(res_w, 31)
                os.dup2(30, 3)
                os.dup2(31, 4)
                os.execv(runner, [runner.name, str(data)])
            os.read(go_r, 1)
            with open(data, "rb") as f:
                os.write(res_w, f.read())
        finally:
            os._exit(0)
    os.close(go_r)
    os.close(res_w)
    pidfd = os.pidfd_open(pid)
    try:
        time.sleep(0.01)  # the process is ready (its exec done) before it is started
        t0 = time.perf_counter_ns()
        os.write(go_w, b"x")
        got = os.read(res_r, 65536)
        t1 = time.perf_counter_ns()
        os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
        t2 = time.perf_counter_ns()
    finally:
        for fd in (pidfd, go_w, res_r):
            os.close(fd)
    if len(got) != 4096:
        raise RuntimeError(f"{shape}: read {len(got)} bytes, not 4096")
    return (t1 - t0) / 1e3, (t2 - t1) / 1e3


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[int(len(ordered) * 0.9)], 1),
    }


def run_benchmark(n: int = 150, *, freeze: bool = True) -> dict[str, Any]:
    """``freeze=False`` for a run inside a process that must keep collecting (a test)."""
    _load_fork_server_imports(freeze)
    with tempfile.TemporaryDirectory(prefix="bench-exit-") as tmp:
        base = Path(tmp)
        source = base / "runner.c"
        source.write_text(_RUNNER)
        runner = base / "runner"
        zig_cc([source], _CFLAGS, runner, what="the exit-shape benchmark's runner", mode=0o755)
        data = base / "f.txt"
        data.write_bytes(b"a" * 4096)
        samples: dict[str, tuple[list[float], list[float]]] = {
            "python": ([], []),
            "static": ([], []),
        }
        for _ in range(n):
            for shape, (calls, exits) in samples.items():
                call_us, exit_us = _one(shape, runner, data)
                calls.append(call_us)
                exits.append(exit_us)
    with open("/proc/self/statm") as f:
        rss_kb = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    return {
        "n": n,
        "parent_rss_kb": rss_kb,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        **{
            shape: {"call_us": _summary(calls), "exit_us": _summary(exits)}
            for shape, (calls, exits) in samples.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=150)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run_benchmark(args.n)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"parent RSS {out['parent_rss_kb']} KB, load {out['load_average']}, n={out['n']}")
    for shape in ("python", "static"):
        call, ext = out[shape]["call_us"], out[shape]["exit_us"]
        print(
            f"{shape:7s} call {call['median']:8.1f} µs (p90 {call['p90']:8.1f})"
            f"   result → reaped {ext['median']:8.1f} µs (p90 {ext['p90']:8.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
