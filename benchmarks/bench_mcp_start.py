"""External MCP server: start-up (spawn, handshake, tool listing), one call, and close,
measured side by side in one run (the machines are noisy; compare ratios):

* ``plain``: the server spawned directly by the SDK's stdio client, no isolation;
* ``sandboxed``: the mcp backend in strict mode (``runtime.mcp.launch``: the full sandbox).

``--also-root DIR`` adds the same ``sandboxed`` measurement of another checkout of the
runtime (e.g. ``git archive main | tar -x -C /tmp/rt-main``), rounds interleaved, to compare
a change with its base.

Run: ``python benchmarks/bench_mcp_start.py [ROUNDS] [--also-root DIR]``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
SERVER_PYTHON = str(_SYSTEM_PYTHON) if _SYSTEM_PYTHON.exists() else sys.executable
CALLS = 100

# One round in a fresh interpreter, so that the runtime of ROOT is the one imported.
_ROUND = """
import json, sys, time
root, mode, python, server, site, calls = sys.argv[1:7]
sys.path.insert(0, root)
import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def plain():
    t0 = time.perf_counter()
    params = StdioServerParameters(command=python, args=[server], env={"PYTHONPATH": site})
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.list_tools()
        t1 = time.perf_counter()
        for _ in range(5):  # warm-up: the server's lazy imports and caches
            await s.call_tool("add", {"a": 1, "b": 2})
        t1b = time.perf_counter()
        for _ in range(int(calls)):
            await s.call_tool("add", {"a": 1, "b": 2})
        t2 = time.perf_counter()
    return t1 - t0, (t2 - t1b) / int(calls), time.perf_counter() - t2


async def sandboxed():
    from runtime.backends.base import ExecRequest
    from runtime.backends.mcp_proxy import McpProxyBackend
    from runtime.mcp.external import ExternalServer
    from runtime.models import Decision, Limits

    ext = ExternalServer.model_validate(
        {"name": "ext", "command": [python, server], "env": {"PYTHONPATH": site}}
    )
    t0 = time.perf_counter()
    proxy = McpProxyBackend([ext], mode="strict")
    await proxy.__aenter__()
    t1 = time.perf_counter()
    spec = next(s for s in proxy.specs if s.name == "ext__add")
    request = ExecRequest(
        call_id="c", spec=spec, arguments={"a": 1, "b": 2}, workspace=Path("/"),
        limits=Limits(), decision=Decision(action="allow", rule="t"),
    )
    for _ in range(5):  # warm-up: the server's lazy imports and caches
        await proxy.run(request)
    t1b = time.perf_counter()
    for _ in range(int(calls)):
        await proxy.run(request)
    t2 = time.perf_counter()
    await proxy.__aexit__(None, None, None)
    print(json.dumps(proxy.fingerprint().as_dict()), file=sys.stderr)
    return t1 - t0, (t2 - t1b) / int(calls), time.perf_counter() - t2


from pathlib import Path
result = anyio.run(plain if mode == "plain" else sandboxed)
print(json.dumps(result))
"""


def one(root: str, mode: str) -> tuple[float, float, float]:
    site = next(p for p in sys.path if p.endswith("site-packages"))
    server = str(REPO / "tests" / "mcp" / "ext_server.py")
    done = subprocess.run(
        [sys.executable, "-c", _ROUND, root, mode, SERVER_PYTHON, server, site, str(CALLS)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    start, call, close = json.loads(done.stdout.strip().splitlines()[-1])
    return float(start), float(call), float(close)


def main(rounds: int, also: str | None) -> None:
    variants: list[tuple[str, str, str]] = [
        ("plain", str(REPO), "plain"),
        ("sandboxed", str(REPO), "sandboxed"),
    ]
    if also:
        variants.append((f"sandboxed@{Path(also).name}", also, "sandboxed"))
    samples: dict[str, list[tuple[float, float, float]]] = {v[0]: [] for v in variants}
    for _ in range(rounds):
        for name, root, mode in variants:  # interleaved: load drifts hit every variant
            samples[name].append(one(root, mode))
    base = statistics.median(s[0] for s in samples["plain"])
    for name, values in samples.items():
        start = statistics.median(v[0] for v in values)
        call = statistics.median(v[1] for v in values)
        close = statistics.median(v[2] for v in values)
        print(
            f"{name:<22} start {start * 1e3:7.0f} ms (x{start / base:.2f} of plain)  "
            f"call {call * 1e6:6.0f} us  close {close * 1e3:6.0f} ms"
        )


if __name__ == "__main__":
    args: list[Any] = sys.argv[1:]
    also = None
    if "--also-root" in args:
        i = args.index("--also-root")
        also = args[i + 1]
        del args[i : i + 2]
    main(int(args[0]) if args else 5, also)
