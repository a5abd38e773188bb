"""TEST-ONLY minimal file tools (the real catalogue lives in tools/): read, write, list."""

from __future__ import annotations

from typing import Any

from runtime.errors import ToolFailed


def read_file(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    path = ctx.workspace / args["path"]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolFailed(f"cannot read {args['path']!r}: {exc.strerror}") from exc
    return {"content": data.decode("utf-8", "replace"), "size": len(data)}


def write_file(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    path = ctx.workspace / args["path"]
    try:
        path.write_text(args["content"], encoding="utf-8")
    except OSError as exc:
        raise ToolFailed(f"cannot write {args['path']!r}: {exc.strerror}") from exc
    return {"written": len(args["content"].encode())}


def list_files(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    path = ctx.workspace / args.get("path", ".")
    try:
        return {"entries": sorted(p.name for p in path.iterdir())}
    except OSError as exc:
        raise ToolFailed(f"cannot list {args.get('path', '.')!r}: {exc.strerror}") from exc
