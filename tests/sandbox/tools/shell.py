"""TEST-ONLY exec tool: runs an argv (or a shell string) and returns stdout/stderr/exit_code."""

from __future__ import annotations

import subprocess
from typing import Any


def run(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    argv = args.get("argv") or ["/bin/sh", "-c", args["command"]]
    cap = ctx.limits.output_bytes // 4
    proc = subprocess.run(
        argv,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", **ctx.env},
        cwd=str(ctx.workspace) if ctx.workspace.exists() else "/tmp",
        timeout=ctx.limits.timeout_s,
        check=False,
    )
    out, err = proc.stdout, proc.stderr
    return {
        "stdout": out[:cap].decode("utf-8", "replace"),
        "stderr": err[:cap].decode("utf-8", "replace"),
        "exit_code": proc.returncode,
        "truncated": len(out) > cap or len(err) > cap,
    }
