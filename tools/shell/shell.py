"""shell_exec: run one ``/bin/sh -c`` command in the workspace, bounded in time and output.

The command policy (what may run at all) is the broker's; inside the sandbox the kernel is
the wall. Here: the environment is only what the policy and the session gave (never the
broker's own), the process tree is one process group that a timeout kills whole (SIGTERM,
grace, SIGKILL), both pipes are read concurrently so neither can fill and deadlock the
child, and output past the cap is drained and dropped rather than buffered.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal
import subprocess
import time
from typing import Any

from runtime.errors import ToolFailed, ToolTimeout
from runtime.toolkit import ToolContext
from runtime.toolkit_env import DEFAULT_PATH, check_env_key, check_env_value
from runtime.toolkit_fs import Workspace

__all__ = ["shell_exec"]

_GRACE_S = 2.0  # SIGTERM → SIGKILL
_DRAIN_AFTER_EXIT_S = 1.0  # background children that keep the pipes open after sh exits


def _environment(args: dict[str, Any], ctx: ToolContext) -> dict[str, str]:
    env = dict(ctx.env)
    session = ctx.options.get("session_env")
    if isinstance(session, dict):
        env.update({str(k): str(v) for k, v in session.items()})
    for key, value in (args.get("env") or {}).items():
        env[check_env_key(key)] = check_env_value(key, str(value))
    env.setdefault("PATH", DEFAULT_PATH)
    return env


def _cwd(args: dict[str, Any], ctx: ToolContext) -> str:
    """Check the cwd beneath the workspace, then hand subprocess its path. The check is
    the clear error; a swap between check and chdir still lands inside the sandbox's
    mounts, which are the wall."""
    with Workspace(ctx.workspace) as ws:
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


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def shell_exec(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    command: str = args["command"]
    if "\0" in command:
        raise ToolFailed("the command contains a NUL byte", reason="bad_command")
    _check_blocking(command, ctx)
    limit = ctx.limits.timeout_s
    timeout = float(args.get("timeout_s", limit))
    if timeout > limit:
        raise ToolFailed(
            f"timeout_s={timeout:g} exceeds this session's limit of {limit:g} s",
            reason="timeout_over_limit",
            limit_s=limit,
        )
    cap = ctx.limits.output_bytes
    preexec = ctx.options.get("preexec")
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=_cwd(args, ctx),
            env=_environment(args, ctx),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own group: a timeout kills the whole tree
            close_fds=True,
            preexec_fn=preexec if callable(preexec) else None,  # noqa: PLW1509
        )
    except OSError as exc:
        raise ToolFailed(f"could not start /bin/sh: {exc.strerror}", reason="spawn") from exc
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    bufs = {out_fd: bytearray(), err_fd: bytearray()}
    truncated = False
    timed_out = False
    deadline = time.monotonic() + timeout
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel, proc.stdout, proc.stderr:
        for f in (proc.stdout, proc.stderr):
            os.set_blocking(f.fileno(), False)
            sel.register(f.fileno(), selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
                _killpg(proc.pid, signal.SIGKILL)  # leftovers of a finished command
            end = deadline if exited_at is None else min(deadline, exited_at + _DRAIN_AFTER_EXIT_S)
            if now >= end:
                timed_out = exited_at is None
                break
            for key, _ in sel.select(min(end - now, 0.25)):
                fd = int(key.fd)
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(fd)
                    continue
                buf = bufs[fd]
                room = cap - len(buf)
                if len(data) > room:
                    truncated = True
                buf += data[: max(room, 0)]
        if timed_out:
            _killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(_GRACE_S)
            _killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    stdout = bufs[out_fd].decode("utf-8", "replace")
    stderr = bufs[err_fd].decode("utf-8", "replace")
    if timed_out:
        raise ToolTimeout(
            f"the command did not finish within {timeout:g} s and was killed",
            stdout=stdout,
            stderr=stderr,
            timeout_s=timeout,
        )
    result: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "exit_code": code if code >= 0 else 128 - code,
        "truncated": truncated,
    }
    if code < 0:
        result["signal"] = signal.Signals(-code).name
    return result
