"""shell_exec: run one ``/bin/sh -c`` command in the workspace, bounded in time and output.

The command policy (what may run at all) is the broker's; inside the sandbox the kernel is
the wall. Here: the environment is only what the policy and the session gave (never the
broker's own); running, time and output bounds are ``runtime.toolkit_proc.run_capped``.
"""

from __future__ import annotations

import re
from typing import Any

from runtime.errors import InvalidArguments, ToolFailed
from runtime.toolkit import ToolContext
from runtime.toolkit_env import DEFAULT_PATH, check_env_key, check_env_value
from runtime.toolkit_fs import Workspace
from runtime.toolkit_proc import kill_grace, run_capped, within_call

__all__ = ["shell_exec"]


def _environment(args: dict[str, Any], ctx: ToolContext) -> dict[str, str]:
    env = dict(ctx.env)
    session = ctx.options.get("session_env")
    if isinstance(session, dict):
        env.update({str(k): str(v) for k, v in session.items()})
    for key, value in (args.get("env") or {}).items():
        env[check_env_key(key)] = check_env_value(key, str(value), path=f"$.env.{key}")
    env.setdefault("PATH", DEFAULT_PATH)
    return env


def _cwd(args: dict[str, Any], ctx: ToolContext) -> str:
    """Check the cwd beneath the workspace, then hand subprocess its path. The check is
    the clear error; a swap between check and chdir still lands inside the sandbox's
    mounts, which are the wall."""
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args.get("cwd") or ".")
        ws.open_dir(parts).close()
        return str(ws.root.joinpath(*parts))


def _check_blocking(command: str, ctx: ToolContext) -> None:
    """Refuse long-running services (seed 003's list) when the policy hands the tool a
    ``blocked_services`` list; the policy engine decides, this gives the clear reason. A
    pattern matches as whole words, so 'vite' does not match 'invite'."""
    patterns = ctx.options.get("blocked_services") or ()
    for pattern in patterns:
        if re.search(rf"(?<![\w.-]){re.escape(str(pattern))}(?![\w-])", command):
            raise ToolFailed(
                f"{pattern!r} starts a long-running service that would block this call; run "
                "a one-shot command instead (build, test), or ask for a policy that allows it",
                reason="blocking_service",
                pattern=str(pattern),
            )


def shell_exec(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    command: str = args["command"]
    if "\0" in command:
        raise ToolFailed("the command contains a NUL byte", reason="bad_command")
    _check_blocking(command, ctx)
    limit = ctx.limits.timeout_s
    timeout = float(args.get("timeout_s", limit))
    if timeout > limit:
        # An argument out of its range (the policy's limit narrows the schema's maximum):
        # invalid_arguments, as the schema's own bound is.
        raise InvalidArguments(
            f"timeout_s={timeout:g} exceeds this session's limit of {limit:g} s",
            reason="timeout_over_limit",
            field="timeout_s",
            limit_s=limit,
        )
    preexec = ctx.options.get("preexec")
    own = within_call(timeout, limit)
    return run_capped(
        ["/bin/sh", "-c", command],
        cwd=_cwd(args, ctx),
        env=_environment(args, ctx),
        timeout=own,
        grace=kill_grace(own, limit),
        cap=ctx.limits.output_bytes,
        preexec=preexec if callable(preexec) else None,
        shell_status=True,  # /bin/sh: 128 + N is its report of a child killed by N
    ).as_result()
