"""Arguments sent as a JSON string (OpenAI chat and Responses always, any shape may) get the
value check a call's object arguments get (``runtime/shapes.py`` ``_check_value``). The check
ran on the call before the string was decoded: an integer past 64 bits in OpenAI's
``arguments`` failed later as internal_error (exit 70, msgpack's OverflowError and a
traceback) where the native shape was invalid_arguments (65)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidArguments
from runtime.shapes import parse_call_bytes
from tests.cli.test_cli import run

BIG = 18446744073709551616  # 2**64
ARGS = {"path": "a.txt", "offset": BIG}


def _shapes(args: Any) -> list[tuple[str, dict[str, Any], str]]:
    """Every shape carrying ``args``: (name, call, JSONPath of the arguments)."""
    return [
        ("native", {"tool": "read_file", "arguments": args}, "$.arguments"),
        (
            "openai",
            {"type": "function", "id": "c1", "function": {"name": "read_file", "arguments": args}},
            "$.function.arguments",
        ),
        (
            "openai-responses",
            {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": args},
            "$.arguments",
        ),
        (
            "anthropic",
            {"type": "tool_use", "id": "c1", "name": "read_file", "input": args},
            "$.input",
        ),
        ("mcp", {"name": "read_file", "arguments": args}, "$.arguments"),
        (
            "mcp-request",
            {"method": "tools/call", "params": {"name": "read_file", "arguments": args}},
            "$.params.arguments",
        ),
    ]


CASES = [
    pytest.param(call, where, id=f"{name}-{form}")
    for form, args in (("object", ARGS), ("string", json.dumps(ARGS)))
    for name, call, where in _shapes(args)
]


@pytest.mark.parametrize(("call", "where"), CASES)
def test_an_integer_past_64_bits_is_invalid_arguments_in_every_shape(
    call: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidArguments, match="64-bit range") as info:
        parse_call_bytes(json.dumps(call))
    assert info.value.details["path"] == f"{where}.offset"


def test_a_nested_negative_integer_in_string_arguments_is_found() -> None:
    # json_stringify ran it (the native shape refused): the checks differed by shape.
    raw = json.dumps({"value": {"list": [1, -(2**63) - 1]}})
    call = {"type": "function_call", "name": "json_stringify", "arguments": raw}
    with pytest.raises(InvalidArguments, match="64-bit range") as info:
        parse_call_bytes(json.dumps(call))
    assert info.value.details["path"] == "$.arguments.value.list[1]"
    assert info.value.details["rule"] == "integer"


@pytest.mark.parametrize(("call", "where"), [c for c in CASES if "string" in c.id])
def test_cli_exits_65_not_70(call: dict[str, Any], where: str, tmp_path: Path) -> None:
    proc = run(
        "exec", "-", "--workspace", str(tmp_path / "ws"), cwd=tmp_path, stdin=json.dumps(call)
    )
    assert proc.returncode == 65, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{where}.offset: integer outside the 64-bit range" in proc.stderr + proc.stdout
