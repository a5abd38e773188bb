"""A scripted policy (per-tool actions, path containment) and, only while runtime.audit has
not landed, an in-memory audit log, so the MCP mapping is tested independently of the policy
engine's defaults."""

from __future__ import annotations

import importlib
import os
import sys
import types
from pathlib import Path
from typing import Any

from runtime.models import Decision, Limits, ToolCall, ToolSpec

ACTIONS = {"guarded": "ask", "forbidden": "deny"}
HIDDEN = {"hidden"}


class ScriptedPolicy:
    sandbox_mode = "best_effort"
    max_concurrent = 8
    max_queued = 32
    max_queued_total = 256
    redact_keys: tuple[str, ...] = ()
    network: dict[str, Any] = {}

    def __init__(
        self,
        actions: dict[str, str] | None = None,
        hidden: set[str] | None = None,
        workspace: Path | None = None,
    ) -> None:
        self.actions = dict(ACTIONS if actions is None else actions)
        self.hidden = set(HIDDEN if hidden is None else hidden)
        self.workspace = workspace

    def decide(self, tc: ToolCall, spec: ToolSpec, profile: str | None = None) -> Decision:
        for arg, role in spec.arg_roles.items():
            value = tc.arguments.get(arg)
            if (
                role == "read_path"
                and isinstance(value, str)
                and (value.startswith("/") or ".." in Path(value).parts)
            ):
                return Decision(
                    action="deny",
                    rule="paths.outside_workspace",
                    reasons=[f"{arg}: {value!r} leaves the workspace"],
                )
        action = self.actions.get(spec.name, "allow")
        return Decision(action=action, rule=f"tools.{spec.name}", limits=Limits(timeout_s=20))  # type: ignore[arg-type]

    def tool_visible(self, name: str, profile: str | None = None) -> bool:
        return name not in self.hidden

    def budget(self, tool: str) -> int | None:
        return None

    def env(self, session_env: dict[str, str]) -> dict[str, str]:
        return dict(session_env)


class MemoryAuditLog:
    def __init__(self, path: Any, redact_keys: Any = ()) -> None:
        self.records: list[dict[str, Any]] = []

    def record_request(self, **kw: Any) -> None:
        self.records.append({"kind": "request", **kw})

    def record_completion(self, **kw: Any) -> None:
        self.records.append({"kind": "completion", **kw})

    def tail(self, n: int = 20) -> list[dict[str, Any]]:
        return self.records[-n:]

    def close(self) -> None:
        return None


def real_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def ensure_audit() -> bool:
    """Install the in-memory audit log as runtime.audit if the real one is missing.
    Returns True when the real module is used."""
    if real_module("runtime.audit"):
        return True
    module = types.ModuleType("runtime.audit")
    module.AuditLog = MemoryAuditLog  # type: ignore[attr-defined]
    sys.modules["runtime.audit"] = module
    return False


def ensure_policy_module() -> bool:
    """The broker imports runtime.policy even when given a policy object."""
    if real_module("runtime.policy"):
        return True
    module = types.ModuleType("runtime.policy")
    module.Policy = ScriptedPolicy  # type: ignore[attr-defined]
    sys.modules["runtime.policy"] = module
    return False


def install() -> None:
    ensure_audit()
    ensure_policy_module()
    os.environ.setdefault("RUNTIME_TEST_STANDINS", "1")
