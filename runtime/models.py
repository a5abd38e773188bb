"""Data that crosses layers: calls, manifests, limits, decisions, results, audit records.

Every field that a user can set has its unit and default in its description (nsjail's
``config.proto`` is the model). These models are contracts: the result JSON of DESIGN §7 is
``ToolResult.to_json()``.
"""

from __future__ import annotations

import datetime as _dt
import enum
import itertools
import os
import re
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from runtime.errors import ErrorType

__all__ = [
    "TOOL_NAME_RE",
    "Action",
    "ArgRole",
    "AuditRecord",
    "BackendKind",
    "Decision",
    "ErrorInfo",
    "Limits",
    "SandboxNeeds",
    "ToolCall",
    "ToolCategory",
    "ToolHints",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "WorkspaceAccess",
    "new_call_id",
    "utcnow",
]

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

#: The tool categories, a closed set: a manifest says one, and a policy's [categories],
#: rules and profiles name them (a misspelt name there matched no tool and failed open).
ToolCategory = Literal[
    "file", "shell", "code", "network", "system", "data", "memory", "interaction", "custom", "mcp"
]


class _CallIds:
    """``call_`` + 32 hex digits, unique per process: 64 random bits drawn once (again in a
    forked child) and a 64-bit counter. uuid4() cost a getrandom() syscall per call; call
    ids are labels, not secrets (a model may choose its own), so nothing needs them
    unpredictable."""

    __slots__ = ("_counter", "_prefix")

    def __init__(self) -> None:
        self._reseed()
        os.register_at_fork(after_in_child=self._reseed)

    def _reseed(self) -> None:
        self._prefix = f"call_{uuid.uuid4().hex[:16]}"
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter):016x}"


new_call_id = _CallIds()


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


# --------------------------------------------------------------------------------------------
# Calls


class ToolCall(_Model):
    """One normalised tool call, whatever shape it arrived in (see ``runtime.shapes``)."""

    call_id: str = Field(default_factory=new_call_id, description="Provider id or generated.")
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    context: dict[str, Any] = Field(
        default_factory=dict,
        description="Caller context: session id, agent profile, source shape. Not validated by "
        "the tool schema; never passed to the tool.",
    )


# --------------------------------------------------------------------------------------------
# Manifests

ArgRole = Literal[
    "read_path", "write_path", "read_write_path", "command", "cwd", "url", "env", "session_env"
]


class BackendKind(enum.StrEnum):
    SUBPROCESS = "subprocess"  # Linux sandbox via the fork-server
    WASM = "wasm"  # Wasmtime guest
    HOST = "host"  # broker-side: egress gateway and broker state; never untrusted code
    MCP = "mcp"  # an external MCP server, started sandboxed (runtime.backends.mcp_proxy)
    MOCK = "mock"  # tests only


class WorkspaceAccess(enum.StrEnum):
    NONE = "none"
    READ = "ro"
    WRITE = "rw"


class SandboxNeeds(_Model):
    """What the sandbox must grant a tool. Least privilege: everything off by default."""

    workspace: WorkspaceAccess = Field(
        WorkspaceAccess.NONE, description="Workspace mount: none | ro | rw. Default none."
    )
    exec: bool = Field(
        False,
        description="Mount the system directories read-only and allow execve (shell tools). "
        "Default false.",
    )
    egress: bool = Field(
        False,
        description="May ask the broker's egress gateway for HTTP (the sandbox itself never "
        "has network), when the policy's decision for the call also grants network. Default "
        "false: the broker refuses the tool's HTTP requests (policy_denied).",
    )
    ask_user: bool = Field(
        False,
        description="May ask the session's user a question through the broker "
        "(ctx.ask_broker('ask_user', ...)). Default false: the broker refuses it "
        "(policy_denied).",
    )


class ToolHints(_Model):
    """Danger hints, exported as MCP annotations (``runtime.catalogue.export`` holds the
    rule that turns them into ``readOnlyHint`` .. ``openWorldHint``). The built-in tools
    state all four, pinned by ``tests/mcp/test_annotations.py``."""

    read_only: bool = Field(False, description="Changes nothing (MCP readOnlyHint). Default false.")
    destructive: bool = Field(
        False,
        description="May overwrite or remove what exists, not only add (MCP destructiveHint); "
        "never with read_only. Default: true unless read_only (MCP's own default: a tool "
        "that does not say is not told to clients as additive only).",
    )
    idempotent: bool = Field(
        False,
        description="A repeat with the same arguments has no further effect (MCP "
        "idempotentHint). Default false.",
    )
    open_world: bool = Field(
        False,
        description="Reaches entities outside the session (MCP openWorldHint); the network "
        "tools and external MCP servers are open-world whatever this says. Default false.",
    )

    @model_validator(mode="before")
    @classmethod
    def _destructive_unless_said(cls, data: Any) -> Any:
        # Unstated, destructiveHint is MCP's default (true) for a tool that may change
        # things: false would tell a client an unknown tool only adds. A read-only tool is
        # not destructive.
        if isinstance(data, dict) and "destructive" not in data:
            return {**data, "destructive": not data.get("read_only", False)}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> ToolHints:
        # MCP: destructiveHint is "meaningful only when readOnlyHint is false"; both true
        # would tell a client that a tool it may auto-approve as harmless deletes things.
        if self.read_only and self.destructive:
            raise ValueError("hints: a read_only tool cannot be destructive")
        return self


class Limits(_Model):
    """Resource limits of one call. Policy sets them per tool; a manifest may lower them."""

    timeout_s: float = Field(30.0, gt=0, le=3600, description="Wall clock, seconds. Default 30.")
    cpu_s: int = Field(
        30,
        gt=0,
        le=3600,
        description="CPU time of each process of the call (RLIMIT_CPU), seconds: per process, "
        "so a call running several processes may use more in all (timeout_s bounds the "
        "call). Default 30.",
    )
    memory_mb: int = Field(
        512,
        gt=0,
        le=65536,
        description="What each process may allocate (RLIMIT_DATA; RLIMIT_AS 4 GiB more) and, "
        "where the host gives a memory cgroup, what the whole call may hold, MiB. Default 512.",
    )
    pids: int = Field(
        64,
        gt=0,
        le=4096,
        description="Processes+threads of the call: its pids cgroup where the host gives one, "
        "else RLIMIT_NPROC, counted in the call's own user namespace. Default 64.",
    )
    nofile: int = Field(256, gt=3, le=65536, description="Open files (RLIMIT_NOFILE). Default 256.")
    fsize_mb: int = Field(
        256, gt=0, le=65536, description="Largest file written (RLIMIT_FSIZE), MiB. Default 256."
    )
    output_bytes: int = Field(
        1_048_576,
        gt=0,
        le=256 * 1_048_576,
        description="Largest result (and stdout/stderr each), bytes. Default 1 MiB.",
    )
    disk_mb: int = Field(
        2048,
        gt=0,
        le=16 * 1_048_576,
        description="How much the workspace's file system may fill while a call that writes "
        "it runs, MiB (each file or directory made counts as 4 KiB). Counted for the whole "
        "file system, so concurrent writers count together; read every 20 ms, and a call "
        "past it is ended (resource_limit). Default 2048.",
    )
    wasm_fuel: int = Field(
        2_000_000_000, gt=0, description="Wasm instructions (fuel units). Default 2e9."
    )
    wasm_memory_mb: int = Field(
        64, gt=0, le=4096, description="Wasm linear memory, MiB. Default 64."
    )

    def merged(self, **overrides: Any) -> Limits:
        """A copy with ``overrides`` applied (None values ignored)."""
        data = self.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return Limits.model_validate(data)

    def capped_by(self, other: Limits) -> Limits:
        """Field-wise minimum: a manifest can only lower what the policy allows."""
        mine, theirs = self.model_dump(), other.model_dump()
        return Limits.model_validate({k: min(v, theirs[k]) for k, v in mine.items()})


class ToolSpec(_Model):
    """A tool manifest (``tools/manifests/*.json`` or a user folder)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    description: str = Field(min_length=1)
    category: ToolCategory = Field(
        description="file | shell | code | network | system | data | memory | interaction | "
        "custom | mcp"
    )
    parameters: dict[str, Any] = Field(description="JSON Schema (2020-12) of the arguments.")
    result: dict[str, Any] | None = Field(None, description="JSON Schema of the result.")
    backend: BackendKind
    entry: str | None = Field(
        None,
        description="'module:function' of the implementation (subprocess / host backends); "
        "resolved against the manifest's folder, or the built-in tools/impl.",
    )
    command: list[str] | None = Field(
        None,
        description="Command template for custom tools: an argv list whose items may hold "
        "{placeholders} filled from validated arguments. Never a shell string.",
    )
    wasm: dict[str, Any] | None = Field(
        None,
        description=(
            "Wasm guest: {module, sha256, export?}; sha256 is required for a module file "
            "(optional for a built-in guest name); see runtime.backends.wasm."
        ),
    )
    sandbox: SandboxNeeds = Field(default_factory=SandboxNeeds)
    arg_roles: dict[str, ArgRole] = Field(
        default_factory=dict,
        description="What the policy must check in which argument: {argument: read_path | "
        "write_path | read_write_path | command | cwd | url | env | session_env}. A path role "
        "applies the policy's path rules (read_write_path: both the read and the write ones, "
        "for a path the tool reads and changes), 'command' the command rules, 'url' the "
        "network rules; 'env' (an object NAME -> VALUE the call's commands see) and "
        "'session_env' (the name of a session variable whose value is the argument 'value') "
        "judge each NAME=VALUE as the command rules judge 'export NAME=VALUE', and "
        "session_env also refuses a name [env] deny matches.",
    )
    hints: ToolHints = Field(default_factory=ToolHints)
    limits: dict[str, Any] = Field(
        default_factory=dict, description="Limits this tool never exceeds (subset of Limits)."
    )
    source: Path | None = Field(None, exclude=True, description="Where the manifest was loaded.")

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not TOOL_NAME_RE.match(v):
            raise ValueError(f"tool name {v!r} must match {TOOL_NAME_RE.pattern}")
        return v


# --------------------------------------------------------------------------------------------
# Decisions and results

Action = Literal["allow", "ask", "deny"]


class Decision(_Model):
    """A policy decision for one call."""

    action: Action
    rule: str = Field(description="Id of the rule that decided ('default' when none matched).")
    reasons: list[str] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    profile: str | None = None
    network: dict[str, Any] = Field(
        default_factory=dict, description="Egress grant for this call, filled by the policy."
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment the sandboxed tool sees (policy only)."
    )


class ErrorInfo(_Model):
    type: ErrorType
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class Usage(_Model):
    model_config = ConfigDict(extra="allow")

    cpu_ms: float | None = None
    max_rss_kb: int | None = None
    wall_ms: float | None = None
    fuel: int | None = None
    peak_memory_bytes: int | None = None
    pids_limit_hits: int | None = Field(
        None,
        description="Times a fork or thread of the call was refused by its pids limit "
        "(its cgroup's count); present only when it was. The call is not an error for it: "
        "the program decided what to do with the failed fork. Only where the call has a "
        "pids cgroup (the audit's cgroup_pids): with RLIMIT_NPROC alone a refused fork is "
        "seen by nobody but the program (the kernel counts no rlimit refusals).",
    )


class ToolResult(_Model):
    """The result JSON of DESIGN §7."""

    call_id: str
    tool: str
    success: bool
    result: Any = None
    error: ErrorInfo | None = None
    started_at: _dt.datetime
    completed_at: _dt.datetime
    duration_ms: float
    backend: str | None = None
    usage: Usage = Field(default_factory=Usage)
    decision: dict[str, Any] | None = Field(
        None, description="{action, rule} of the policy decision, when one was made."
    )

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AuditRecord(_Model):
    """One row of the audit log. ``kind`` is 'request' (write-ahead) or 'completion'."""

    model_config = ConfigDict(extra="forbid")

    seq: int | None = None
    kind: Literal["request", "completion"]
    call_id: str
    time: str = Field(description="RFC 3339 UTC timestamp.")
    tool: str
    arguments_digest: str | None = None
    arguments: Any = Field(None, description="Redacted arguments (request records).")
    decision: dict[str, Any] | None = None
    backend: str | None = None
    sandbox: dict[str, Any] | None = Field(
        None, description="Sandbox fingerprint: which mechanisms were active."
    )
    outcome: str | None = Field(
        None, description="success | error | denied | cancelled (completion records)."
    )
    error_type: str | None = None
    duration_ms: float | None = None
    usage: dict[str, Any] | None = None
    result_digest: str | None = None
    result_size: int | None = None
    session: str | None = Field(
        None,
        description="The broker session the call ran in (Broker(session=...), an MCP "
        "connection's session id); None in records written before sessions were recorded.",
    )
    prev_hash: str | None = None
    hash: str | None = None
