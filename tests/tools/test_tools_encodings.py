"""read_file and write_file take seed 001's ``encoding`` values (file_read: utf8 | ascii |
base64, Node's spellings): ``utf8`` is ``utf-8``; ``ascii`` is text that must be 7-bit."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from runtime import SyncBroker
from runtime.errors import ToolFailed
from runtime.models import ToolSpec
from runtime.toolkit import ToolContext, builtin_tools_dir

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]


def _spec(name: str) -> ToolSpec:
    return ToolSpec.model_validate_json(
        (builtin_tools_dir() / "files" / f"{name}.json").read_text()
    )


def _checked(name: str, result: dict[str, Any]) -> dict[str, Any]:
    spec = _spec(name)
    assert spec.result is not None
    jsonschema_rs.validator_for(spec.result).validate(result)
    return result


@pytest.mark.parametrize("encoding", ["utf8", "utf-8"])
def test_utf8_spellings(tool: Load, ctx: ToolContext, ws: Path, encoding: str) -> None:
    (ws / "a.txt").write_text("héllo\n", encoding="utf-8")
    r = _checked("read_file", tool("read_file")({"path": "a.txt", "encoding": encoding}, ctx))
    assert (r["content"], r["encoding"]) == ("héllo\n", "utf-8")
    w = tool("write_file")({"path": "b.txt", "content": "ça", "encoding": encoding}, ctx)
    assert _checked("write_file", w)["bytes_written"] == 3
    assert (ws / "b.txt").read_text(encoding="utf-8") == "ça"


def test_ascii_read(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "a.txt").write_text("plain\ntext\n", encoding="ascii")
    r = _checked("read_file", tool("read_file")({"path": "a.txt", "encoding": "ascii"}, ctx))
    assert (r["content"], r["encoding"], r["lines"]) == ("plain\ntext\n", "ascii", 2)
    (ws / "u.txt").write_text("plain\nnaïve\n", encoding="utf-8")
    with pytest.raises(ToolFailed) as exc:
        tool("read_file")({"path": "u.txt", "encoding": "ascii"}, ctx)
    assert exc.value.details["reason"] == "not_ascii" and "'ï'" in exc.value.message
    # Only the lines read count: the first line alone is ASCII.
    r = tool("read_file")({"path": "u.txt", "encoding": "ascii", "limit": 1}, ctx)
    assert r["content"] == "plain\n"


def test_ascii_write(tool: Load, ctx: ToolContext, ws: Path) -> None:
    w = tool("write_file")({"path": "a.txt", "content": "abc\n", "encoding": "ascii"}, ctx)
    assert _checked("write_file", w)["bytes_written"] == 4
    with pytest.raises(ToolFailed) as exc:
        tool("write_file")({"path": "b.txt", "content": "naïve", "encoding": "ascii"}, ctx)
    assert exc.value.details["reason"] == "not_ascii"
    assert not (ws / "b.txt").exists()


@pytest.mark.parametrize("name", ["read_file", "write_file"])
def test_schema_takes_the_seed_values_only(name: str) -> None:
    v = jsonschema_rs.validator_for(_spec(name).parameters)
    base = {"path": "a"} | ({"content": "x"} if name == "write_file" else {})
    for ok in ("utf-8", "utf8", "ascii", "base64"):
        assert v.is_valid(base | {"encoding": ok})
    for bad in ("latin-1", "UTF8", "binary", "hex"):
        assert not v.is_valid(base | {"encoding": bad})


def test_seed_example_through_the_sandbox(tmp_path: Path) -> None:
    """Seed 001's FileReadTool call, as its LLM would emit it, through the broker."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.py").write_text("print('hi')\n", encoding="utf-8")
    with SyncBroker(workspace=ws) as broker:
        r = broker.call(
            {"tool": "read_file", "arguments": {"path": "src/main.py", "encoding": "utf8"}}
        )
        assert r.success, r.error
        assert r.result is not None and r.result["content"] == "print('hi')\n"
        r = broker.call(
            {
                "tool": "write_file",
                "arguments": {"path": "out.txt", "content": "é", "encoding": "ascii"},
            }
        )
        assert not r.success and r.error is not None and r.error.type == "tool_error"
        assert json.loads(r.model_dump_json())["error"]["details"]["reason"] == "not_ascii"
