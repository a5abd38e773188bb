"""System tools: the clock, bounded sleep, and the session's environment variables.

``get_env``/``set_env`` run in the broker (host backend) on ``ctx.options["session_env"]``,
a dict the broker keeps per session and passes to later ``shell_exec`` calls. They never
read or change the broker's own ``os.environ``.
"""

from __future__ import annotations

import datetime as _dt
import time
import zoneinfo
from typing import Any

from runtime.errors import InvalidArguments, ToolFailed
from runtime.toolkit import ToolContext
from runtime.toolkit_env import check_env_key, check_env_size, check_env_value

__all__ = ["current_time", "get_env", "set_env", "sleep"]


def current_time(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    name: str = args.get("timezone") or "UTC"
    tz: _dt.tzinfo
    try:
        # UTC needs no zone data: the sandbox may not mount /usr/share/zoneinfo (the
        # ``tzdata`` wheel is the fallback zoneinfo uses for the other names).
        tz = _dt.UTC if name == "UTC" else zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolFailed(
            f"unknown time zone {name!r}; use an IANA name such as 'UTC', 'Europe/Paris' or "
            "'Asia/Shanghai'",
            reason="unknown_timezone",
            timezone=name,
        ) from exc
    now = _dt.datetime.now(tz)
    offset = now.utcoffset() or _dt.timedelta(0)
    return {
        "timestamp": now.timestamp(),
        "iso": now.isoformat(),
        "timezone": name,
        "utc_offset_s": int(offset.total_seconds()),
    }


def sleep(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    seconds = float(args["seconds"])
    limit = ctx.limits.timeout_s
    if seconds > limit:
        # An argument out of its range (the policy's limit narrows the schema's maximum):
        # invalid_arguments, as the schema's own bound is.
        raise InvalidArguments(
            f"cannot sleep {seconds:g} s: this session's time limit per call is {limit:g} s",
            reason="over_limit",
            field="seconds",
            limit_s=limit,
        )
    start = time.monotonic()
    time.sleep(seconds)
    return {"slept": round(time.monotonic() - start, 6)}


def _session_env(ctx: ToolContext) -> dict[str, str]:
    env = ctx.options.get("session_env")
    if not isinstance(env, dict):
        raise ToolFailed(
            "this session has no environment store (get_env/set_env need the broker)",
            reason="no_session_env",
        )
    return env


def get_env(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    key: str = args["key"]
    env = _session_env(ctx)
    if key in env:
        return {"key": key, "value": env[key], "exists": True}
    # Variables the policy exposes to tools (ctx.env) are visible but live below the session.
    if key in ctx.env:
        return {"key": key, "value": ctx.env[key], "exists": True}
    return {"key": key, "value": None, "exists": False}


def set_env(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    key = check_env_key(args["key"])
    value: str | None = args.get("value")
    env = _session_env(ctx)
    previous = env.get(key, ctx.env.get(key))
    if value is None:
        env.pop(key, None)
    else:
        check_env_value(key, value, path="$.value")
        # Checked before it is stored: a refused value leaves the session as it was.
        check_env_size({**env, key: value})
        env[key] = value
    return {"key": key, "previous": previous, "value": value}
