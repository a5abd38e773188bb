from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.catalogue import EXPORT_FORMATS, Catalogue, export_tool, load_manifest
from runtime.errors import ManifestError, ToolNotFound
from runtime.models import ToolSpec


def spec(name: str = "echo", **kw: Any) -> ToolSpec:
    data: dict[str, Any] = {
        "name": name,
        "description": "Echo the arguments.",
        "category": "custom",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        "result": {"type": "object"},
        "backend": "mock",
        "hints": {"read_only": True, "idempotent": True},
    }
    data.update(kw)
    return ToolSpec.model_validate(data)


def test_register_get_list_unregister() -> None:
    cat = Catalogue(builtins=False)
    cat.register(spec("b"))
    cat.register(spec("a", category="data"))
    assert [s.name for s in cat.list()] == ["a", "b"]
    assert [s.name for s in cat.list_by_category("data")] == ["a"]
    assert cat.get("a").category == "data"
    with pytest.raises(ManifestError, match="already registered"):
        cat.register(spec("a"))
    cat.register(spec("a", description="new"), replace=True)
    assert cat.get("a").description == "new"
    assert cat.unregister("a").name == "a"
    with pytest.raises(ToolNotFound):
        cat.get("a")
    with pytest.raises(ToolNotFound):
        cat.unregister("a")


@pytest.mark.parametrize("name", ["", "a b", "x" * 65, "tool.name", "ünï", "a/b"])
def test_names_must_match_pattern(name: str) -> None:
    with pytest.raises(ValueError, match="must match"):
        spec(name)


def test_stats() -> None:
    cat = Catalogue(builtins=False)
    cat.register(spec("a"))
    cat.record_call("a", success=True, duration_ms=2.0)
    cat.record_call("a", success=False, duration_ms=4.0)
    stats = cat.stats()
    assert stats["total"] == 1
    assert stats["calls"]["a"] == {"count": 2, "failures": 1, "mean_duration_ms": 3.0}
    assert stats["by_category"] == {"custom": 1}


def test_exports() -> None:
    s = spec("a", hints={"read_only": True, "destructive": False, "open_world": True})
    assert export_tool(s, "openai") == {
        "type": "function",
        "function": {"name": "a", "description": s.description, "parameters": s.parameters},
    }
    responses = export_tool(s, "openai-responses")
    assert responses["type"] == "function" and responses["name"] == "a"
    assert export_tool(s, "anthropic")["input_schema"] == s.parameters
    mcp = export_tool(s, "mcp")
    assert mcp["inputSchema"] == s.parameters
    assert mcp["outputSchema"] == {"type": "object"}
    assert mcp["annotations"]["readOnlyHint"] is True
    assert mcp["annotations"]["openWorldHint"] is True
    assert mcp["annotations"]["destructiveHint"] is False
    native = export_tool(s, "native")
    assert native["category"] == "custom"
    for fmt in EXPORT_FORMATS:
        json.dumps(export_tool(s, fmt))


def write(folder: Path, name: str, data: Any) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_user_folder_manifest_errors_name_file_and_field(tmp_path: Path) -> None:
    good = spec("ok").model_dump(mode="json", exclude={"source"})
    write(tmp_path, "ok.json", good)
    assert [s.name for s in Catalogue(builtins=False, folders=[tmp_path]).list()] == ["ok"]

    bad = dict(good, name="bad", parameters={"type": "object", "properties": {"x": {"type": 1}}})
    path = write(tmp_path, "bad.json", bad)
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert "bad.json" in info.value.message and "parameters" in info.value.message
    path.unlink()

    path = write(tmp_path, "broken.json", "{not json")
    with pytest.raises(ManifestError, match=r"broken\.json: not valid JSON"):
        Catalogue(builtins=False, folders=[tmp_path])
    path.unlink()

    # json's C scanner recurses per level: a manifest nested past the interpreter's
    # limit raised RecursionError (a traceback at every front door), not ManifestError.
    path = write(
        tmp_path,
        "deep.json",
        '{"name": "deep", "parameters": ' + "[" * 100_000 + "]" * 100_000 + "}",
    )
    with pytest.raises(ManifestError, match=r"deep\.json: not valid JSON: nested too deeply"):
        Catalogue(builtins=False, folders=[tmp_path])
    path.unlink()

    write(tmp_path, "extra.json", dict(good, name="extra", colour="blue"))
    with pytest.raises(ManifestError) as info:
        Catalogue(builtins=False, folders=[tmp_path])
    assert info.value.details["field"] == "colour"


def test_duplicate_names_across_folders(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    good = spec("dup").model_dump(mode="json", exclude={"source"})
    write(tmp_path / "a", "dup.json", good)
    write(tmp_path / "b", "dup.json", good)
    with pytest.raises(ManifestError, match="already defined"):
        Catalogue(builtins=False, folders=[tmp_path / "a", tmp_path / "b"])


def test_arg_roles_must_name_parameters(tmp_path: Path) -> None:
    data = spec("r").model_dump(mode="json", exclude={"source"})
    data["arg_roles"] = {"nope": "read_path"}
    path = write(tmp_path, "r.json", data)
    with pytest.raises(ManifestError, match="not a parameter"):
        load_manifest(path)


def test_subprocess_tool_needs_an_entry(tmp_path: Path) -> None:
    data = spec("s", backend="subprocess").model_dump(mode="json", exclude={"source"})
    path = write(tmp_path, "s.json", data)
    with pytest.raises(ManifestError, match="needs 'entry'"):
        load_manifest(path)


def test_user_folders_cannot_declare_host_tools(tmp_path: Path) -> None:
    data = spec("h", backend="host", entry="mod:fn").model_dump(mode="json", exclude={"source"})
    write(tmp_path, "h.json", data)
    (tmp_path / "mod.py").write_text("def fn(args, ctx):\n    return {}\n")
    with pytest.raises(ManifestError, match="cannot use the 'host' backend"):
        Catalogue(builtins=False, folders=[tmp_path])


def test_entry_is_one_lookup_of_spec_validators_and_backend() -> None:
    cat = Catalogue(builtins=False)
    cat.register(spec("a"))
    entry = cat.entry("a")
    assert entry.spec is cat.get("a")
    assert entry.args is cat.argument_validator("a")
    assert entry.result is cat.result_validator("a") and entry.result is not None
    assert entry.backend == "mock" and type(entry.backend) is str
    cat.register(spec("a", description="new"), replace=True)
    assert cat.entry("a").spec.description == "new" and cat.entry("a") is not entry
    with pytest.raises(ToolNotFound):
        cat.entry("nope")
