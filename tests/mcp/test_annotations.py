"""The MCP annotations of the built-in tools, pinned against the spec's definitions
(readOnlyHint: does not modify its environment; destructiveHint: may do more than add;
idempotentHint: a repeat with the same arguments has no further effect; openWorldHint:
reaches entities outside the closed world of the session), and the one rule that derives
them (``runtime.catalogue.export``): what the manifest states, plus what the sandbox
grants for openWorldHint (shell_exec's follows whether the call sandbox walls the network
off)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from pydantic import ValidationError

from runtime.backends._mcp_tools import spec_for
from runtime.catalogue import Catalogue
from runtime.mcp import server
from runtime.mcp.external import parse_external_servers
from runtime.models import ToolHints, ToolSpec
from runtime.toolkit import builtin_tools_dir

# Every built-in tool: (readOnly, destructive, idempotent, openWorld) as tools/list shows
# them. A new tool fails test_every_tool_is_pinned until its four hints are decided here.
TABLE = {
    # data (wasm): pure functions of their arguments
    "base64_decode": (True, False, True, False),
    "base64_encode": (True, False, True, False),
    "csv_to_json": (True, False, True, False),
    "hash": (True, False, True, False),
    "json_parse": (True, False, True, False),
    "json_query": (True, False, True, False),
    "json_stringify": (True, False, True, False),
    "regex_match": (True, False, True, False),
    # files and code: the workspace is the closed world
    "code_query": (True, False, True, False),
    "file_search": (True, False, True, False),
    "get_file_info": (True, False, True, False),
    "list_files": (True, False, True, False),
    "read_file": (True, False, True, False),
    "delete_file": (False, True, True, False),  # deleting again removes nothing more
    "move_file": (False, True, True, False),  # the source is gone: a repeat moves nothing
    "edit_file": (False, True, False, False),  # new_string may hold old_string again
    "write_file": (False, True, False, False),  # mode=append adds on every repeat
    # shell: open-world only where the sandbox lets a program reach the network
    "shell_exec": (False, True, False, False),
    # system
    "current_time": (True, False, True, False),  # reads a clock: a repeat changes nothing
    "sleep": (True, False, True, False),
    "get_env": (True, False, True, False),
    "set_env": (False, True, True, False),  # replaces (or, with null, removes) a value
    # memory: the broker's state store
    "memory_read": (True, False, True, False),
    "memory_search": (True, False, True, False),
    "memory_write": (False, True, False, False),  # replaces a key; no key: a new entry
    "memory_delete": (False, True, True, False),
    "snippet_list": (True, False, True, False),
    "snippet_load": (True, False, True, False),
    "snippet_save": (False, True, True, False),  # saving a name again replaces it
    "snippet_delete": (False, True, True, False),
    # interaction: asks the session's user; changes nothing, but a repeat asks again
    "ask_user": (True, False, False, False),
    "request_confirmation": (True, False, False, False),
    "review_with_feedback_content": (True, False, False, False),
    # network: through the egress gateway to whatever the policy allows
    "http_get": (True, False, True, True),
    "web_fetch": (True, False, True, True),
    "web_search": (True, False, True, True),
    "http_post": (False, True, False, True),  # a POST may replace or delete remote state
    "http_request": (False, True, False, True),  # any method, DELETE and PUT included
}
HINTS = ("read_only", "destructive", "idempotent", "open_world")


def _hints(tool: types.Tool) -> tuple[bool | None, ...]:
    a = tool.annotations
    assert a is not None, tool.name
    return (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)


def _broker(mode: str = "strict", catalogue: Catalogue | None = None) -> Any:
    policy = SimpleNamespace(tool_visible=lambda name, profile=None: True)
    return SimpleNamespace(catalogue=catalogue or Catalogue(), policy=policy, sandbox_mode=mode)


def test_every_tool_is_pinned() -> None:
    listed = {t.name: _hints(t) for t in server.tool_definitions(_broker())}
    assert listed == TABLE


def test_every_manifest_states_its_four_hints() -> None:
    # Deciding them is the point: a default (all false) would say "changes nothing
    # destructively" of a tool nobody looked at.
    for path in sorted(builtin_tools_dir().glob("*/*.json")):
        stated = json.loads(path.read_text())["hints"]
        assert sorted(stated) == sorted(HINTS), path.name


@pytest.mark.parametrize("walled", [True, False])
def test_shell_open_world_follows_the_sandbox(
    monkeypatch: pytest.MonkeyPatch, walled: bool
) -> None:
    monkeypatch.setattr(server, "_host_walls_network", lambda: walled)

    def open_world(mode: str) -> dict[str, bool | None]:
        return {t.name: _hints(t)[3] for t in server.tool_definitions(_broker(mode))}

    best_effort = open_world("best_effort")
    # Without a network wall (best_effort on a host with neither namespaces nor seccomp)
    # a program has the host's network: open world.
    assert best_effort["shell_exec"] is (not walled)
    # strict refuses to run without them: never open world.
    assert open_world("strict")["shell_exec"] is False
    # Benign control: tools that run no programs keep the table's hint.
    assert best_effort["read_file"] is False
    assert best_effort["http_get"] is True


def _custom(**fields: Any) -> ToolSpec:
    base: dict[str, Any] = {
        "name": "t",
        "description": "d",
        "category": "custom",
        "parameters": {"type": "object"},
        "backend": "subprocess",
        "entry": "m:f",
    }
    return ToolSpec.model_validate({**base, **fields})


def test_what_the_sandbox_grants_is_open_world_whatever_the_manifest_says() -> None:
    catalogue = Catalogue(builtins=False)
    catalogue.register(_custom(name="fetcher", sandbox={"egress": True}))
    catalogue.register(_custom(name="runner", sandbox={"exec": True}))
    catalogue.register(_custom(name="pure"))
    listed = {t.name: _hints(t)[3] for t in server.tool_definitions(_broker("strict", catalogue))}
    # The egress gateway is the world; the walled sandbox (strict) is not. Benign control:
    # a tool granted neither stays closed.
    assert listed == {"fetcher": True, "runner": False, "pure": False}


def test_a_read_only_tool_cannot_be_destructive() -> None:
    with pytest.raises(ValidationError, match="read_only tool cannot be destructive"):
        ToolHints(read_only=True, destructive=True)
    ToolHints(read_only=True, idempotent=True)  # benign control
    ToolHints(destructive=True)


def test_an_external_tools_hints_take_mcps_defaults() -> None:
    ext = parse_external_servers([{"name": "ext", "command": ["x"]}])[0]

    def hints(annotations: dict[str, Any] | None) -> tuple[bool, ...]:
        tool = types.Tool.model_validate(
            {"name": "t", "inputSchema": {"type": "object"}, "annotations": annotations}
        )
        spec = spec_for(ext, "ext", tool)
        assert spec is not None
        h = spec.hints
        return (h.read_only, h.destructive, h.idempotent, h.open_world)

    # Nothing said: MCP's defaults (not read-only, destructive, open world).
    assert hints(None) == (False, True, False, True)
    # A read-only claim without destructiveHint: MCP's destructiveHint default applies only
    # to tools that are not read-only (this refused to build the tool's spec).
    assert hints({"readOnlyHint": True}) == (True, False, False, True)
    assert hints({"destructiveHint": False, "idempotentHint": True}) == (False, False, True, True)
    # External code is open-world whatever it claims.
    assert hints({"openWorldHint": False})[3] is True


def test_a_manifest_that_does_not_say_is_destructive_unless_read_only() -> None:
    """A user's tool whose manifest states no hints is not shown to clients as additive
    only (destructiveHint false): unsaid, it takes MCP's default, as an external tool does."""
    catalogue = Catalogue(builtins=False)
    catalogue.register(_custom(name="unsaid"))
    catalogue.register(_custom(name="reader", hints={"read_only": True}))
    catalogue.register(_custom(name="adder", hints={"destructive": False}))
    listed = {t.name: _hints(t)[:2] for t in server.tool_definitions(_broker("strict", catalogue))}
    assert listed == {"unsaid": (False, True), "reader": (True, False), "adder": (False, False)}
    assert ToolHints().destructive is True
    assert ToolHints.model_validate({"read_only": True}).destructive is False
