"""The MCP annotations of the built-in tools, pinned against the spec's definitions
(readOnlyHint: does not modify its environment; destructiveHint: may do more than add;
idempotentHint: a repeat with the same arguments has no further effect; openWorldHint:
reaches entities outside the closed world of the workspace), and shell_exec's openWorldHint
derived from whether the call sandbox walls the network off."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from runtime.catalogue import Catalogue
from runtime.mcp import server

# name: (readOnly, destructive, idempotent, openWorld) as the catalogue exports them.
TABLE = {
    "delete_file": (False, True, True, False),  # deleting again removes nothing more
    "move_file": (False, True, True, False),  # the source is gone: a repeat moves nothing
    "edit_file": (False, True, False, False),
    "write_file": (False, True, False, False),  # mode=append adds on every repeat
    "read_file": (True, False, True, False),
    "shell_exec": (False, True, False, False),
    "http_get": (True, False, True, True),
    "http_post": (False, False, False, True),
    "http_request": (False, True, False, True),
    "web_fetch": (True, False, True, True),
    "memory_delete": (False, True, True, False),
    "snippet_save": (False, False, True, False),
}


def _hints(definition: dict[str, Any]) -> tuple[bool, bool, bool, bool]:
    a = definition["annotations"]
    return (a["readOnlyHint"], a["destructiveHint"], a["idempotentHint"], a["openWorldHint"])


def test_the_builtin_table() -> None:
    exported = {d["name"]: d for d in Catalogue().export("mcp")}
    assert {name: _hints(exported[name]) for name in TABLE} == TABLE
    for name, definition in exported.items():
        read_only, destructive, _, open_world = _hints(definition)
        assert not (read_only and destructive), name  # destructive means: not read-only
        if definition.get("name", "").startswith(("http_", "web_")):
            assert open_world, name


def _broker(mode: str) -> Any:
    policy = SimpleNamespace(tool_visible=lambda name, profile=None: True)
    return SimpleNamespace(catalogue=Catalogue(), policy=policy, sandbox_mode=mode)


def _open_world(broker: Any) -> dict[str, bool]:
    defs = server.tool_definitions(broker)
    return {t.name: bool(t.annotations and t.annotations.open_world_hint) for t in defs}


@pytest.mark.parametrize("walled", [True, False])
def test_shell_open_world_follows_the_sandbox(
    monkeypatch: pytest.MonkeyPatch, walled: bool
) -> None:
    monkeypatch.setattr(server, "_host_walls_network", lambda: walled)
    best_effort = _open_world(_broker("best_effort"))
    # Without a network wall (best_effort on a host with neither namespaces nor seccomp)
    # a program has the host's network: open world.
    assert best_effort["shell_exec"] is (not walled)
    # strict refuses to run without them: never open world.
    assert _open_world(_broker("strict"))["shell_exec"] is False
    # Benign control: tools that run no programs keep their manifest's hint.
    assert best_effort["read_file"] is False
    assert best_effort["http_get"] is True
