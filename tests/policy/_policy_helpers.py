from __future__ import annotations

from typing import Any

from runtime.models import BackendKind, SandboxNeeds, ToolCall, ToolSpec
from runtime.policy import Policy

_ROLES: dict[str, tuple[str, dict[str, Any], bool]] = {
    "read_file": ("file", {"path": "read_path"}, False),
    "list_files": ("file", {"path": "read_path"}, False),
    "write_file": ("file", {"path": "write_path"}, False),
    "delete_file": ("file", {"path": "write_path"}, False),
    "edit_file": ("file", {"path": "read_write_path"}, False),
    "move_file": ("file", {"source": "read_write_path", "destination": "write_path"}, False),
    "shell_exec": ("shell", {"command": "command", "cwd": "cwd"}, False),
    "http_get": ("network", {"url": "url"}, True),
    "web_search": ("network", {}, True),
    "json_parse": ("data", {}, False),
    "sleep": ("system", {}, False),
    "mcp_thing": ("mcp", {}, False),
}


def make_spec(name: str, **over: Any) -> ToolSpec:
    category, roles, egress = _ROLES.get(name, ("custom", {}, False))
    return ToolSpec(
        name=name,
        description="test tool",
        category=over.pop("category", category),
        parameters={"type": "object"},
        backend=BackendKind.MOCK,
        arg_roles=over.pop("arg_roles", roles),
        sandbox=SandboxNeeds(egress=egress),
        **over,
    )


def decide(policy: Policy, tool: str, profile: str | None = None, **arguments: Any):
    return policy.decide(ToolCall(tool=tool, arguments=arguments), make_spec(tool), profile=profile)


def verdict(policy: Policy, command: str) -> tuple[str, str]:
    """The default-shaped shell_exec call's action and rule id for ``command``."""
    d = decide(policy, "shell_exec", command=command)
    return d.action, d.rule
