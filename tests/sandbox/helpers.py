"""Shared helpers of the sandbox tests: TEST-ONLY tool specs and a one-call runner."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from runtime.backends.base import ExecOutcome, ExecRequest
from runtime.backends.sandbox import child
from runtime.errors import OutputTooLarge, ResourceLimitExceeded, SandboxError, ToolFailed
from runtime.frames import encode_frame
from runtime.models import BackendKind, Decision, Limits, SandboxNeeds, ToolSpec, WorkspaceAccess

TOOLS = Path(__file__).resolve().parent / "tools"


def frames_hex(*frames: dict[str, Any]) -> str:
    """``frames`` encoded back to back, as hex for the probe's ``raw_frame`` (one write)."""
    return "".join(encode_frame(frame, max_size=1 << 30).hex() for frame in frames)


def spec(name: str, entry: str, workspace: str = "rw", exec_: bool = False) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"test-only {name}",
        category="custom",
        parameters={"type": "object"},
        backend=BackendKind.SUBPROCESS,
        entry=entry,
        sandbox=SandboxNeeds(workspace=WorkspaceAccess(workspace), exec=exec_),
        source=TOOLS / f"{name}.json",
    )


PROBE_RW = spec("probe", "probe:run", "rw")
PROBE_RO = spec("probe_ro", "probe:run", "ro")
PROBE_NONE = spec("probe_none", "probe:run", "none")
#: The probe as a tool that may run programs: its call keeps the reaper (pid1.c is pid 1,
#: the tool pid 2); PROBE_RW's call is one process, the tool being pid 1.
PROBE_EXEC = spec("probe_exec", "probe:run", "rw", exec_=True)
SHELL = spec("shell", "shell:run", "rw", exec_=True)
READ_FILE = spec("read_file", "files:read_file", "ro")
WRITE_FILE = spec("write_file", "files:write_file", "rw")
LIST_FILES = spec("list_files", "files:list_files", "ro")
#: Tools with a warm-up, run by the spares forked after a call of theirs.
WARMED = spec("warmed", "warmed:run", "ro")
WARMED_EXEC = spec("warmed_exec", "warmed:run", "ro", exec_=True)
WARMED_FAILING = spec("warmed_failing", "warmed:run_failing", "rw")
ALL = (PROBE_RW, PROBE_RO, PROBE_NONE, PROBE_EXEC, SHELL, READ_FILE, WRITE_FILE, LIST_FILES)

#: The probe's hostile behaviours and the typed error each must become, whichever way the
#: backend is driven (``run`` on the event loop, ``run_sync`` in a thread).
HOSTILE_CHILDREN = [
    pytest.param(
        {"action": "raw_frame", "hex": "00000003ffffff"},
        SandboxError,
        "invalid frame",
        id="garbage",
    ),
    pytest.param(
        {"action": "raw_frame", "hex": "00000010c1"}, SandboxError, "invalid frame", id="partial"
    ),
    pytest.param(
        {"action": "raw_frame", "hex": "0000000191"}, SandboxError, "invalid frame", id="not-a-map"
    ),
    pytest.param({"action": "huge_frame_header"}, OutputTooLarge, "exceeded", id="oversized"),
    pytest.param({"action": "exit", "code": 3}, SandboxError, "status 3", id="early-exit"),
    pytest.param(
        {"action": "signal", "signal": int(signal.SIGSEGV)}, SandboxError, "signal 11", id="segv"
    ),
    pytest.param({"action": "fail"}, ToolFailed, "on purpose", id="tool-failed"),
    # A set-up error frame forged by the running tool (red-team finding P2): a protocol
    # error, not a set-up failure, when the child then exits otherwise than the set-up
    # does, or had made a broker request (only a running tool makes one).
    pytest.param(
        {"action": "setup_error", "phase": "P", "message": "M", "times": 520_000},
        SandboxError,
        "broke the frame protocol: .* exited with status 0",
        id="forged-setup-error",
    ),
    pytest.param(
        {
            "action": "setup_error",
            "phase": "landlock",
            "errno": 1,
            "request_first": True,
            "code": child.EXIT_SETUP,
        },
        SandboxError,
        "broke the frame protocol: .* after 1 broker request",
        id="setup-error-after-a-request",
    ),
    # Two frames at once: what the error says names the rule the child broke (a request
    # followed by a frame before its reply was said to be 'frames after its result').
    pytest.param(
        {
            "action": "raw_frame",
            "hex": frames_hex(
                {"type": "request", "op": "http", "payload": {}}, {"type": "result", "value": 1}
            ),
            "hang": True,
        },
        SandboxError,
        "invalid frame: the child sent another frame before its request was answered",
        id="frame-before-reply",
    ),
    pytest.param(
        {
            "action": "raw_frame",
            "hex": frames_hex({"type": "result", "value": 1}, {"type": "result", "value": 2}),
            "hang": True,
        },
        SandboxError,
        "invalid frame: the child sent frames after its result frame",
        id="frames-after-result",
    ),
    # A frame type of the child's making is shown cut to 64 characters of its repr, alone
    # or followed by another frame.
    pytest.param(
        {"action": "raw_frame", "hex": frames_hex({"type": "t" * 100_000}), "hang": True},
        SandboxError,
        "invalid frame: unexpected frame type 't{63} from the child$",
        id="long-frame-type",
    ),
    pytest.param(
        {
            "action": "raw_frame",
            "hex": frames_hex({"type": "t" * 100_000}, {"type": "result", "value": 1}),
            "hang": True,
        },
        SandboxError,
        "invalid frame: unexpected frame type 't{63} from the child$",
        id="long-frame-type-and-more",
    ),
    # Red-team finding Q6: a MemoryError outside the tool function (here: making the text
    # of the tool's exception) is the call's memory limit, reported by the memory error
    # frame or, when that cannot be sent, by the exit status (child.EXIT_MEMORY); a tool
    # that exits with that status claims no more than that frame would.
    pytest.param(
        {"action": "raise_unprintable"},
        ResourceLimitExceeded,
        "exceeded its 512 MiB memory limit",
        id="memory-error-outside-the-tool",
    ),
    pytest.param(
        {"action": "raise_unprintable", "shut": True},
        ResourceLimitExceeded,
        "exceeded its 512 MiB memory limit",
        id="memory-error-no-frame",
    ),
    pytest.param(
        {"action": "unencodable_result"},
        ResourceLimitExceeded,
        "exceeded its 512 MiB memory limit",
        id="memory-error-encoding-the-result",
    ),
    pytest.param(
        {"action": "exit", "code": child.EXIT_MEMORY},
        ResourceLimitExceeded,
        "exceeded its 512 MiB memory limit",
        id="exit-memory",
    ),
]


#: The fork-server's cloner (``zygote.CLONER_NAME``): it lives as long as the zygote.
CLONER = "runtime-cloner"


def bare_config(**changes: Any) -> child.ChildConfig:
    """A fork-server configuration for tests that drive a Zygote by hand: this process's ids,
    no root drop, no Landlock, no seccomp programs; ``changes`` override any field."""
    base: dict[str, Any] = {
        "host_uid": os.getuid(),
        "host_gid": os.getgid(),
        "drop_root": False,
        "landlock_abi": 0,
        "bpf_python": b"",
        "bpf_exec": b"",
    }
    return child.ChildConfig(**{**base, **changes})


def is_cloner(proc: psutil.Process, zygote_pid: int) -> bool:
    """Whether ``proc`` is the zygote's cloner. Not by name alone: a call or spare is a copy
    of the cloner and carries its name until it renames itself (``runtime-call``), so the
    cloner is the one of that name that shares the zygote's pid namespace (every call has
    its own from the clone on)."""
    try:
        if proc.name() != CLONER or proc.ppid() != zygote_pid:
            return False
        return os.readlink(f"/proc/{proc.pid}/ns/pid") == os.readlink(f"/proc/{zygote_pid}/ns/pid")
    except (psutil.NoSuchProcess, OSError):
        return False


def cloners(zygote_pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(zygote_pid).children() if is_cloner(p, zygote_pid)]


def call_processes(zygote_pid: int) -> list[psutil.Process]:
    """Every process under the zygote but its cloner (part of the fork-server itself):
    the calls' and the spares' processes."""
    procs = []
    for proc in psutil.Process(zygote_pid).children(recursive=True):
        if is_cloner(proc, zygote_pid):
            continue
        try:
            proc.status()
        except psutil.NoSuchProcess:
            continue  # gone: not left behind
        procs.append(proc)
    return procs


async def spare_processes(zygote_pid: int) -> list[psutil.Process]:
    """:func:`call_processes` once there are any (up to 10 s): the spare for a profile's
    next call is cloned after a call is handed out, asynchronously, and a look right after
    the call can come before it exists (it did, under load 10)."""
    procs = call_processes(zygote_pid)
    for _ in range(200):
        if procs:
            break
        await anyio.sleep(0.05)
        procs = call_processes(zygote_pid)
    return procs


def request(
    tool: ToolSpec, workspace: Path, arguments: dict[str, Any], **limits: Any
) -> ExecRequest:
    lim = Limits().merged(**{"timeout_s": 20.0, **limits})
    return ExecRequest(
        call_id="call_test",
        spec=tool,
        arguments=arguments,
        workspace=workspace,
        limits=lim,
        decision=Decision(action="allow", rule="test", limits=lim),
        env={"LANG": "C.UTF-8", "TOOL_ENV": "from-policy"},
    )


async def call(backend: Any, tool: ToolSpec, workspace: Path, **arguments: Any) -> ExecOutcome:
    limits = arguments.pop("limits", {})
    outcome: ExecOutcome = await backend.run(request(tool, workspace, arguments, **limits))
    return outcome


def run_with_backend(fn: Any, **backend_kwargs: Any) -> Any:
    """Start a fresh backend, run ``await fn(backend)``, always close it."""
    import anyio

    from runtime.backends.sandbox import SandboxBackend

    async def main() -> Any:
        backend = SandboxBackend(preload=ALL, **backend_kwargs)
        await backend.start()
        try:
            return await fn(backend)
        finally:
            await backend.aclose()

    return anyio.run(main)


def one(
    tool: ToolSpec, workspace: Path, disable: frozenset[str] = frozenset(), **arguments: Any
) -> Any:
    """Run one call on a fresh backend; returns the result or raises the typed error."""

    async def fn(backend: Any) -> Any:
        return (await call(backend, tool, workspace, **arguments)).result

    return run_with_backend(fn, disable=disable)
