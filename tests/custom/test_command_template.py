from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.catalogue import Catalogue, load_manifest
from runtime.command_tool import ENTRY, fill_template, run_template
from runtime.errors import ManifestError, ToolFailed
from runtime.models import Limits
from runtime.toolkit import ToolContext, load_entry

TEMPLATE = ["grep", "-n", "--", "{pattern}", "{paths}"]


def manifest(**kw: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "grep_workspace",
        "description": "Search files in the workspace for a pattern.",
        "category": "custom",
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string"},
                "paths": {"type": "array", "items": {"type": "string"}},
                "count": {"type": "integer"},
            },
            "required": ["pattern"],
        },
        "backend": "subprocess",
        "command": TEMPLATE,
        "sandbox": {"workspace": "ro", "exec": True},
    }
    data.update(kw)
    return data


def test_fill_whole_items_lists_and_dashdash() -> None:
    argv = fill_template(TEMPLATE, {"pattern": "-rf", "paths": ["a.txt", "b c.txt"]})
    assert argv == ["grep", "-n", "--", "-rf", "a.txt", "b c.txt"]
    assert fill_template(TEMPLATE, {"pattern": "x"}) == ["grep", "-n", "--", "x"]


def test_option_injection_refused_before_dashdash() -> None:
    with pytest.raises(ToolFailed, match="may not start with '-'"):
        fill_template(["grep", "{pattern}", "f"], {"pattern": "--include=/etc/*"})


def test_embedded_placeholders_and_types() -> None:
    assert fill_template(["head", "--lines={count}"], {"count": 5}) == ["head", "--lines=5"]
    with pytest.raises(ToolFailed, match="required"):
        fill_template(["head", "--lines={count}"], {})
    with pytest.raises(ToolFailed, match="string, number or boolean"):
        fill_template(["x", "{a}"], {"a": {"nested": 1}})
    with pytest.raises(ToolFailed, match="NUL"):
        fill_template(["x", "{a}"], {"a": "a\0b"})


def test_shell_metacharacters_are_plain_argv(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello; world\n")
    ctx = ToolContext(
        workspace=tmp_path, limits=Limits(timeout_s=10), options={"command": TEMPLATE}
    )
    out = run_template({"pattern": "hello; rm -rf /", "paths": ["f.txt"]}, ctx)
    assert out["exit_code"] == 1 and out["stdout"] == ""  # no match, nothing ran
    out = run_template({"pattern": "hello;", "paths": ["f.txt"]}, ctx)
    assert out["exit_code"] == 0 and out["stdout"] == "1:hello; world\n"


def test_manifest_gets_the_runner_entry(tmp_path: Path) -> None:
    path = tmp_path / "grep.json"
    path.write_text(json.dumps(manifest()))
    spec = load_manifest(path)
    assert spec.entry == ENTRY
    assert load_entry(spec.entry, tmp_path) is run_template
    cat = Catalogue(builtins=False, folders=[tmp_path])
    assert cat.get("grep_workspace").command == TEMPLATE


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"command": ["{pattern}", "x"]}, "cannot be a placeholder"),
        ({"command": ["grep", "{nope}"]}, "not a parameter"),
        ({"command": []}, "non-empty"),
        ({"sandbox": {"workspace": "ro", "exec": False}}, "sandbox.exec"),
        ({"entry": "mod:fn"}, "either 'entry' or 'command'"),
    ],
)
def test_bad_templates_refused_at_load(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(manifest(**change)))
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


@pytest.mark.parametrize(
    ("template", "args"),
    [
        (["sort", "{name}.txt"], {"name": "--output=keep"}),
        (["cat", "{name}.txt"], {"name": "--help"}),
        (["cat", "{dir}/{name}"], {"dir": "-n", "name": "f"}),
        (["cat", "{dir}{name}"], {"dir": "", "name": "-A"}),
    ],
)
def test_option_injection_refused_at_the_start_of_a_longer_item(
    template: list[str], args: dict[str, Any]
) -> None:
    with pytest.raises(ToolFailed, match="may not start with '-'") as caught:
        fill_template(template, args)
    assert caught.value.details["reason"] == "option_injection"


def test_a_value_starting_a_longer_item_is_plain_after_dashdash_or_an_authors_dash() -> None:
    assert fill_template(["cat", "--", "{name}.txt"], {"name": "-x"}) == ["cat", "--", "-x.txt"]
    # The template's own '-' is the manifest author's option, whatever the value.
    assert fill_template(["head", "-{n}"], {"n": "-5"}) == ["head", "--5"]
    assert fill_template(["cat", "x{name}.txt"], {"name": "-y"}) == ["cat", "x-y.txt"]


def test_sort_output_injection_leaves_the_file_alone(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("precious\n")
    ctx = ToolContext(
        workspace=tmp_path,
        limits=Limits(timeout_s=10),
        options={"command": ["sort", "{name}.txt"]},
    )
    with pytest.raises(ToolFailed, match="option"):
        run_template({"name": "--output=keep"}, ctx)
    assert (tmp_path / "keep.txt").read_text() == "precious\n"
