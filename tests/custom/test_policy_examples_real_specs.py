"""A policy's ``[[examples]]`` naming a folder tool are checked with its real manifest when a
broker is made with the catalogue: at load the policy knows only the built-in tools, and an
example decided with an invented spec (category ``custom``) could pass while the real tool
(a wasm folder tool may say ``data``) goes the other way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.broker import Broker
from runtime.catalogue import Catalogue
from runtime.errors import PolicyError
from runtime.policy import Policy

POLICY = """
[categories]
data = "allow"
custom = "deny"

[[examples]]
name = "{name}"
tool = "shout"
arguments = {{ text = "hi" }}
match = "{match}"
"""


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    manifest = {
        "name": "shout",
        "description": "parse",
        "category": "data",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "backend": "wasm",
        "wasm": {"module": "json", "export": "json_parse"},
    }
    (folder / "shout.json").write_text(json.dumps(manifest))
    return folder


def test_an_example_that_lies_about_a_folder_tool_stops_the_broker(tmp_path: Path) -> None:
    policy = Policy.from_toml(POLICY.format(name="never runs", match="deny"), "p.toml")
    # At load the example passes: the policy assumed an unknown tool is 'custom'.
    catalogue = Catalogue(folders=[_folder(tmp_path)])
    with pytest.raises(PolicyError, match=r"never runs.*expected deny, got allow") as info:
        Broker(workspace=tmp_path / "ws", policy=policy, catalogue=catalogue)
    assert info.value.details["field"] == "examples.0"
    assert "p.toml:" in info.value.message


def test_a_true_example_about_a_folder_tool_passes(tmp_path: Path) -> None:
    # At load the example needs its spec (the policy does not know the folder tool) ...
    text = POLICY.format(name="runs", match="allow")
    with pytest.raises(PolicyError, match="expected allow, got deny"):
        Policy.from_toml(text, "p.toml")
    policy = Policy.from_toml(
        text.replace('match = "allow"', 'match = "allow"\nspec = { category = "data" }'), "p.toml"
    )
    # ... and the broker, which knows it, agrees.
    Broker(
        workspace=tmp_path / "ws", policy=policy, catalogue=Catalogue(folders=[_folder(tmp_path)])
    )


def test_examples_of_tools_outside_the_catalogue_are_not_checked_again(tmp_path: Path) -> None:
    policy = Policy.from_toml(POLICY.format(name="no such tool here", match="deny"), "p.toml")
    Broker(workspace=tmp_path / "ws", policy=policy, catalogue=Catalogue(builtins=False))


def test_an_examples_own_spec_does_not_outrank_the_real_manifest(tmp_path: Path) -> None:
    text = POLICY.format(name="says custom", match="deny")
    policy = Policy.from_toml(
        text.replace('match = "deny"', 'match = "deny"\nspec = { category = "custom" }'), "p.toml"
    )
    with pytest.raises(PolicyError, match="says custom"):
        Broker(
            workspace=tmp_path / "ws",
            policy=policy,
            catalogue=Catalogue(folders=[_folder(tmp_path)]),
        )
