"""``runtime exec``'s hint for ``Broker(prespawn_sandbox=...)`` (runtime/cli/_hint.py): true
only for a call whose tool's manifest declares the subprocess backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.cli._hint import sandboxed_tool


def _raw(obj: object) -> bytes:
    return json.dumps(obj).encode()


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({"tool": "shell_exec", "arguments": {"command": "echo hi"}}, True),
        ({"type": "tool_use", "id": "t", "name": "read_file", "input": {"path": "a"}}, True),
        ({"name": "json_parse", "arguments": {"text": "1"}}, False),  # wasm
        ({"tool": "ask_user", "arguments": {"question": "q"}}, False),  # host
        ({"tool": "no_such_tool", "arguments": {}}, False),
        ({"tool": "*", "arguments": {}}, False),  # not a tool name: never a glob
        ({"tool": "../tools/shell/shell_exec", "arguments": {}}, False),
    ],
)
def test_builtin_tools(call: object, expected: bool) -> None:
    assert sandboxed_tool(_raw(call)) is expected


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"tool": 1}', b"\xff"])
def test_calls_that_do_not_parse_are_no_hint(raw: bytes) -> None:
    assert sandboxed_tool(raw) is False


def test_a_tool_folder_is_searched_first(tmp_path: Path) -> None:
    manifest = {"name": "my_tool", "backend": "subprocess", "entry": "impl:run"}
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "my_tool.json").write_text(json.dumps(manifest))
    call = _raw({"tool": "my_tool", "arguments": {}})
    assert sandboxed_tool(call, [tmp_path]) is True
    assert sandboxed_tool(call) is False
    (tmp_path / "sub" / "my_tool.json").write_text(json.dumps({**manifest, "backend": "wasm"}))
    assert sandboxed_tool(call, [tmp_path]) is False
    (tmp_path / "sub" / "my_tool.json").write_text("{broken")
    assert sandboxed_tool(call, [tmp_path]) is False
    assert sandboxed_tool(call, [tmp_path / "absent"]) is False
