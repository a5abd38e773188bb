"""How a sandboxed call ended, as the broker reports it: the exit report, the child's last
frame and any frame error become a result or a typed :mod:`runtime.errors` exception.

The child is hostile: its frames are data, bounded here (messages, details), and the error
types it may claim are limited to ``CHILD_ERROR_TYPES``. The zygote's exit report is trusted.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

from runtime.backends.sandbox.child import (
    EXIT_MEMORY,
    EXIT_PROTOCOL,
    EXIT_SETUP,
    stream_detail,
)
from runtime.errors import (
    CHILD_ERROR_TYPES,
    DeniedPathWritten,
    ErrorType,
    InvalidArguments,
    OutputTooLarge,
    ResourceLimitExceeded,
    SandboxError,
    ToolFailed,
)
from runtime.frames import FrameError, FrameTooLarge
from runtime.models import Limits
from runtime.toolkit import PREVIEW_CHARS, too_large_message

__all__ = [
    "denied_write",
    "details",
    "outcome",
    "raise_tool_error",
    "setup_error",
    "usage",
    "workspace_problem",
]


def usage(report: dict[str, Any] | None, started: float) -> dict[str, Any]:
    """The call's usage: its wall time since ``started`` (monotonic) and what the zygote
    measured of its processes."""
    out: dict[str, Any] = {"wall_ms": (time.monotonic() - started) * 1000.0}
    if report:
        for key in ("cpu_ms", "max_rss_kb", "peak_memory_bytes"):
            if report.get(key) is not None:
                out[key] = report[key]
        # A fork refused by the pids limit shows only as the program's own message
        # ("Cannot fork"): the cgroup's count says so in the result and the audit record.
        hits = report.get("pids_max_hits")
        if isinstance(hits, int) and hits > 0:
            out["pids_limit_hits"] = hits
        # What the deny_write check moved aside: in the audit record's usage too.
        if report.get("quarantined"):
            out["quarantined"] = [f"{old} -> {new}" for old, new in report["quarantined"]]
    return out


def denied_write(
    report: dict[str, Any] | None, usage: dict[str, Any], terminal: dict[str, Any] | None = None
) -> DeniedPathWritten | None:
    """The call's error when the fork-server's deny_write check (``_denywrite``, run once
    the call's processes were gone) moved entries aside or could not finish; None when it
    found nothing. It outranks every other outcome, a timeout's included: what the call
    returned describes a tree that is no longer there. What a command printed (``terminal``,
    its last frame: ``stdout``, ``stderr``) is kept in the details, bounded: ``cargo new x``
    makes ``x/.git`` along with everything else, and its log should not be lost."""
    if not report:
        return None
    moved = report.get("quarantined") or []
    unchecked = report.get("deny_write_unchecked")
    if not moved and unchecked is None:
        return None
    count = int(report.get("quarantined_count", len(moved)))
    parts: list[str] = []
    if moved:
        shown = ", ".join(f"{old!r} (now {new!r})" for old, new in moved[:8])
        more = f" and {count - 8} more" if count > 8 else ""
        parts.append(
            f"the call created {shown}{more} on a path the policy denies writing "
            "(paths.deny_write); moved aside when the call ended, for you to inspect or delete"
        )
    if unchecked is not None:
        parts.append(
            "the check for paths the call created where the policy denies writing "
            f"(paths.deny_write) could not finish: {unchecked}; inspect the workspace "
            "(a .git it made would run its hooks in your git)"
        )
    extra: dict[str, Any] = {"rule": "paths.deny_write"}
    if moved:
        extra["quarantined"] = "; ".join(f"{old} -> {new}" for old, new in moved)
        extra["quarantined_count"] = count
    if unchecked is not None:
        extra["unchecked"] = str(unchecked)
    return DeniedPathWritten("; ".join(parts), usage=usage, **extra, **_partial_output(terminal))


def outcome(
    terminal: dict[str, Any] | None,
    frame_error: FrameError | None,
    report: dict[str, Any],
    limits: Limits,
    usage: dict[str, Any],
    *,
    requests: int = 0,
    tool: str = "",
) -> Any:
    """The call's result, or its typed error. ``requests``: how many broker requests the
    child made before its last frame (after one, its set-up was over: the tool ran).
    ``tool``: its name, for the messages that the broker's own checks word with it."""
    if report.get("type") == "spawn_failed":
        raise SandboxError(
            f"the sandbox could not start the call: {report.get('message')}", usage=usage
        )
    code, sig = report.get("code"), report.get("signal")
    # Pid 1 reports a killed tool as 128 + signal number.
    if sig is None and isinstance(code, int) and code > 128:
        sig = code - 128
    if terminal is not None and terminal.get("type") == "setup_error":
        raise setup_error(terminal, code, requests, usage)
    if report.get("oom_kills"):
        raise ResourceLimitExceeded(
            f"the call exceeded its {limits.memory_mb} MiB memory limit",
            usage=usage,
            limit="memory_mb",
            **_partial_output(terminal),
        )
    filled = report.get("disk_filled_bytes")
    if isinstance(filled, int) and filled > 0:
        raise ResourceLimitExceeded(
            f"the workspace's file system filled by {filled / 1048576:.0f} MiB during the "
            f"call, past its {limits.disk_mb} MiB limit (counted for the whole file system: "
            "what other calls wrote meanwhile counts too); what it wrote is left in place",
            usage=usage,
            limit="disk_mb",
            filled_bytes=filled,
            **_partial_output(terminal),
        )
    if isinstance(frame_error, FrameTooLarge):
        raise OutputTooLarge(
            f"the result exceeded {limits.output_bytes} bytes",
            usage=usage,
            size=frame_error.size,
            preview=None,
        )
    if terminal is not None and terminal.get("type") == "result":
        return terminal.get("value")
    if terminal is not None and terminal.get("type") == "error":
        raise_tool_error(terminal, limits, usage, tool=tool)
    # SIGXCPU comes only from RLIMIT_CPU's soft limit; SIGKILL from its hard limit (or an
    # OOM kill, checked above). rusage is tick-sampled and may read below the limit the
    # kernel enforced on exact runtime, hence the loose bound for SIGKILL.
    if sig == signal.SIGXCPU or (
        sig == signal.SIGKILL and usage.get("cpu_ms", 0) >= limits.cpu_s * 1000 * 0.5
    ):
        raise ResourceLimitExceeded(
            f"the call exceeded its {limits.cpu_s} s CPU limit",
            usage=usage,
            limit="cpu_s",
            signal=sig,
        )
    if sig == signal.SIGXFSZ:
        raise ResourceLimitExceeded(
            f"the call exceeded its {limits.fsize_mb} MiB file size limit",
            usage=usage,
            limit="fsize_mb",
            signal=sig,
        )
    if frame_error is not None:
        raise SandboxError(f"the sandboxed tool sent an invalid frame: {frame_error}", usage=usage)
    if sig is not None:
        raise SandboxError(
            f"the sandboxed tool was killed by signal {sig}", usage=usage, signal=sig
        )
    if code == EXIT_MEMORY:
        # Its tool process ran out of memory outside the tool function and could not send
        # the frame that says so (``child._out_of_memory``). A tool exiting with this
        # status claims what that frame claims, no more.
        raise ResourceLimitExceeded(
            f"the call exceeded its {limits.memory_mb} MiB memory limit",
            usage=usage,
            limit="memory_mb",
        )
    if code == EXIT_SETUP:
        raise SandboxError("sandbox set-up failed", usage=usage, exit_code=code)
    if code == EXIT_PROTOCOL:
        raise SandboxError(
            "the sandboxed tool lost its channel to the broker", usage=usage, exit_code=code
        )
    raise SandboxError(
        f"the sandboxed tool exited with status {code} without a result",
        usage=usage,
        exit_code=code,
    )


#: Bounds on a set-up error frame's fields (``child._fail`` sends a phase name, the
#: OSError's text and its errno; anything else in them is not of its making).
_MAX_PHASE_CHARS = 64
_MAX_MESSAGE_CHARS = 2000


def setup_error(
    terminal: dict[str, Any], code: Any, requests: int, usage: dict[str, Any]
) -> SandboxError:
    """The error of a call whose last frame was a ``setup_error``.

    The set-up sends one (``child._fail``) before the child reads its call frame, and
    exits with :data:`EXIT_SETUP` right after. The tool, once it runs, holds the same
    socket and can send the same frame: one that comes after a broker request (the tool
    was running), or from a child that then exited otherwise, is the tool breaking the
    protocol, not a set-up failure, and none of its text is shown. The rest is taken as
    a set-up failure (a tool can still forge one that exits with the set-up's status),
    its fields bounded and typed: the phase a short string, the message 2000
    characters, the errno an int or nothing."""
    if requests or code != EXIT_SETUP:
        why = (
            f"after {requests} broker request{'s' if requests != 1 else ''}"
            if requests
            else f"and exited with status {code}, not the set-up's {EXIT_SETUP}"
            if isinstance(code, int)
            else "and did not exit as the set-up does"
        )
        return SandboxError(
            "the sandboxed tool broke the frame protocol: it sent a set-up error frame "
            f"{why}, when its set-up was over",
            usage=usage,
            reason="protocol",
            exit_code=code if isinstance(code, int) else None,
        )
    phase, message, errno = terminal.get("phase"), terminal.get("message"), terminal.get("errno")
    phase = phase[:_MAX_PHASE_CHARS] if isinstance(phase, str) and phase else "unknown"
    message = message[:_MAX_MESSAGE_CHARS] if isinstance(message, str) else ""
    extra: dict[str, Any] = {"phase": phase}
    if isinstance(errno, int) and not isinstance(errno, bool):
        extra["errno"] = errno
    shown = f"sandbox set-up failed at {phase}"
    return SandboxError(f"{shown}: {message}" if message else shown, usage=usage, **extra)


def _partial_output(terminal: dict[str, Any] | None) -> dict[str, Any]:
    """What a command printed before a process of its call was killed for memory (the
    shell and the tool live on and send their result or error): its ``stdout`` and
    ``stderr``, bounded like any detail of the hostile child. Without them a build killed
    by the limit came back with not a line of its log."""
    if terminal is None:
        return {}
    if terminal.get("type") == "result":
        raw = terminal.get("value")
    elif terminal.get("type") == "error":
        raw = terminal.get("details")
    else:
        return {}
    if not isinstance(raw, dict):
        return {}
    return details({k: raw[k] for k in ("stdout", "stderr") if isinstance(raw.get(k), str)})


def raise_tool_error(
    frame: dict[str, Any], limits: Limits, usage: dict[str, Any], *, tool: str = ""
) -> None:
    kind, message = frame.get("kind"), str(frame.get("message", ""))[:2000]
    if kind == "typed":
        # The child is hostile: its details are data for the result, kept flat and
        # bounded, and never a keyword of ours ("usage").
        bounded = details(frame.get("details"))
        if frame.get("error_type") == ErrorType.INVALID_ARGUMENTS:
            # The tool's own check of its arguments, one a schema cannot say ("url or
            # urls"): DESIGN §7 types it invalid_arguments (exit 65). A child may claim it:
            # it speaks of the caller's arguments only, never of the policy or the sandbox.
            raise InvalidArguments(message, **bounded)
        try:
            cls = CHILD_ERROR_TYPES[ErrorType(str(frame.get("error_type")))]
        except ValueError:
            cls = ToolFailed
        except KeyError:  # a type a child may not claim (policy_denied, …)
            cls = ToolFailed
        raise cls(message, usage=usage, **bounded)
    if kind == "memory":
        raise ResourceLimitExceeded(
            f"the call exceeded its {limits.memory_mb} MiB memory limit",
            usage=usage,
            limit="memory_mb",
        )
    if kind == "output_too_large":
        # Sized by the child as the broker sizes a result (its canonical JSON), and worded
        # as the broker's own check (``Broker._check_result``).
        size = frame.get("size")
        raise OutputTooLarge(
            too_large_message(tool, size if isinstance(size, int) else "?", limits.output_bytes),
            usage=usage,
            limit=limits.output_bytes,
            size=size if isinstance(size, int) else None,
            preview=str(frame.get("preview", ""))[:PREVIEW_CHARS],
        )
    if kind == "exception":
        raise ToolFailed(
            f"{frame.get('exc_type', 'Exception')}: {message}",
            usage=usage,
            exception=str(frame.get("exc_type", "")),
        )
    raise ToolFailed(message or f"tool error ({kind})", usage=usage)


#: Bounds on the details a tool attaches to its failure (the child is hostile: they are
#: data for the result, never trusted, and must not swell it).
_MAX_DETAILS = 16
_MAX_DETAIL_CHARS = 1024
_STREAMS = ("stdout", "stderr")  # a killed command's output: head and tail (stream_detail)


def details(raw: Any) -> dict[str, Any]:
    """A tool's failure details (``reason``, ``path``…) kept if small, flat and JSON-safe."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in list(raw.items())[:_MAX_DETAILS]:
        if not isinstance(key, str) or len(key) > 64 or key == "usage":
            continue
        if isinstance(value, str) and key in _STREAMS:
            out[key] = stream_detail(value)
        elif isinstance(value, str):
            out[key] = value[:_MAX_DETAIL_CHARS]
        elif value is None or isinstance(value, (bool, int, float)):
            out[key] = value
    return out


def workspace_problem(path: Path | str | None) -> str | None:
    """Why ``path``, a call's workspace, cannot be mounted, in words; None when it looks
    fine (or cannot be looked at). For a call that failed: its set-up's own error names
    internals ("open_tree: No such file or directory", "move_mount /tmp/workspace: Is a
    directory")."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return (
            f"the workspace {path} does not exist (removed or renamed since the broker "
            "opened it); create it again, or open the broker on another workspace"
        )
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return f"the workspace {path} is not a directory (something replaced it)"
    return None
