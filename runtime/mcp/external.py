"""External MCP servers named by the policy file: the ``[[mcp_servers]]`` table.

Example (all fields; units and defaults in each field's description)::

    [[mcp_servers]]
    name = "notes"                              # identifier
    command = ["python3", "/opt/notes/server.py"]  # argv, never a shell string
    prefix = "notes"                            # tools appear as notes__<tool>
    env = { NOTES_DIR = "/srv/notes" }          # the only variables it sees beyond PATH/LANG
    network = false                             # its own empty network namespace
    tools = ["search", "get"]                   # import only these (default: all)
    start_timeout_s = 30

The server is untrusted code: the broker starts it isolated (``runtime.mcp.launch``), lists its
tools into the catalogue as ``<prefix>__<tool>`` (category ``mcp``, backend ``mcp``), validates
every call against the schema it advertised, and applies the policy and the audit log exactly
as for a built-in tool. The policy decides on the prefixed names (``notes__search``).

The policy engine's schema forbids unknown keys, so :func:`load_policy` reads the table here
and hands the engine the same text with the ``[[mcp_servers]]`` tables blanked out line for
line (error messages keep their line numbers). Once the engine's schema accepts (and ignores)
``mcp_servers``, the blanking is a no-op.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runtime.errors import PolicyError

if TYPE_CHECKING:
    from runtime.policy import Policy

__all__ = [
    "ExternalServer",
    "load_external_servers",
    "load_policy",
    "parse_external_servers",
    "prefixed_name",
    "strip_external_servers",
]

_IDENT = r"^[a-zA-Z0-9_-]{1,32}$"
#: Joins prefix and remote tool name; two underscores so a prefix may itself hold one.
SEPARATOR = "__"


class ExternalServer(BaseModel):
    """One ``[[mcp_servers]]`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_IDENT, description="Identifier of the server. Required.")
    command: list[str] = Field(
        min_length=1,
        description="argv of the stdio MCP server: program then arguments; never run through "
        "a shell. Required.",
    )
    prefix: str | None = Field(
        None,
        pattern=_IDENT,
        description="Tool name prefix: tools are listed as <prefix>__<tool>. Default: name.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables the server sees, beyond a minimal PATH, HOME and "
        "LANG. Default: none.",
    )
    network: bool = Field(
        False,
        description="Share the host network. Default false: an empty network namespace.",
    )
    tools: list[str] | None = Field(
        None, description="Only import these tools of the server (remote names). Default: all."
    )
    start_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Start-up, handshake and tool listing must finish within this, seconds. "
        "Default 30.",
    )

    @field_validator("command")
    @classmethod
    def _argv_ok(cls, v: list[str]) -> list[str]:
        if not v[0]:
            raise ValueError("command[0] must name a program")
        if any("\0" in part for part in v):
            raise ValueError("command items may not contain NUL")
        return v

    @field_validator("env")
    @classmethod
    def _env_ok(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(f"invalid environment variable {key!r}")
        return v

    @property
    def tool_prefix(self) -> str:
        return self.prefix or self.name


def prefixed_name(prefix: str, tool: str) -> str:
    return f"{prefix}{SEPARATOR}{tool}"


def parse_external_servers(data: Any, *, where: str = "policy") -> list[ExternalServer]:
    """Validate the ``mcp_servers`` value of a decoded policy document."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise PolicyError(f"{where}: mcp_servers must be an array of tables", field="mcp_servers")
    servers: list[ExternalServer] = []
    for index, item in enumerate(data):
        try:
            server = ExternalServer.model_validate(item)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            field = f"mcp_servers[{index}]" + (f".{loc}" if loc else "")
            raise PolicyError(f"{where}: {field}: {err['msg']}", field=field) from exc
        servers.append(server)
    _check_unique(servers, where)
    return servers


def _check_unique(servers: Iterable[ExternalServer], where: str) -> None:
    names: set[str] = set()
    prefixes: set[str] = set()
    for server in servers:
        if server.name in names:
            raise PolicyError(f"{where}: mcp server {server.name!r} is defined twice")
        if server.tool_prefix in prefixes:
            raise PolicyError(f"{where}: mcp prefix {server.tool_prefix!r} is used twice")
        names.add(server.name)
        prefixes.add(server.tool_prefix)


def load_external_servers(policy_path: str | Path | None) -> list[ExternalServer]:
    """The ``[[mcp_servers]]`` of a policy file; none without a file (the built-in default
    policy names no external servers)."""
    if policy_path is None:
        return []
    path = Path(policy_path)
    try:
        with path.open("rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read policy: {exc.strerror}", file=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{path}: not valid TOML: {exc}", file=str(path)) from exc
    return parse_external_servers(document.get("mcp_servers"), where=str(path))


# A TOML table header line: [a.b] or [[a.b]] (quoted keys allowed), optionally commented.
_HEADER = re.compile(r"""^\s*\[\[?\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_.\s-])+?)\s*\]\]?\s*(#.*)?$""")


def _is_ours(header: str) -> bool:
    first = header.split(".", 1)[0].strip().strip("\"'")
    return first == "mcp_servers"


def strip_external_servers(text: str, *, where: str = "policy") -> str:
    """``text`` with every ``[[mcp_servers]]`` table (and its sub-tables) blanked out, line
    for line. Checked: the result must decode to the same document minus ``mcp_servers``."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"{where}: not valid TOML: {exc}", file=where) from exc
    if "mcp_servers" not in document:
        return text
    lines = text.splitlines(keepends=True)
    inside = False
    for index, line in enumerate(lines):
        match = _HEADER.match(line)
        if match:
            inside = _is_ours(match.group(1))
        if inside:
            lines[index] = "\n" if line.endswith("\n") else ""
    stripped = "".join(lines)
    expected = {k: v for k, v in document.items() if k != "mcp_servers"}
    try:
        same = tomllib.loads(stripped) == expected
    except tomllib.TOMLDecodeError:
        same = False
    if not same:
        raise PolicyError(
            f"{where}: write mcp_servers as [[mcp_servers]] tables (not inline or dotted keys)",
            file=where,
            field="mcp_servers",
        )
    return stripped


def load_policy(policy_path: str | Path) -> tuple[Policy, list[ExternalServer]]:
    """The policy of a file and the external MCP servers it names."""
    from runtime.policy import Policy

    path = Path(policy_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{path}: cannot read policy file: {exc}", file=str(path)) from exc
    servers = load_external_servers(path)
    policy = Policy.from_toml(strip_external_servers(text, where=str(path)), source=str(path))
    return policy, servers
