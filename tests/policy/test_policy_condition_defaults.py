"""``[[rules]] when`` conditions see an argument the call leaves out as its default in the
tool's schema (hunter: 'deny when mode equals "overwrite"' on write_file was bypassed by
omitting 'mode', whose manifest default is "overwrite"). Judged with the built-in
manifests."""

from __future__ import annotations

from typing import Any

from runtime.catalogue import Catalogue
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
