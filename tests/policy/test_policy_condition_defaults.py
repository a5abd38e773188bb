"""``[[rules]] when`` conditions see an argument the call leaves out as its default in the
tool's schema (hunter: 'deny when mode equals "overwrite"' on write_file was bypassed by
omitting 'mode', whose manifest default is "overwrite"). Judged with the built-in
manifests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.catalogue import Catalogue
from runtime.errors import PolicyError
from runtime.models import ToolCall
from runtime.policy import Policy

_CATALOGUE = Catalogue()
_POLICY = Policy.from_toml(
    """version = 1
[categories]
file = "allow"
[[rules]]
id = "no-overwrite"
tools = ["write_file"]
action = "deny"
when = [{arg = "mode", equals = "overwrite"}]
[[rules]]
id = "ask-without-mode"
tools = ["edit_file"]
action = "ask"
when = [{arg = "nonexistent_arg", exists = false}]
"""
)


def _decide(tool: str, **arguments: Any) -> tuple[str, str]:
    d = _POLICY.decide(ToolCall(tool=tool, arguments=arguments), _CATALOGUE.get(tool))
    return d.action, d.rule


def test_a_condition_sees_the_schema_default_of_a_left_out_argument() -> None:
    assert _CATALOGUE.get("write_file").parameters["properties"]["mode"]["default"] == ("overwrite")
    assert _decide("write_file", path="n.txt", content="x") == ("deny", "no-overwrite")
    assert _decide("write_file", path="n.txt", content="x", mode="overwrite") == (
        "deny",
        "no-overwrite",
    )
    assert _decide("write_file", path="n.txt", content="x", mode="append")[0] == "allow"


def test_an_argument_without_a_default_stays_absent() -> None:
    assert _decide("edit_file", path="a.txt", old_text="a", new_text="b") == (
        "ask",
        "ask-without-mode",
    )


_OVERWRITE_RULE = """version = 1
[categories]
file = "allow"
[[rules]]
id = "no-overwrite"
tools = ["write_file"]
action = "deny"
when = [{arg = "mode", equals = "overwrite"}]
[[examples]]
tool = "write_file"
arguments = {path = "notes.txt", content = "x"}
match = "%s"
"""


def test_an_example_about_a_builtin_sees_its_defaults_at_load() -> None:
    """The load-time stand-in had parameters {"type": "object"}: no defaults, so the true
    example (no mode: overwrite: denied) failed at load and the false one loaded, then
    failed in 'policy check' and exec, whose broker uses the real manifest."""
    Policy.from_toml(_OVERWRITE_RULE % "deny", "p.toml")
    with pytest.raises(PolicyError, match=r"expected allow, got deny \(rule no-overwrite\)"):
        Policy.from_toml(_OVERWRITE_RULE % "allow", "p.toml")


_GREET_RULE = """version = 1
[tools.greet]
action = "allow"
[[rules]]
id = "no-hi"
tools = ["greet"]
action = "deny"
when = [{arg = "greeting", equals = "hi"}]
[[examples]]
tool = "greet"
arguments = {}
match = "%s"
"""


def _greet(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    manifest = {
        "name": "greet",
        "description": "Echo a greeting.",
        "category": "custom",
        "parameters": {
            "type": "object",
            "properties": {"greeting": {"type": "string", "default": "hi"}},
            "additionalProperties": False,
        },
        "backend": "subprocess",
        "command": ["/bin/echo", "{greeting}"],
        "sandbox": {"workspace": "none", "exec": True, "egress": False},
    }
    (folder / "greet.json").write_text(json.dumps(manifest))
    return folder


def test_an_example_about_a_folder_tools_default_is_decided_with_its_manifest(
    tmp_path: Path,
) -> None:
    """At load the folder tool's default ('greeting' is "hi") is unknown: a failure that a
    default could explain waits for the re-check with the manifest, which decides it."""
    catalogue = Catalogue(folders=[_greet(tmp_path)])
    true = Policy.from_toml(_GREET_RULE % "deny", "p.toml")  # held, not raised
    true.check_examples(lambda name: catalogue.get(name) if name in catalogue else None)
    false = Policy.from_toml(_GREET_RULE % "allow", "p.toml")
    with pytest.raises(PolicyError, match=r"expected allow, got deny \(rule no-hi\)"):
        false.check_examples(lambda name: catalogue.get(name) if name in catalogue else None)
    # Without the tool, the held failure is the answer, saying why it was held.
    with pytest.raises(PolicyError, match=r"expected deny, got allow") as info:
        true.check_examples(lambda name: None)
    assert "neither built in nor in the catalogue" in info.value.message
    assert info.value.details["field"] == "examples.0"


def test_a_folder_tool_example_failing_for_another_reason_still_fails_at_load() -> None:
    # The example gives the argument the rule reads: no default can change its decision.
    text = (_GREET_RULE % "allow").replace("arguments = {}", "arguments = {greeting = 'hi'}")
    with pytest.raises(PolicyError, match=r"expected allow, got deny \(rule no-hi\)"):
        Policy.from_toml(text, "p.toml")
