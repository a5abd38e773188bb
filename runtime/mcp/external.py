"""External MCP servers named by the policy file: the ``[[mcp_servers]]`` table.

Example (all fields; units and defaults in each field's description, see
:class:`runtime.policy.schema.McpServerEntry`)::

    [[mcp_servers]]
    name = "notes"                              # identifier
    command = ["python3", "/opt/notes/server.py"]  # argv, never a shell string
    prefix = "notes"                            # tools appear as notes__<tool>
    env = { NOTES_DIR = "/srv/notes" }          # the only variables it sees beyond PATH/LANG
    network = false                             # its own empty network namespace
    tools = ["search", "get"]                   # import only these (default: all)
    read_only = ["/srv/notes"]                  # host paths it may read (default: none)
    memory_mb = 2048
    pids = 128
    start_timeout_s = 30
    enabled = true                              # false: kept, not started, no tools

A server reached by URL instead (Streamable HTTP, ``runtime.mcp.remote``; or the legacy
HTTP+SSE transport, ``runtime.mcp.remote_sse``)::

    [[mcp_servers]]
    name = "search"
    url = "https://mcp.example.com/mcp"        # http or https; exclusive with command
    headers = { Authorization = "env:SEARCH_TOKEN" }  # env:NAME read from the broker's env
    transport = "streamable-http"              # or "sse", or "auto" (falls back to sse)
    tools = ["query"]
    start_timeout_s = 10

It is reached by the broker through the egress gateway under the policy's ``[network]``
rules; the entry names its own origin for that connection only.

The server is untrusted code: the broker starts it inside the Linux sandbox
(``runtime.mcp.launch``), lists its tools into the catalogue as ``<prefix>__<tool>``
(category ``mcp``, backend ``mcp``), validates every call against the schema it advertised,
and applies the policy and the audit log exactly as for a built-in tool. The policy decides
on the prefixed names (``notes__search``).

The table is part of the policy schema (``policy/policy.schema.json``): it is validated with
the rest of the file, errors name file, line and field, and :func:`load_policy` reads the
servers from the parsed policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from runtime.errors import PolicyError
from runtime.models import TOOL_NAME_RE, BackendKind, ToolHints, ToolSpec
from runtime.policy.schema import LocatedError, McpServerEntry, check_mcp_servers

if TYPE_CHECKING:
    from runtime.policy import Policy

__all__ = [
    "ExternalServer",
    "load_external_servers",
    "load_policy",
    "parse_external_servers",
    "placeholder_spec",
    "prefixed_name",
]

#: One ``[[mcp_servers]]`` entry (the policy schema's model).
ExternalServer = McpServerEntry
#: Joins prefix and remote tool name; two underscores so a prefix may itself hold one.
SEPARATOR = "__"
_ENTRIES: TypeAdapter[list[McpServerEntry]] = TypeAdapter(list[McpServerEntry])


def prefixed_name(prefix: str, tool: str) -> str:
    return f"{prefix}{SEPARATOR}{tool}"


def placeholder_spec(servers: list[ExternalServer], name: str) -> ToolSpec | None:
    """A stand-in for ``<prefix>__<tool>`` of a configured server that is not running (for
    ``runtime policy check``): category ``mcp``, open-world and destructive as the proxy
    lists every external tool, and any arguments (the real schema is the server's, known
    only once it runs). None when no server has that prefix."""
    prefix, sep, tool = name.partition(SEPARATOR)
    server = next((s for s in servers if s.tool_prefix == prefix and s.enabled), None)
    if not sep or not tool or server is None or not TOOL_NAME_RE.match(name):
        return None
    if server.tools is not None and tool not in server.tools:
        return None
    return ToolSpec(
        name=name,
        description=f"[{server.name}] {tool} (external MCP server, not started)",
        category="mcp",
        parameters={"type": "object"},
        backend=BackendKind.MCP,
        hints=ToolHints(destructive=True, open_world=True),
    )


def parse_external_servers(data: Any, *, where: str = "policy") -> list[ExternalServer]:
    """Validate the ``mcp_servers`` value of a decoded policy document (for callers that
    build the table in code; a policy file is validated by the policy schema)."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise PolicyError(f"{where}: mcp_servers must be an array of tables", field="mcp_servers")
    try:
        servers = _ENTRIES.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]]
        field = f"mcp_servers[{loc[0]}]" + (f".{'.'.join(loc[1:])}" if loc[1:] else "")
        raise PolicyError(f"{where}: {field}: {err['msg']}", field=field) from exc
    try:
        check_mcp_servers(servers)
    except LocatedError as exc:
        # The later entry's field, spelled as the schema errors above spell theirs.
        index, name = exc.loc
        field = f"mcp_servers[{index}].{name}"
        raise PolicyError(f"{where}: {field}: {exc}", field=field) from exc
    return [s for s in servers if s.enabled]


def load_external_servers(policy_path: str | Path | None) -> list[ExternalServer]:
    """The ``[[mcp_servers]]`` of a policy file; none without a file (the built-in default
    policy names no external servers). The whole file is validated."""
    if policy_path is None:
        return []
    return load_policy(policy_path)[1]


def load_policy(policy_path: str | Path) -> tuple[Policy, list[ExternalServer]]:
    """The policy of a file and the external MCP servers it names and enables (an entry
    with ``enabled = false`` is validated with the file but never started)."""
    from runtime.policy import Policy

    policy = Policy.load(Path(policy_path))
    return policy, [s for s in policy.document.mcp_servers if s.enabled]
