"""Every manifest in our folders is a valid ToolSpec whose entry resolves and whose schemas
are valid JSON Schema 2020-12, with least-privilege sandbox needs."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema_rs
import pytest

from runtime.models import BackendKind, ToolSpec, WorkspaceAccess
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry
from tests.tools.helpers import Load

TOOLS_DIR = builtin_tools_dir()
OWN_FOLDERS = ("files", "code", "shell", "system", "memory", "interaction")

MANIFESTS = sorted(p for folder in OWN_FOLDERS for p in (TOOLS_DIR / folder).glob("*.json"))

CONTRACT = {  # the catalogue: tool -> parameters that must exist
    "read_file": {"path", "offset", "limit", "encoding"},
    "write_file": {"path", "content", "encoding", "mode"},
    "edit_file": {"path", "old_string", "new_string", "replace_all"},
    "list_files": {"path", "recursive", "pattern", "limit"},
    "delete_file": {"path", "recursive"},
    "move_file": {"source", "destination", "overwrite"},
    "get_file_info": {"path"},
    "file_search": {"pattern", "path", "type", "max_depth", "limit"},
    "code_query": {"query", "type", "path", "limit"},
    "shell_exec": {"command", "cwd", "timeout_s", "env"},
    "current_time": {"timezone"},
    "sleep": {"seconds"},
    "get_env": {"key"},
    "set_env": {"key", "value"},
    "snippet_save": {"name", "code", "description", "language", "tags"},
    "snippet_load": {"name"},
    "snippet_list": {"tags", "language"},
    "ask_user": {"question", "options"},
}


def _load(path: Path) -> ToolSpec:
    return ToolSpec.model_validate(json.loads(path.read_text()))


def test_catalogue_is_complete() -> None:
    names = {p.stem for p in MANIFESTS}
    assert set(CONTRACT) <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_manifest_loads_and_entry_resolves(path: Path) -> None:
    spec = _load(path)
    assert spec.name == path.stem
    assert spec.entry is not None and callable(load_entry(spec.entry, path.parent))
    jsonschema_rs.meta.validate(spec.parameters)
    assert spec.parameters.get("$schema", "").endswith("2020-12/schema")
    assert spec.parameters["type"] == "object"
    assert spec.parameters["additionalProperties"] is False
    for name, prop in spec.parameters["properties"].items():
        assert prop.get("description"), f"{spec.name}.{name} has no description"
    assert spec.result is not None
    jsonschema_rs.meta.validate(spec.result)
    jsonschema_rs.validator_for(spec.parameters)  # compiles


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_contract_parameters(path: Path) -> None:
    spec = _load(path)
    want = CONTRACT.get(spec.name, set())
    assert want <= set(spec.parameters["properties"])


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.stem)
def test_least_privilege(path: Path) -> None:
    spec = _load(path)
    sb = spec.sandbox
    assert not sb.egress
    if spec.backend is BackendKind.HOST:
        assert sb.workspace is WorkspaceAccess.NONE and not sb.exec
    if spec.hints.read_only:
        assert sb.workspace is not WorkspaceAccess.WRITE
    if sb.exec:
        assert spec.name == "shell_exec"
    if sb.workspace is WorkspaceAccess.WRITE:
        assert not spec.hints.read_only
        assert set(spec.arg_roles.values()) & {"write_path", "read_write_path", "command"}
    for arg in spec.arg_roles:
        assert arg in spec.parameters["properties"]


def test_specific_roles() -> None:
    specs = {p.stem: _load(p) for p in MANIFESTS}
    assert specs["move_file"].arg_roles == {
        "source": "read_write_path",
        "destination": "write_path",
    }
    assert specs["edit_file"].arg_roles == {"path": "read_write_path"}
    assert specs["shell_exec"].arg_roles == {"command": "command", "cwd": "cwd", "env": "env"}
    assert specs["set_env"].arg_roles == {"key": "session_env"}
    assert specs["read_file"].arg_roles == {"path": "read_path"}
    assert specs["current_time"].sandbox.workspace is WorkspaceAccess.NONE
    assert specs["sleep"].sandbox.workspace is WorkspaceAccess.NONE
    for name in ("get_env", "set_env", "snippet_save", "snippet_load", "snippet_list", "ask_user"):
        assert specs[name].backend is BackendKind.HOST


def test_schemas_reject_unknown_and_bad_arguments() -> None:
    spec = _load(TOOLS_DIR / "files" / "read_file.json")
    v = jsonschema_rs.validator_for(spec.parameters)
    assert v.is_valid({"path": "a.txt", "offset": 3})
    assert not v.is_valid({"path": "a.txt", "bogus": 1})
    assert not v.is_valid({"path": "a.txt", "offset": 0})
    assert not v.is_valid({"path": "a.txt", "encoding": "latin-1"})
    fs = jsonschema_rs.validator_for(_load(TOOLS_DIR / "files" / "file_search.json").parameters)
    assert not fs.is_valid({"pattern": "*", "limit": 101})


def test_file_search_pattern_is_optional(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """file_search's ``pattern`` defaults to '*' (its manifest's default, seed 004's and
    tools/README's "same names and defaults"), but the manifest required it."""
    spec = _load(TOOLS_DIR / "files" / "file_search.json")
    assert jsonschema_rs.validator_for(spec.parameters).is_valid({"path": "."})
    (ws / "a.txt").write_text("a")
    assert [m["path"] for m in tool("file_search")({}, ctx)["matches"]] == ["a.txt"]


def test_readme_lists_every_tool() -> None:
    text = (TOOLS_DIR / "README.md").read_text()
    for path in MANIFESTS:
        assert f"`{path.stem}`" in text
