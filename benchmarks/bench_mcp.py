"""MCP overheads, measured side by side in one run (the machines are noisy; compare ratios):

* ``direct``: ``broker.call`` of the wasm ``json_parse`` (1 KiB) in-process;
* ``mcp-stdio``: the same call as ``tools/call`` to ``runtime serve --mcp`` over stdio;
* ``mcp-http``: the same over streamable HTTP on 127.0.0.1;
* ``external``: ``broker.call`` of a tool on an external MCP server (the mcp backend,
  isolated when the host allows) — policy, validation and audit included.

Run: ``python benchmarks/bench_mcp.py [N]``.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime.backends.mcp_proxy import McpProxyBackend  # noqa: E402
from runtime.broker import Broker  # noqa: E402
from runtime.catalogue import Catalogue  # noqa: E402
from runtime.mcp.external import ExternalServer  # noqa: E402

TEXT = json.dumps({"items": [{"id": i, "name": f"item-{i}"} for i in range(40)]})[:1024]
CALL = {"tool": "json_parse", "arguments": {"text": TEXT}}
# The isolated server runs as nobody: the system python (same version) can be executed from
# anywhere, a venv under a private home directory may not.
_SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
SANDBOX_PYTHON = str(_SYSTEM_PYTHON) if _SYSTEM_PYTHON.exists() else sys.executable


def listening_url(stderr: Any) -> str:
    """The URL a server started with ``--http`` prints on stderr ("listening on URL")."""
    for line in stderr:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return m.group(1)
    return ""


async def timed(n: int, fn: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(min(20, n)):  # warm-up: module caches, zygotes, compiled guests
        await fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def summary(
    name: str, samples: list[float], base: float | None, base_name: str = "direct"
) -> float:
    med = statistics.median(samples)
    ratio = f"  x{med / base:.2f} of {base_name}" if base else ""
    p90 = sorted(samples)[int(len(samples) * 0.9)]
    print(f"{name:<10} median {med:9.0f} us  p90 {p90:9.0f} us{ratio}")
    return med


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        async with Broker(ws, audit=Path(tmp) / "a.db") as broker:
            direct = await timed(n, lambda: broker.call(CALL))
        base = summary("direct", direct, None)

        argv = [
            sys.executable,
            "-m",
            "runtime",
            "serve",
            "--mcp",
            "--workspace",
            str(ws),
            "--audit",
            str(Path(tmp) / "b.db"),
        ]
        params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            stdio = await timed(n, lambda: s.call_tool("json_parse", CALL["arguments"]))
        summary("mcp-stdio", stdio, base)

        # A blocking spawn is fine here: nothing else runs on the loop during set-up.
        proc = subprocess.Popen(  # noqa: ASYNC220
            [*argv, "--http", "127.0.0.1:0"], cwd=REPO, stderr=subprocess.PIPE, text=True
        )
        try:
            assert proc.stderr is not None
            url = listening_url(proc.stderr)
            async with streamable_http_client(url) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                http = await timed(n, lambda: s.call_tool("json_parse", CALL["arguments"]))
            summary("mcp-http", http, base)
        finally:
            proc.terminate()
            proc.wait()
            proc.stderr.close() if proc.stderr else None

        site = next(p for p in sys.path if p.endswith("site-packages"))
        ext = ExternalServer(
            name="ext",
            command=[
                SANDBOX_PYTHON,
                str(REPO / "tests" / "mcp" / "ext_server.py"),
            ],
            env={"PYTHONPATH": site},
        )
        async with McpProxyBackend([ext], mode="best_effort") as proxy:
            catalogue = Catalogue(builtins=False)
            proxy.register(catalogue)
            from runtime.policy import Policy

            policy = Policy.from_toml('version = 1\ndefault = "allow"\n')
            async with Broker(
                ws, policy, Path(tmp) / "c.db", catalogue=catalogue, backends={"mcp": proxy}
            ) as b:
                call = {"tool": "ext__add", "arguments": {"a": 1, "b": 2}}
                external = await timed(n, lambda: b.call(call))
            print(f"(external server isolation: {', '.join(proxy.fingerprint().mechanisms)})")
        summary("external", external, base)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 300)
