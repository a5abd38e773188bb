from __future__ import annotations

import pytest

from runtime.errors import InvalidArguments, ManifestError, ToolFailed
from runtime.validation import check_schema, compile_schema

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "nested": {"type": "object", "properties": {"k": {"type": "boolean"}}},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def test_valid_arguments_pass() -> None:
    compile_schema(SCHEMA).validate_arguments("t", {"path": "a", "limit": 3})


@pytest.mark.parametrize(
    ("args", "path", "rule"),
    [
        ({}, "$", "required"),
        ({"path": 3}, "$.path", "type"),
        ({"path": ""}, "$.path", "minLength"),
        ({"path": "a", "limit": 0}, "$.limit", "minimum"),
        ({"path": "a", "extra": 1}, "$", "additionalProperties"),
        ({"path": "a", "nested": {"k": "no"}}, "$.nested.k", "type"),
    ],
)
def test_errors_name_path_and_rule(args: dict[str, object], path: str, rule: str) -> None:
    with pytest.raises(InvalidArguments) as info:
        compile_schema(SCHEMA).validate_arguments("t", args)
    assert info.value.details["path"] == path
    assert info.value.details["rule"] == rule
    assert path in info.value.message and rule in info.value.message


def test_remote_ref_is_never_fetched() -> None:
    with pytest.raises(ManifestError, match="not fetched"):
        compile_schema({"$ref": "http://127.0.0.1:9/schema.json"})


def test_backtracking_pattern_refused_at_compile() -> None:
    with pytest.raises(ManifestError):
        compile_schema({"type": "string", "pattern": "(a)\\1"})


def test_pattern_is_linear_time() -> None:
    # Catastrophic for a backtracking engine; instant for the linear one.
    v = compile_schema({"type": "string", "pattern": "^(a+)+$"})
    assert v.errors("a" * 50_000 + "!")


def test_invalid_schema() -> None:
    with pytest.raises(ManifestError):
        check_schema({"type": "no-such-type"})
    with pytest.raises(ManifestError):
        check_schema([])


def test_result_mismatch_is_tool_failure() -> None:
    v = compile_schema({"type": "object", "required": ["content"]})
    with pytest.raises(ToolFailed, match="does not match its schema"):
        v.validate_result("read_file", {})
