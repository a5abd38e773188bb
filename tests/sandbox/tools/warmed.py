"""TEST-ONLY tool with a warm-up (``runtime.toolkit.warm_with``): it reports which warm-up
runs this process made before its call, and what its /tmp holds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runtime.toolkit import warm_with

#: Workspaces of the warm-up runs in this process (module state: what a call can see).
RUNS: list[dict[str, Any]] = []


def _prepare(scratch: Path) -> dict[str, Any]:
    (scratch / "sample").write_text("warm", encoding="utf-8")
    return {"action": "warm"}


@warm_with(_prepare)
def run(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    if args.get("action") == "warm":
        RUNS.append(
            {
                "workspace": str(ctx.workspace),
                "sample": (ctx.workspace / "sample").read_text(encoding="utf-8"),
                "writable": ctx.writable,
            }
        )
        if args.get("fail"):
            raise RuntimeError("a warm-up that fails")
        return {"ok": True}
    return {"runs": list(RUNS), "tmp": sorted(os.listdir("/tmp"))}


def _prepare_failing(scratch: Path) -> dict[str, Any]:
    _prepare(scratch)
    return {"action": "warm", "fail": True}


@warm_with(_prepare_failing)
def run_failing(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return run(args, ctx)
