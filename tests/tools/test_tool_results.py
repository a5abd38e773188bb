"""Ordinary calls of every tool: the arguments pass the manifest's parameter schema and the
result passes its result schema (the broker validates both)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from runtime.models import ToolSpec
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry

TOOLS_DIR = builtin_tools_dir()

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "a.txt"}),
    ("read_file", {"path": "a.txt", "offset": 2, "limit": 1}),
    ("read_file", {"path": "a.txt", "encoding": "base64"}),
    ("write_file", {"path": "new/b.txt", "content": "hi"}),
    (
        "write_file",
        {
            "path": "a.txt",
            "content": base64.b64encode(b"\0").decode(),
            "encoding": "base64",
            "mode": "append",
        },
    ),
    ("edit_file", {"path": "a.txt", "old_string": "one", "new_string": "1"}),
    ("list_files", {}),
    ("list_files", {"path": ".", "recursive": True, "pattern": "*.py", "limit": 5}),
    ("delete_file", {"path": "a.txt"}),
    ("delete_file", {"path": "pkg", "recursive": True}),
    ("move_file", {"source": "a.txt", "destination": "c.txt"}),
    ("get_file_info", {"path": "a.txt"}),
    ("get_file_info", {"path": "missing"}),
    ("get_file_info", {"path": "link"}),
    ("file_search", {"pattern": "*.py"}),
    ("file_search", {"pattern": "*", "type": "dir", "max_depth": 1, "limit": 100}),
    ("code_query", {"query": "main"}),
    ("code_query", {"query": "*.py", "type": "file", "path": "pkg", "limit": 3}),
    ("shell_exec", {"command": "echo hi", "cwd": "pkg", "timeout_s": 5, "env": {"X": "1"}}),
    ("shell_exec", {"command": "kill -9 $$"}),
    ("current_time", {}),
    ("current_time", {"timezone": "America/New_York"}),
    ("sleep", {"seconds": 0}),
    ("get_env", {"key": "NOPE"}),
    ("set_env", {"key": "K", "value": "v"}),
    ("set_env", {"key": "K", "value": None}),
    (
        "snippet_save",
        {"name": "s", "code": "x", "tags": ["t"], "language": "python", "description": "d"},
    ),
    ("snippet_load", {"name": "s"}),
    ("snippet_list", {"tags": ["t"], "language": "python", "limit": 5}),
    ("snippet_delete", {"name": "s"}),
    ("memory_write", {"content": "c", "key": "k", "category": "insight", "tags": ["t"]}),
    ("memory_read", {"key": "k"}),
    ("memory_search", {"query": "c", "category": "insight", "tags": ["t"], "limit": 3}),
    ("memory_delete", {"key": "k"}),
    ("ask_user", {"question": "q?"}),
    ("ask_user", {"question": "q?", "options": ["a", "b"]}),
    ("request_confirmation", {"message": "ok?", "stage_name": "prd"}),
    ("review_with_feedback_content", {"title": "t", "content": "c", "prompt": "p"}),
]


def _spec(name: str) -> tuple[ToolSpec, Path]:
    (path,) = TOOLS_DIR.glob(f"*/{name}.json")
    return ToolSpec.model_validate(json.loads(path.read_text())), path


@pytest.mark.parametrize(
    ("name", "args"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)]
)
def test_call_matches_schemas(name: str, args: dict[str, Any], ws: Path, tmp_path: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\n")
    (ws / "pkg").mkdir()
    (ws / "pkg" / "main.py").write_text("def main():\n    pass\n")
    (ws / "link").symlink_to("a.txt")
    ctx = ToolContext(
        workspace=ws,
        options={
            "session_env": {},
            "state_dir": tmp_path / "state",
            "ask_user": lambda q, o: o[0] if o else "free",
        },
    )
    spec, path = _spec(name)
    assert spec.entry is not None
    jsonschema_rs.validator_for(spec.parameters).validate(args)
    if name in ("snippet_load", "snippet_delete"):
        load_entry("memory:snippet_save", TOOLS_DIR / "memory")({"name": "s", "code": "x"}, ctx)
    if name in ("memory_read", "memory_delete"):
        load_entry("memory:memory_write", TOOLS_DIR / "memory")({"content": "c", "key": "k"}, ctx)
    if name == "request_confirmation":
        ctx.options["ask_user"] = lambda q, o: "yes"
    result = load_entry(spec.entry, path.parent)(args, ctx)
    assert spec.result is not None
    jsonschema_rs.validator_for(spec.result).validate(result)
    json.dumps(result)  # JSON-safe
