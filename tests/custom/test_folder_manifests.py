"""What a tool folder's manifest may declare: its category (the policy's allowances of the
built-in categories are not a plugin's to claim) and its limits (checked at load)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.catalogue import Catalogue, load_manifest
from runtime.errors import ManifestError
from runtime.models import ToolCall
from runtime.policy import Policy


def manifest(**kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "format_data",
        "description": "format data",
        "category": "custom",
        "parameters": {
            "type": "object",
            "properties": {"expr": {"type": "string"}},
            "required": ["expr"],
        },
        "backend": "subprocess",
        "command": ["sh", "-c", "{expr}"],
        "sandbox": {"workspace": "rw", "exec": True},
    }
    data.update(kw)
    return data


def write(folder: Path, data: dict[str, Any]) -> Path:
    path = folder / f"{data['name']}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("category", ["data", "file", "shell", "system", "network", "mcp"])
def test_a_folder_tool_cannot_claim_a_builtin_category(tmp_path: Path, category: str) -> None:
    path = write(tmp_path, manifest(category=category))
    with pytest.raises(ManifestError, match="'custom' category") as info:
        Catalogue(folders=[tmp_path])
    assert info.value.details["field"] == "category"
    assert str(path) in info.value.message


def test_a_custom_folder_tool_is_denied_by_the_default_policy(tmp_path: Path) -> None:
    write(tmp_path, manifest())
    spec = Catalogue(folders=[tmp_path]).get("format_data")
    call = ToolCall(call_id="c", tool="format_data", arguments={"expr": "rm -rf ./*"})
    assert Policy.default().decide(call, spec).action == "deny"  # allowed by name only


def test_a_wasm_folder_tool_may_say_data(tmp_path: Path) -> None:
    data = manifest(
        name="shout",
        category="data",
        backend="wasm",
        wasm={"module": "json", "export": "json_parse"},
        command=None,
        sandbox={},
    )
    data.pop("command")
    write(tmp_path, data)
    assert Catalogue(folders=[tmp_path]).get("shout").category == "data"


@pytest.mark.parametrize(
    ("limits", "field", "message"),
    [
        ({"memory_mb": "64"}, "limits.memory_mb", "valid integer"),
        ({"memory_mb": True}, "limits.memory_mb", "valid integer"),
        ({"memory": 64}, "limits.memory", "not a limit"),
        ({"timeout_s": -5}, "limits.timeout_s", "greater than 0"),
        ({"timeout_s": "5"}, "limits.timeout_s", "valid number"),
        ({"pids": 100_000}, "limits.pids", "less than or equal"),
    ],
)
def test_manifest_limits_are_checked_at_load(
    tmp_path: Path, limits: dict[str, Any], field: str, message: str
) -> None:
    path = write(tmp_path, manifest(limits=limits))
    with pytest.raises(ManifestError, match=message) as info:
        load_manifest(path)
    assert info.value.details["field"] == field
    assert str(path) in info.value.message and field in info.value.message
    with pytest.raises(ManifestError):
        Catalogue(folders=[tmp_path])


def test_valid_manifest_limits_load_and_cap_the_call(tmp_path: Path) -> None:
    write(tmp_path, manifest(limits={"memory_mb": 64, "timeout_s": 5}))
    spec = Catalogue(folders=[tmp_path]).get("format_data")
    policy = Policy.from_toml('[tools.format_data]\naction = "allow"\n')
    call = ToolCall(call_id="c", tool="format_data", arguments={"expr": "true"})
    limits = policy.decide(call, spec).limits
    assert (limits.memory_mb, limits.timeout_s) == (64, 5.0)


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf", "allOf", "enum", "not"])
def test_a_top_level_keyword_the_providers_refuse_is_refused_at_load(
    tmp_path: Path, keyword: str
) -> None:
    # Exported as is (runtime tools --format openai|anthropic, MCP), such a schema made the
    # provider reject every request that listed the tool, with all the others.
    values: dict[str, Any] = {
        "anyOf": [{"required": ["expr"]}, {"required": ["other"]}],
        "oneOf": [{"required": ["expr"]}],
        "allOf": [{"required": ["expr"]}],
        "enum": [{"expr": "a"}],
        "not": {"required": ["other"]},
    }
    parameters = {**manifest()["parameters"], keyword: values[keyword]}
    path = write(tmp_path, manifest(parameters=parameters))
    with pytest.raises(ManifestError, match="OpenAI and Anthropic APIs reject") as info:
        Catalogue(folders=[tmp_path])
    assert info.value.details["field"] == f"parameters.{keyword}"
    assert str(path) in info.value.message
    # Inside a property it stays allowed.
    inner = {"type": "object", "properties": {"expr": {"anyOf": [{"type": "string"}]}}}
    write(tmp_path, manifest(parameters=inner))
    assert Catalogue(folders=[tmp_path]).get("format_data").parameters == inner
