"""Cold start of the command line: each measurement is a fresh ``python -m runtime`` process.

Commands (wall time from the spawn to the process's exit, unless said otherwise):

* ``exec_hello``: ``runtime exec examples/hello.json`` (a sandboxed shell_exec on the
  built-in default policy: the README's main job);
* ``exec_json``: ``runtime exec examples/json_parse.mcp.json`` (a wasm-only call);
* ``tools``: ``runtime tools``;
* ``serve_init``: ``runtime serve --mcp`` on stdio, from the spawn to the answer of
  ``initialize`` (the server is then closed by the end of its input, not timed).

``--also-root DIR`` measures the same commands from another checkout of the runtime (e.g.
``git worktree add --detach /tmp/rt-main main``), rounds interleaved so that load drifts hit
both; compare the two columns of one run, never figures of different runs.

Each root's ``runtime`` and ``tools`` are byte-compiled first (``compileall``), as an
installed package is: with ``PYTHONDONTWRITEBYTECODE`` set, an editable checkout would
otherwise compile every module from source in every process. Each root gets its own fresh
workspace (in a temporary directory) so that the audit logs are not shared.

Run: ``python benchmarks/bench_cold_start.py [ROUNDS] [--also-root DIR] [--only NAME,...]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = ("exec_hello", "exec_json", "tools", "serve_init")
_INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_cold_start", "version": "1"},
            },
        }
    )
    + "\n"
).encode()


def _env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), *[p for p in sys.path if p.endswith("site-packages")]]
    )
    return env


def _argv(root: Path, name: str) -> list[str]:
    base = [sys.executable, "-m", "runtime"]
    if name == "exec_hello":
        return [*base, "exec", str(root / "examples" / "hello.json")]
    if name == "exec_json":
        return [*base, "exec", str(root / "examples" / "json_parse.mcp.json")]
    if name == "tools":
        return [*base, "tools"]
    if name == "serve_init":
        return [*base, "serve", "--mcp"]
    raise ValueError(f"unknown command {name!r}; one of {', '.join(COMMANDS)}")


def one(root: Path, cwd: Path, name: str) -> float:
    """Seconds for one fresh process of ``name``; raises if it fails."""
    argv, env = _argv(root, name), _env(root)
    if name != "serve_init":
        t0 = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, timeout=120)
        elapsed = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(
                f"{name} in {root} exited {done.returncode}: {done.stderr[-2000:]!r}"
            )
        return elapsed
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_INITIALIZE)
        proc.stdin.flush()
        line = proc.stdout.readline()
        elapsed = time.perf_counter() - t0
        answer = json.loads(line) if line else {}
        if "result" not in answer:
            raise RuntimeError(f"serve_init in {root}: no initialize answer: {line[:500]!r}")
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    return elapsed


def _compile(root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(root / "runtime"), str(root / "tools")],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main(rounds: int, also: str | None, only: list[str]) -> None:
    roots = [REPO] + ([Path(also).resolve()] if also else [])
    tmp = Path(tempfile.mkdtemp(prefix="bench_cold_start."))
    try:
        cwds = {}
        for i, root in enumerate(roots):
            _compile(root)
            cwds[root] = tmp / f"root{i}"
            (cwds[root] / "workspace").mkdir(parents=True)
            for name in only:  # warm-up: the wasm guests and accelerators built, caches filled
                one(root, cwds[root], name)
        samples: dict[tuple[str, Path], list[float]] = {(n, r): [] for n in only for r in roots}
        load = [os.getloadavg()[0]]
        started = time.strftime("%H:%M:%S")
        for _ in range(rounds):
            for name in only:
                for root in roots:  # interleaved: load drifts hit every root
                    samples[(name, root)].append(one(root, cwds[root], name))
            load.append(os.getloadavg()[0])
        print(
            f"{rounds} rounds, {started}-{time.strftime('%H:%M:%S')}, load average "
            f"{min(load):.1f}-{max(load):.1f}; median / p90 in ms"
        )
        header = "".join(f"{r.name[:24]:>26}" for r in roots)
        print(f"{'command':<12}{header}")
        for name in only:
            cells = []
            for root in roots:
                values = sorted(samples[(name, root)])
                p90 = values[min(len(values) - 1, round(0.9 * (len(values) - 1)))]
                cells.append(f"{statistics.median(values) * 1e3:10.0f} / {p90 * 1e3:6.0f}")
            print(f"{name:<12}" + "".join(f"{c:>26}" for c in cells))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    also_root = None
    if "--also-root" in args:
        i = args.index("--also-root")
        also_root = args[i + 1]
        del args[i : i + 2]
    names = list(COMMANDS)
    if "--only" in args:
        i = args.index("--only")
        names = [n for n in args[i + 1].split(",") if n]
        del args[i : i + 2]
        for n in names:
            _argv(REPO, n)  # an unknown name fails here, before anything runs
    main(int(args[0]) if args else 10, also_root, names)
