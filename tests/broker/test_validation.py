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


# A schema error's message quoted the whole offending value: regex_match with a
# 500,000-character pattern answered a 500,069-character message. The value is cut to its
# first 64 characters, its length said, the rule's words kept.
_LONG = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "maxLength": 2000},
        "a": {"type": "array", "maxItems": 2},
        "o": {"type": "object", "propertyNames": {"maxLength": 3}},
        "f": {"type": "array", "items": {"type": "string"}, "maxItems": 1},
    },
}


@pytest.mark.parametrize(
    ("args", "quote", "end"),
    [
        ({"s": "é" * 500_000}, '"' + "é" * 64 + '…" (500000 characters)', "longer than 2000"),
        (
            {"a": list(range(100_000))},
            "[" + ",".join(map(str, range(40)))[:63] + "… (588891 characters of JSON)",
            "has more than 2 items",
        ),
        ({"o": {"k" * 5000: 1}}, '"' + "k" * 64 + '…" (5000 characters)', "longer than 3"),
        # Cut in the text, not its JSON: never inside an escape.
        ({"s": 'a"\\' * 1000}, '"' + 'a\\"\\\\' * 21 + 'a…" (3000 characters)', "2000"),
    ],
)
def test_messages_quote_a_long_value_cut(args: dict[str, object], quote: str, end: str) -> None:
    with pytest.raises(InvalidArguments) as info:
        compile_schema(_LONG).validate_arguments("t", args)
    message = info.value.message
    assert quote in message and end in message and len(message) < 300
    assert all(len(e["message"]) < 300 for e in info.value.details["errors"])


def test_a_result_message_is_bounded_too() -> None:
    with pytest.raises(ToolFailed) as info:
        compile_schema(_LONG).validate_result("t", {"s": "x" * 10_000})
    assert '"' + "x" * 64 + '…" (10000 characters)' in info.value.message
    assert len(info.value.message) < 300


def test_a_value_quoted_otherwise_is_bounded_by_the_message_cap() -> None:
    # jsonschema-rs writes 1e300 out in full (300 digits), so the array's JSON is not found
    # in its message: the message keeps its start and its end.
    with pytest.raises(InvalidArguments) as info:
        compile_schema(_LONG).validate_arguments("t", {"a": [1e300] * 1000})
    message = info.value.message
    assert len(message) < 1200 and message.endswith("has more than 2 items [maxItems]")


def test_short_messages_are_unchanged() -> None:
    with pytest.raises(InvalidArguments) as info:
        compile_schema(_LONG).validate_arguments("t", {"s": 5})
    assert info.value.message == 't: $.s: 5 is not of type "string" [type]'


# A long key was quoted whole in the path: shell_exec with a 300,000-character env key
# answered a 300,052-character message, and details.path and every details.errors[].path
# repeated it. Each key a path names is cut as a quoted value is.
_KEYED = {"type": "object", "additionalProperties": {"type": "string"}}


def test_a_long_key_in_a_path_is_cut() -> None:
    key = "k" * 200_000
    with pytest.raises(InvalidArguments) as info:
        compile_schema(_KEYED).validate_arguments("t", {f"{key}{i}": i for i in range(5)})
    path = "$." + "k" * 64 + "… (200001 characters)"
    assert info.value.message == f't: {path}: 0 is not of type "string" [type]'
    assert info.value.details["path"] == path
    assert [e["path"] for e in info.value.details["errors"]] == [path] * 5


def test_a_path_through_many_long_keys_keeps_its_ends() -> None:
    nested: object = {"last": 1}
    for i in range(40):
        nested = {f"{i:02}" + "k" * 100: nested}
    deep = {"type": ["object", "string"], "additionalProperties": {"$ref": "#"}}
    with pytest.raises(InvalidArguments) as info:
        compile_schema(deep).validate_arguments("t", {"a": nested})
    path = info.value.details["path"]
    assert len(path) < 1100 and path.startswith("$.a.39kk") and path.endswith(".last")
    assert len(info.value.message) < 1200


def test_a_long_key_in_a_result_path_is_cut() -> None:
    with pytest.raises(ToolFailed) as info:
        compile_schema(_KEYED).validate_result("t", {"x" * 10_000: 1})
    assert "$." + "x" * 64 + "… (10000 characters): 1 is not" in info.value.message
    assert len(info.value.message) < 300


def test_short_keys_in_a_path_are_unchanged() -> None:
    with pytest.raises(InvalidArguments) as info:
        compile_schema(_KEYED).validate_arguments("t", {"k" * 64: 1})
    assert info.value.details["path"] == "$." + "k" * 64
