"""``runtime.mcp.serve`` with a deterministic catalogue: mock tools on the MockBackend and the
scripted policy of ``standins``. Run as a script (stdio or ``--http HOST:PORT``); the tests
spawn it with ``sys.executable``. Real policy/audit/tools are exercised by test_cli_serve."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import standins

standins.install()

from runtime.backends.base import ExecRequest  # noqa: E402
from runtime.backends.mock import MockBackend  # noqa: E402
from runtime.catalogue import Catalogue  # noqa: E402
from runtime.errors import ToolFailed  # noqa: E402
from runtime.models import ToolSpec  # noqa: E402


def spec(name: str, properties: dict[str, Any], **kw: Any) -> ToolSpec:
    data: dict[str, Any] = {
        "name": name,
        "description": f"Test tool {name}.",
        "category": "data",
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
        "result": {"type": "object"},
        "backend": "mock",
    }
    data.update(kw)
    return ToolSpec.model_validate(data)


TEXT = {"text": {"type": "string", "maxLength": 1000}}


def catalogue() -> Catalogue:
    cat = Catalogue(builtins=False)
    cat.register(
        spec(
            "echo",
            TEXT,
            result={
                "type": "object",
                "properties": {"echo": {"type": "string"}},
                "required": ["echo"],
            },
            hints={"read_only": True, "idempotent": True},
        )
    )
    cat.register(spec("fail", {}))
    cat.register(spec("guarded", TEXT, hints={"destructive": True}))
    cat.register(spec("forbidden", {}))
    cat.register(spec("hidden", {}))
    cat.register(spec("read_text", {"path": {"type": "string"}}, arg_roles={"path": "read_path"}))
    cat.register(spec("gather", {"n": {"type": "integer", "minimum": 1, "maximum": 16}}))
    cat.register(spec("ask", {"question": {"type": "string"}}, sandbox={"ask_user": True}))
    cat.register(spec("noisy", {}))
    cat.register(spec("slow", {"seconds": {"type": "number", "minimum": 0, "maximum": 10}}))
    return cat


class Handler:
    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.arrived = anyio.Event()  # replaced on every arrival; waiters re-check

    async def __call__(self, request: ExecRequest) -> Any:
        name, args = request.spec.name, request.arguments
        if name in ("echo", "guarded"):
            return {"echo": args["text"]}
        if name == "fail":
            raise ToolFailed("it broke on purpose")
        if name == "read_text":
            root = request.workspace.resolve()
            target = (root / args["path"]).resolve()
            if not target.is_relative_to(root):  # the wall in this mock; the policy is first
                raise ToolFailed("outside the workspace")
            try:
                return {"text": target.read_text()}
            except OSError as exc:
                raise ToolFailed(f"cannot read {args['path']}: {exc.strerror}") from exc
        if name == "gather":
            # Concurrency without timing: each call waits until n calls are in flight at
            # once (or gives up after 10 s) and reports the peak it saw.
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.arrived.set()
            self.arrived = anyio.Event()
            try:
                with anyio.move_on_after(10):
                    while self.peak < args["n"]:
                        await self.arrived.wait()
                return {"peak": self.peak}
            finally:
                self.in_flight -= 1
        if name == "ask":
            assert request.broker_requests is not None
            reply = await request.broker_requests(
                "ask_user", {"question": args["question"], "options": ["red", "blue"]}
            )
            return {"answer": reply["answer"]}
        if name == "slow":
            await anyio.sleep(args["seconds"])
            return {"slept": args["seconds"]}
        if name == "noisy":
            # A misbehaving tool writing to stdout, in-process and from a child process.
            print("stray print from a tool")
            await anyio.run_process(["echo", "stray output from a child"], stdout=None)
            return {"noisy": True}
        return {}


def main() -> None:
    from runtime.mcp import serve

    parser = argparse.ArgumentParser()
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--http")
    parser.add_argument("--profile")
    parser.add_argument("--ask-timeout", type=float, default=300.0)
    parser.add_argument("--progress-interval", type=float, default=5.0)
    parser.add_argument("--allow-remote", action="store_true")
    parser.add_argument("--allowed-host", action="append", default=[])
    parser.add_argument("--allowed-origin", action="append", default=[])
    parser.add_argument("--max-connections", type=int)
    parser.add_argument("--action", action="append", default=[], help="TOOL=allow|ask|deny")
    parser.add_argument("--head-timeout", type=float, default=10.0)
    parser.add_argument("--body-timeout", type=float, default=30.0)
    parser.add_argument("--max-concurrent", type=int, help="[limits] max_concurrent")
    parser.add_argument("--max-queued", type=int, help="[limits] max_queued")
    opts = parser.parse_args()
    workspace = Path(opts.workspace)

    def ready(where: str) -> None:
        if where != "stdio":
            sys.stderr.write(f"runtime: MCP server listening on {where}\n")
            sys.stderr.flush()

    limits = None
    if opts.max_connections is not None:
        from runtime.mcp._connections import ConnectionLimits

        limits = ConnectionLimits(
            max_connections=opts.max_connections,
            max_per_peer=opts.max_connections,
            head_timeout_s=opts.head_timeout,
            body_timeout_s=opts.body_timeout,
        )

    policy = standins.ScriptedPolicy(
        {**standins.ACTIONS, **dict(a.split("=", 1) for a in opts.action)}
    )
    if opts.max_concurrent is not None:
        policy.max_concurrent = opts.max_concurrent
    if opts.max_queued is not None:
        policy.max_queued = opts.max_queued

    async def run() -> None:
        await serve(
            http_limits=limits,
            workspace=workspace,
            http=opts.http,
            profile=opts.profile,
            on_ready=ready,
            ask_timeout_s=opts.ask_timeout,
            progress_interval_s=opts.progress_interval,
            allow_remote=opts.allow_remote,
            allowed_hosts=opts.allowed_host,
            allowed_origins=opts.allowed_origin,
            broker_options={
                "policy": policy,
                "catalogue": catalogue(),
                "backends": {"mock": MockBackend(Handler())},
            },
        )

    anyio.run(run)


if __name__ == "__main__":
    main()
