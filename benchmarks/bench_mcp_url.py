"""MCP servers reached by URL (``[[mcp_servers]] url``), measured side by side in one run
against one Streamable HTTP server on 127.0.0.1 (``tests/mcp/url_server.py``, the SDK's
MCPServer under uvicorn; compare ratios, the machines are noisy):

* ``sdk``: the SDK's own ``streamable_http_client`` + ``ClientSession.call_tool`` — no
  policy, no validation, no audit, one pooled keep-alive connection;
* ``url``: ``broker.call`` of the same tool as ``u__add`` through the mcp backend — policy,
  validation, audit, and the egress gateway (rules, one resolution pinned, a fresh
  connection per request: the gateway never pools, see ``runtime/egress/_transport.py``);
* ``sse``: the same call over the legacy HTTP+SSE transport (``transport = "sse"``,
  ``url_server.py --sse``): one POST per call whose answer comes back on the session's
  GET stream;
* ``stdio``: ``broker.call`` of ``ext__add`` on a started stdio server (isolated when the
  host allows), for scale.

Run: ``python benchmarks/bench_mcp_url.py [N]``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime.backends.mcp_proxy import McpProxyBackend  # noqa: E402
from runtime.broker import Broker  # noqa: E402
from runtime.catalogue import Catalogue  # noqa: E402
from runtime.mcp.external import ExternalServer  # noqa: E402
from runtime.policy import Policy  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mcp import SANDBOX_PYTHON, listening_url, summary, timed  # noqa: E402

ARGS = {"a": 1, "b": 2}


async def _with_broker(
    servers: list[ExternalServer], tmp: Path, db: str, tool: str, n: int
) -> list[float]:
    policy = Policy.from_toml('version = 1\ndefault = "allow"\n')
    async with McpProxyBackend(servers, mode="best_effort", network=policy.network) as proxy:
        assert not proxy.errors, proxy.errors
        catalogue = Catalogue(builtins=False)
        proxy.register(catalogue)
        async with Broker(
            tmp / "ws", policy, tmp / db, catalogue=catalogue, backends={"mcp": proxy}
        ) as broker:
            call = {"tool": tool, "arguments": ARGS}
            result = await broker.call(call)
            assert result.success, result.error
            return await timed(n, lambda: broker.call(call))


async def main(n: int) -> None:
    # A blocking spawn is fine here: nothing else runs on the loop during set-up.
    proc = subprocess.Popen(  # noqa: ASYNC220
        [sys.executable, str(REPO / "tests" / "mcp" / "url_server.py")],
        stderr=subprocess.PIPE,
        text=True,
    )
    sse_proc = None
    sse_url = None
    if _has_transport_field():
        sse_proc = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, str(REPO / "tests" / "mcp" / "url_server.py"), "--sse"],
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        assert proc.stderr is not None
        url = listening_url(proc.stderr)
        if sse_proc is not None:
            assert sse_proc.stderr is not None
            sse_url = listening_url(sse_proc.stderr)
        async with streamable_http_client(url) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            sdk = await timed(n, lambda: s.call_tool("add", ARGS))
        base = summary("sdk", sdk, None)
        with tempfile.TemporaryDirectory() as tmp:
            remote = ExternalServer.model_validate({"name": "u", "url": url})
            summary(
                "url", await _with_broker([remote], Path(tmp), "u.db", "u__add", n), base, "sdk"
            )
            if sse_url is not None:
                legacy = ExternalServer.model_validate(
                    {"name": "u", "url": sse_url, "transport": "sse"}
                )
                summary(
                    "sse",
                    await _with_broker([legacy], Path(tmp), "l.db", "u__add", n),
                    base,
                    "sdk",
                )
            site = next(p for p in sys.path if p.endswith("site-packages"))
            ext = ExternalServer(
                name="ext",
                command=[SANDBOX_PYTHON, str(REPO / "tests" / "mcp" / "ext_server.py")],
                env={"PYTHONPATH": site},
            )
            summary(
                "stdio", await _with_broker([ext], Path(tmp), "s.db", "ext__add", n), base, "sdk"
            )
    finally:
        for each in (proc, sse_proc):
            if each is None:
                continue
            each.terminate()
            each.wait()
            if each.stderr is not None:
                each.stderr.close()


def _has_transport_field() -> bool:
    # The same file runs against an older tree (side by side with main), which has no sse.
    return "transport" in ExternalServer.model_fields


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 300)
