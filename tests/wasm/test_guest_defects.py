"""Defects found by hunting the wasm data tools against their references (CPython's csv and
re, the guest ABI's own documentation), each pinned by the input that showed it."""

from __future__ import annotations

import csv
import hashlib
import io
import re
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from runtime.backends.wasm import WasmBackend, load_custom_module
from runtime.errors import InvalidArguments, ManifestError, SandboxError, ToolFailed
from runtime.shapes import DEFAULT_LIMITS, INT_MAX, INT_MIN, normalize_call
from runtime.validation import compile_schema
from tests.wasm.test_regex import python_search

from .conftest import ECHO_WAT, call, request, spec_of, wat_tool

pytestmark = pytest.mark.wasm


def test_csv_memory_is_linear_in_escaped_quotes(backend: WasmBackend) -> None:
    # Each quoted field with a doubled quote kept a copy buffer the size of the rest of the
    # text: 5,000 such fields in 35 KB ran a 64 MiB guest out of memory (resource_limit).
    text = "h\n" + '"a""b"\n' * 20_000
    result = call(backend, "csv_to_json", {"text": text}, wasm_memory_mb=16)
    assert result["rows"] == list(csv.DictReader(io.StringIO(text, newline="")))
    row = ",".join(['"x""y"'] * 20_000)
    result = call(backend, "csv_to_json", {"text": row, "header": False}, wasm_memory_mb=16)
    assert result["rows"] == list(csv.reader(io.StringIO(row, newline="")))


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        # {,n} is {0,n} and {,} is {0,} in Python; both were read as literal text.
        ("a{,3}", "aaaa"),
        ("a{,}", "aaa"),
        ("(?:ab){,2}?c", "ababc"),
        ("x{,2}y", "x{,2}y xy"),
        # Not quantifiers: literal braces, as in Python.
        ("a{}", "a{}"),
        ("a{,x}", "a{,x}"),
        ("a{1,2", "a{1,2"),
        ("a*{,x", "aa{,x"),
        ("a*{1x", "aa{1x"),
        # Octal escapes: \0 takes up to two more octal digits, \1-\7 with two more is one
        # too, and in a class any \0-\7 starts one; \01 and \012 were NUL then digits.
        ("\\01", "\x01"),
        ("\\012", "a\nb"),
        ("\\08", "\x008"),
        ("\\101\\102", "xAB"),
        ("[\\01]", "\x01"),
        ("[\\1-\\3]+", "\x00\x01\x02\x03\x04"),
        ("[\\101-\\132]+", "abcXYZ"),
        # A loop iteration that matches empty ends the loop (Python's rule): the empty
        # alternative first means the empty match, not the longest run of 'a'.
        ("(|a)*", "aa"),
        ("(|a)+", "aa"),
        ("(?:|a)*b", "aab"),
        ("(a|)*", "aa"),
        ("(a*)*", "aab"),
        ("(|a)*?b", "aab"),
        ("(?:a?)+?b", "aab"),
        ("(?:(|a)*)*", "aa"),
        ("(?:|a){2,}", "aaa"),
        ("(?:a|()){2,}", "aaa"),
    ],
)
def test_regex_matches_python(backend: WasmBackend, pattern: str, text: str) -> None:
    assert call(backend, "regex_match", {"pattern": pattern, "text": text}) == python_search(
        pattern, text
    )


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("{,3}", "nothing to repeat"),  # was the literal text "{,3}"
        ("{2}a", "nothing to repeat"),
        ("a|{1,}", "nothing to repeat"),
        ("a*{,2}", "multiple repeat"),
        ("\\400", "octal escape value outside of range"),
        ("[\\477]", "octal escape value outside of range"),
        ("\\12", "backreferences are not supported"),
        # Python 3.11's possessive quantifiers: not linear-time here, and "multiple repeat"
        # named the wrong thing.
        ("a*+", "possessive quantifiers"),
        ("x{1,2}+", "possessive quantifiers"),
        # A class shorthand cannot bound a range (it was read as three items).
        ("[\\d-z]", "bad character range"),
        ("[^\\W-a]", "bad character range"),
    ],
)
def test_regex_refuses_clearly(backend: WasmBackend, pattern: str, fragment: str) -> None:
    if "possessive" not in fragment:  # Python 3.11 has them; this engine refuses them
        with pytest.raises(re.error):
            re.compile(pattern)
    with pytest.raises(ToolFailed, match="invalid pattern") as info:
        call(backend, "regex_match", {"pattern": pattern, "text": "aaa"})
    assert fragment in info.value.message


def test_custom_module_pin_in_upper_case_hex(backend: WasmBackend, tmp_path: Path) -> None:
    # Hex is hex in either case (PowerShell's Get-FileHash prints upper case): registration's
    # check accepted such a pin, and then every call was refused as not matching it.
    digest = hashlib.sha256(wasmtime.wat2wasm(ECHO_WAT)).hexdigest()
    spec = wat_tool(tmp_path, "upper", ECHO_WAT, sha256=digest.upper())
    assert load_custom_module(spec).sha256 == digest
    assert backend.run_sync(request(spec, {"x": 1})).result == {"ok": True}
    spec = wat_tool(tmp_path, "wrong", ECHO_WAT, sha256="A" * 64)
    with pytest.raises(SandboxError, match="sha256 pin"):
        backend.run_sync(request(spec, {}))


@pytest.mark.parametrize("pointer", ["/missing/a~2", "/a/x/~", "/a/0/~9/b", "/zz~"])
def test_json_query_malformed_pointer_is_refused_wherever_it_is(
    backend: WasmBackend, pointer: str
) -> None:
    # RFC 6901: '~' is followed by '0' or '1'. The check ran only on the tokens walked, so
    # a malformed token after a missing member came back as found=false.
    with pytest.raises(ToolFailed, match="'~' must be followed by '0' or '1'"):
        call(backend, "json_query", {"data": {"a": [1]}, "pointer": pointer})


def test_regex_repeats_of_nothing_compile_at_once(backend: WasmBackend) -> None:
    # Repeats of a sub-pattern that compiles to nothing were expanded anyway: this 40-char
    # pattern cost 10^12 compiler steps and ran out of fuel (2e9 instructions, ~15 s of CPU)
    # before reading the text. Now it matches within a small fuel budget. (Python's own re
    # takes minutes on these two, so the expected results are written out.)
    pattern = "(?:(?:(?:(?:){1000}){1000}){1000}){1000}"
    out = call(backend, "regex_match", {"pattern": pattern, "text": "aaa"}, wasm_fuel=20_000_000)
    assert out == {"matched": True, "match": "", "start": 0, "end": 0}
    pattern = "(?:(?:(?:a{0}){1000}){1000}){1000}b"
    out = call(backend, "regex_match", {"pattern": pattern, "text": "ab"}, wasm_fuel=20_000_000)
    assert out == {"matched": True, "match": "b", "start": 1, "end": 2}


@pytest.mark.parametrize(
    ("wat", "reason"),
    [
        (ECHO_WAT.replace("(module", "(module (table 100000000 funcref)", 1), "table"),
        (ECHO_WAT.replace("(module", "(module (memory $second 1)", 1), "memory"),
    ],
    ids=["table", "second-memory"],
)
def test_module_past_the_engine_limits_names_why(
    backend: WasmBackend, tmp_path: Path, wat: str, reason: str
) -> None:
    # Valid wasm that the engine's pooling allocator cannot give an instance (a table of 10^8
    # elements, a second memory) was reported as just "not a valid wasm module".
    spec = wat_tool(tmp_path, "limits", wat)
    # Refused when its manifest loads (the same engine settings as the backend's) ...
    with pytest.raises(ManifestError, match="not a valid wasm module") as loading:
        load_custom_module(spec)
    assert f"module {reason} does not fit" in loading.value.message
    # ... and by a call that reaches it anyway, as the call's sandbox_error.
    with pytest.raises(SandboxError, match="not a valid wasm module") as info:
        backend.run_sync(request(spec, {}))
    assert f"module {reason} does not fit" in info.value.message


def test_csv_quote_errors_name_record_field_and_offset(backend: WasmBackend) -> None:
    # "malformed quoted field (record 2)" named neither the field nor the rule broken.
    cases = {
        'a,b\n1,"2"   \n': "text after its closing quote (record 2, field 2, character 9)",
        'é,b\n1,"x\n': "the quote is never closed (record 2, field 2, character 6)",
        '"a","b"x\n': "text after its closing quote (record 1, field 2, character 7)",
    }
    for text, fragment in cases.items():
        with pytest.raises(ToolFailed) as info:
            call(backend, "csv_to_json", {"text": text})
        assert fragment in info.value.message


def test_csv_delimiter_schema_accepts_exactly_what_the_guest_does(backend: WasmBackend) -> None:
    # The schema took any one character; the guest refuses a quote, CR, LF and non-ASCII,
    # which reached the tool as tool_error instead of invalid_arguments naming the rule.
    validator = compile_schema(spec_of("csv_to_json").parameters)
    for code in [*range(0x100), 0x2028, 0x1F600]:
        delimiter = chr(code)
        arguments = {"text": "", "delimiter": delimiter}  # no text to trip over
        try:
            validator.validate_arguments("csv_to_json", arguments)
            schema_ok = True
        except InvalidArguments as exc:
            assert exc.details["rule"] == "pattern"
            schema_ok = False
        try:
            call(backend, "csv_to_json", arguments)
            guest_ok = True
        except ToolFailed:
            guest_ok = False
        assert schema_ok == guest_ok, repr(delimiter)


def test_json_parse_names_a_leading_bom(backend: WasmBackend) -> None:
    # CPython: "Unexpected UTF-8 BOM (decode using utf-8-sig)"; the guest said "expecting
    # value", which sends the caller looking for a syntax error that is not there.
    with pytest.raises(ToolFailed, match=r"expecting value, found a UTF-8 byte order mark"):
        call(backend, "json_parse", {"text": "\ufeff[1]"})
    # Anywhere else it is what it is: a character outside the grammar, or inside a string.
    with pytest.raises(ToolFailed, match="extra data"):
        call(backend, "json_parse", {"text": "[1]\ufeff"})
    assert call(backend, "json_parse", {"text": '"\ufeff"'}) == {"data": "\ufeff"}


@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("json_stringify", {}),
        ("json_query", {"pointer": "/0"}),
        ("json_stringify", {"pretty": True}),
    ],
)
def test_too_deep_data_names_the_argument(
    backend: WasmBackend, tool: str, extra: dict[str, Any]
) -> None:
    # The schema takes any value; the guests' parser stops at 127 levels. The message named a
    # line and column of the host's encoding of the arguments ("line 1 column 522"), which the
    # caller never wrote, and not the argument.
    value: Any = 0
    for _ in range(600):
        value = [value]
    with pytest.raises(ToolFailed) as info:
        call(backend, tool, {"data": value, **extra})
    assert info.value.message == "argument 'data': nesting too deep (limit 127 levels)"


@pytest.mark.parametrize(
    "pointer",
    [
        "",
        "/",
        "//",
        "/a",
        "/a~0b/~1",
        "/~01",
        "a",
        "a/b",
        "~0",
        "/~",
        "/a~2",
        "/~0~",
        "/é/0",
        " /a",
    ],
)
def test_json_query_pointer_schema_accepts_exactly_what_the_guest_does(
    backend: WasmBackend, pointer: str
) -> None:
    # The schema took any string; the guest refuses a pointer that is not empty and does not
    # start with '/', or has a '~' not followed by 0 or 1: that came back as tool_error, not
    # invalid_arguments naming the rule.
    validator = compile_schema(spec_of("json_query").parameters)
    arguments = {"data": {"a": 1}, "pointer": pointer}
    try:
        validator.validate_arguments("json_query", arguments)
        schema_ok = True
    except InvalidArguments as exc:
        assert exc.details["rule"] == "pattern"
        schema_ok = False
    try:
        call(backend, "json_query", arguments)
        guest_ok = True
    except ToolFailed:
        guest_ok = False
    assert schema_ok == guest_ok


def _nested(levels: int) -> Any:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("tool", ["json_stringify", "json_query"])
def test_json_tools_document_the_argument_limits_json_parse_can_exceed(
    backend: WasmBackend, tool: str
) -> None:
    # json_parse gives back integers past 64 bits and documents to 127 levels; handed on to
    # json_query or json_stringify, the runtime's argument checks refuse them
    # (invalid_arguments), which neither manifest said. The limits named are the ones applied.
    description = spec_of(tool).description
    levels = DEFAULT_LIMITS.max_depth - 1  # the arguments object is the first level
    assert f"at most {levels} levels of nesting" in description
    assert "-2**63..2**64-1" in description and (INT_MIN, INT_MAX) == (-(2**63), 2**64 - 1)
    extra = {"pointer": ""} if tool == "json_query" else {}
    parsed = call(backend, "json_parse", {"text": "[" * 64 + "]" * 64})["data"]
    for data in (parsed, [INT_MAX + 1], [INT_MIN - 1]):
        with pytest.raises(InvalidArguments):
            normalize_call({"tool": tool, "arguments": {"data": data, **extra}})
    for data in (_nested(levels), [INT_MAX, INT_MIN]):
        normalize_call({"tool": tool, "arguments": {"data": data, **extra}})
        call(backend, tool, {"data": data, **extra})
