"""Each built-in data tool, through the backend: results, clear errors, usage."""

from __future__ import annotations

import base64
import hashlib
import json
import math

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime._depth import RESULT_MAX_DEPTH
from runtime.backends.wasm import WasmBackend
from runtime.errors import ResourceLimitExceeded, ToolFailed

from .conftest import call, request, spec_of

pytestmark = pytest.mark.wasm


def test_json_parse_roundtrip(backend: WasmBackend) -> None:
    text = '{"a": [1, 2.5, -3e2, true, false, null], "b": "\\u00e9\\ud83d\\ude00\\n", "c": {}}'
    assert call(backend, "json_parse", {"text": text}) == {"data": json.loads(text)}


def test_json_parse_big_ints_and_floats_as_cpython(backend: WasmBackend) -> None:
    text = "[123456789012345678901234567890, 0.1, 1e-400, 5e-324, -0.0, 1.7976931348623157e308]"
    assert call(backend, "json_parse", {"text": text})["data"] == json.loads(text)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("[1,", "expecting value: line 1 column 4 (char 3)"),
        ('{"a" 1}', "expecting ':' delimiter"),
        ("[1] x", "extra data"),
        ("NaN", "NaN is not JSON"),
        ("-Infinity", "Infinity is not JSON"),
        ('"\\ud800"', "lone UTF-16 surrogate"),
        ('"a\nb"', "invalid control character"),
        ("01", "extra data"),
        ("1" * 4301, "more than 4300 digits"),
        ("\ufeff[]", "expecting value"),
        ("", "expecting value"),
    ],
)
def test_json_parse_errors_are_clear(backend: WasmBackend, text: str, fragment: str) -> None:
    with pytest.raises(ToolFailed) as info:
        call(backend, "json_parse", {"text": text})
    assert fragment in info.value.message


# Each is handled by the guest's one-loop fast path or sent by it to the general parser
# (surrogate escapes, integers past the digit limit, an error after a long valid prefix):
# either way the result, or the error and its position, is the general parser's.
_FAST_PATH_EDGES = [
    '{"a" : 1, "b"\t:\n[true, false, null, -0.5e-3, "x\\u00e9\\n\\/"]}',
    '["\\ud83d\\ude00", "\\u20ac"]',
    "[1e2, 0." + "1" * 4301 + "]",
    "[" + "1" * 4301 + "e-4300]",  # past the integer digit limit, but not an integer
    "[" + "1" * 4300 + "]",
    "[" * 127 + "]" * 127,
    " [ ] ",
    '"plain"',
    "-0",
    "[" + "1," * 300 + "1]",
]
_FAST_PATH_ERRORS = [
    ("[" + "1," * 300 + "1,]", "expecting value: line 1 column 604 (char 603)"),
    ('{"a":1 "b":2}', "expecting ',' delimiter or '}': line 1 column 8 (char 7)"),
    ('["\\ud800"]', "lone UTF-16 surrogate"),
    ("[" + "1" * 4301 + "]", "more than 4300 digits"),
    ("[" * 128 + "]" * 128, "nesting too deep"),
    ('["a\tb"]', "invalid control character"),
    ("[1] x", "extra data"),
]


@pytest.mark.parametrize("text", _FAST_PATH_EDGES)
def test_json_parse_fast_path_edges(backend: WasmBackend, text: str) -> None:
    assert call(backend, "json_parse", {"text": text}) == {"data": json.loads(text)}


@pytest.mark.parametrize(("text", "fragment"), _FAST_PATH_ERRORS)
def test_json_parse_fast_path_leaves_errors_to_the_parser(
    backend: WasmBackend, text: str, fragment: str
) -> None:
    with pytest.raises(ToolFailed) as info:
        call(backend, "json_parse", {"text": text})
    assert fragment in info.value.message


def test_json_parse_depth_bomb_refused(backend: WasmBackend) -> None:
    with pytest.raises(ToolFailed) as info:
        call(backend, "json_parse", {"text": "[" * 1_000_000})
    assert "nesting too deep (limit 127 levels)" in info.value.message
    # The limit is exact: 127 levels parse (the result, {"data": ...}, nests 128: the broker's
    # limit for every result, runtime._depth.RESULT_MAX_DEPTH).
    assert RESULT_MAX_DEPTH == 128
    deep = "[" * 127 + "]" * 127
    assert call(backend, "json_parse", {"text": deep})["data"] == json.loads(deep)


def test_json_parse_out_of_range_float_refused(backend: WasmBackend) -> None:
    # CPython gives inf, which JSON cannot carry back: refused rather than silently inf.
    with pytest.raises(ToolFailed, match="out of the float range"):
        call(backend, "json_parse", {"text": "1e400"})


# 2**1024 - 2**970: halfway between the largest double and 2**1024, the first decimal that
# CPython's float() rounds to inf.
_INF_FROM = str(2**970 * (2**54 - 1))


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a":\n [1,\n 2,\n 1e400]}', "line 4 column 2 (char 16)"),
        ("[1, -1e400]", "line 1 column 5 (char 4)"),
        ("1E+309", "line 1 column 1 (char 0)"),
        ("[" + _INF_FROM + ".0]", "line 1 column 2 (char 1)"),
        ("[0.00" + _INF_FROM + "e311]", "line 1 column 2 (char 1)"),
        ("[" + str(int(_INF_FROM[:22]) + 1) + "e287]", "line 1 column 2 (char 1)"),
        ("[1e99999999999999999999999]", "line 1 column 2 (char 1)"),
        ('{"é": 9' + "9" * 400 + ".5}", "line 1 column 7 (char 6)"),
    ],
)
def test_json_parse_out_of_range_float_names_its_place(
    backend: WasmBackend, text: str, where: str
) -> None:
    """The guest refuses it where it reads it, as its other errors (the host's check of the
    result, which cannot say where the number was, was the only one)."""
    with pytest.raises(ToolFailed) as info:
        call(backend, "json_parse", {"text": text})
    message = info.value.message
    assert message.startswith("invalid JSON: number out of the float range")
    assert message.endswith(where)
    assert "numbers out of the float range" in spec_of("json_parse").description


@pytest.mark.parametrize(
    "text",
    [
        "[1.7976931348623157e308, -1.7976931348623158e308]",  # rounds to the largest double
        "[" + str(2**970 * (2**54 - 1) - 1) + ".9e0]",  # just below the halfway point
        "[" + _INF_FROM[:22] + "e287]",
        "[0.0e99999999999, 0e400, 1e-99999999999999999999, 0." + "0" * 400 + "1e400]",
        "[" + "1" * 4301 + "e-4000]",
    ],
)
def test_json_parse_largest_floats_still_parse(backend: WasmBackend, text: str) -> None:
    assert call(backend, "json_parse", {"text": text}) == {"data": json.loads(text)}


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(min_value=1, max_value=30),
    delta=st.sampled_from([-1, 0, 1]),
    tail=st.text("0123456789", max_size=3),
    point=st.integers(min_value=0, max_value=40),
    zeros=st.integers(min_value=0, max_value=3),
    shift=st.sampled_from([-1, 0, 1]),
    sign=st.sampled_from(["", "-"]),
)
def test_json_parse_overflow_exactly_as_cpython(
    backend: WasmBackend,
    k: int,
    delta: int,
    tail: str,
    point: int,
    zeros: int,
    shift: int,
    sign: str,
) -> None:
    """Digits around the boundary's, written every way (point anywhere, leading zeros in the
    fraction, any exponent): refused exactly when CPython's float() gives inf."""
    digits = str(max(1, int(_INF_FROM[:k]) + delta)) + tail
    point = min(point, len(digits))
    # 0.<digits> * 10**(309 + shift), written as <int>.<frac>e<exp>.
    exp = 309 + shift - point
    if point:
        mantissa = digits[:point] + ("." + digits[point:] if digits[point:] else "")
    else:
        mantissa = "0." + "0" * zeros + digits
        exp += zeros
    lexeme = f"{sign}{mantissa}e{exp}"
    text = f"[{lexeme}]"
    if math.isinf(float(lexeme)):
        with pytest.raises(ToolFailed, match=r"out of the float range.*line 1 column 2 \("):
            call(backend, "json_parse", {"text": text})
    else:
        assert call(backend, "json_parse", {"text": text}) == {"data": json.loads(text)}


def test_json_parse_size_bomb_refused_before_running(backend: WasmBackend) -> None:
    with pytest.raises(ResourceLimitExceeded) as info:
        call(backend, "json_parse", {"text": "[" + "1," * 600_000 + "1]"}, wasm_memory_mb=1)
    assert info.value.details["limit"] == "wasm_memory_mb"


def test_json_stringify_modes(backend: WasmBackend) -> None:
    data = {"b": [1, {"y": None, "x": "é\n\u0001"}], "a": [], "c": {}}
    out = call(backend, "json_stringify", {"data": data})["text"]
    assert out == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    out = call(backend, "json_stringify", {"data": data, "pretty": True, "sort_keys": True})
    assert out["text"] == json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True)


def test_json_query(backend: WasmBackend) -> None:
    data = {"a/b": [0, {"c~d": 5}], "": 7, "n": None}
    assert call(backend, "json_query", {"data": data, "pointer": "/a~1b/1/c~0d"}) == {
        "found": True,
        "value": 5,
    }
    assert call(backend, "json_query", {"data": data, "pointer": ""})["value"] == data
    assert call(backend, "json_query", {"data": data, "pointer": "/"})["value"] == 7
    assert call(backend, "json_query", {"data": data, "pointer": "/n"}) == {
        "found": True,
        "value": None,
    }
    for missing in ["/x", "/a~1b/2", "/a~1b/01", "/a~1b/-", "/n/x"]:
        assert call(backend, "json_query", {"data": data, "pointer": missing}) == {
            "found": False,
            "value": None,
        }
    for bad in ["a", "/~2"]:
        with pytest.raises(ToolFailed):
            call(backend, "json_query", {"data": data, "pointer": bad})


def test_base64(backend: WasmBackend) -> None:
    assert call(backend, "base64_encode", {"text": "héllo?>"}) == {
        "encoded": base64.b64encode("héllo?>".encode()).decode()
    }
    assert call(backend, "base64_encode", {"text": "??>>", "url_safe": True}) == {
        "encoded": base64.urlsafe_b64encode(b"??>>").decode()
    }
    assert call(backend, "base64_decode", {"encoded": "aMOp\nbGxv"}) == {
        "decoded": "héllo",
        "binary": False,
    }
    assert call(backend, "base64_decode", {"encoded": "aGk"}) == {"decoded": "hi", "binary": False}
    assert call(backend, "base64_decode", {"encoded": "/+7d"}) == {
        "decoded": "/+7d",
        "binary": True,
    }
    for bad, fragment in [
        ("a$bc", "outside the base64 alphabet at offset 1"),
        ("a", "single trailing"),
        ("aGk=aGk=", "data after '=' padding"),
        ("aG==", ""),
        ("a===", "misplaced"),
        ("QUJD=", "misplaced"),
        ("aGk-", "set url_safe true"),
    ]:
        if fragment:
            with pytest.raises(ToolFailed, match="invalid base64") as info:
                call(backend, "base64_decode", {"encoded": bad})
            assert fragment in info.value.message


@pytest.mark.parametrize("space", [c for c in map(chr, range(128)) if c.encode().isspace()])
def test_base64_decode_skips_all_ascii_whitespace(backend: WasmBackend, space: str) -> None:
    # The manifest says whitespace is ignored; \v and \f were refused as outside the alphabet
    # (space, \n, \r and \t were skipped). Python's bytes.isspace set, as b64decode skips.
    encoded = f"{space}QUJD{space}REVG{space}"
    assert call(backend, "base64_decode", {"encoded": encoded}) == {
        "decoded": base64.b64decode(encoded).decode(),
        "binary": False,
    }


@pytest.mark.parametrize("algorithm", ["sha256", "sha512", "sha1", "md5"])
def test_hash(backend: WasmBackend, algorithm: str) -> None:
    for text in ["", "abc", "x" * 55, "y" * 56, "z" * 119, "é" * 1000]:
        out = call(backend, "hash", {"text": text, "algorithm": algorithm})
        assert out == {
            "algorithm": algorithm,
            "hex": hashlib.new(algorithm, text.encode()).hexdigest(),
        }
    assert call(backend, "hash", {"text": "abc"})["algorithm"] == "sha256"


def test_csv_to_json(backend: WasmBackend) -> None:
    text = 'name,note\r\nann,"say ""hi"", ok"\r\n\r\nbob,"two\nlines"\n'
    assert call(backend, "csv_to_json", {"text": text}) == {
        "rows": [{"name": "ann", "note": 'say "hi", ok'}, {"name": "bob", "note": "two\nlines"}],
        "columns": ["name", "note"],
    }
    assert call(
        backend, "csv_to_json", {"text": "a;b\n1;2", "header": False, "delimiter": ";"}
    ) == {
        "rows": [["a", "b"], ["1", "2"]],
        "columns": [],
    }
    with pytest.raises(ToolFailed, match="record 3: 1 fields, the header has 2"):
        call(backend, "csv_to_json", {"text": "a,b\n1,2\n3"})
    with pytest.raises(ToolFailed, match="malformed quoted field"):
        call(backend, "csv_to_json", {"text": 'a\n"x"y'})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a,a\n1,2\n", 'duplicate column name "a" in the header (columns 1 and 2)'),
        ("x,,y,\n1,2,3,4\n", 'duplicate column name "" (empty) in the header (columns 2 and 4)'),
        ('"b",c,b\n1,2,3\n', 'duplicate column name "b" in the header (columns 1 and 3)'),
    ],
)
def test_csv_to_json_refuses_a_header_that_names_a_column_twice(
    backend: WasmBackend, text: str, fragment: str
) -> None:
    """Rows are objects keyed by column name: a repeated name silently kept the last value
    ({"text": "a,a\\n1,2"} gave rows [{"a": "2"}] and columns ["a", "a"])."""
    with pytest.raises(ToolFailed) as exc:
        call(backend, "csv_to_json", {"text": text})
    assert fragment in exc.value.message and "header=false" in exc.value.message
    # Without a header the rows are lists: nothing is lost, nothing refused.
    assert call(backend, "csv_to_json", {"text": text, "header": False})["rows"][0][0] != ""


def test_csv_to_json_one_empty_column_name_is_a_name(backend: WasmBackend) -> None:
    """One empty name is no ambiguity (pandas writes its index column so)."""
    assert call(backend, "csv_to_json", {"text": ",a\n0,1\n"}) == {
        "rows": [{"": "0", "a": "1"}],
        "columns": ["", "a"],
    }


@pytest.mark.parametrize("header", [True, False])
def test_csv_to_json_strips_a_leading_bom(backend: WasmBackend, header: bool) -> None:
    """A UTF-8 byte order mark (Excel's "CSV UTF-8") stayed in the first column's name."""
    out = call(backend, "csv_to_json", {"text": "\ufeffa,b\n1,2\n", "header": header})
    if header:
        assert out == {"rows": [{"a": "1", "b": "2"}], "columns": ["a", "b"]}
    else:
        assert out["rows"] == [["a", "b"], ["1", "2"]]
    # Only a leading one: elsewhere it is data.
    out = call(backend, "csv_to_json", {"text": "a,b\n\ufeff1,2\n"})
    assert out["rows"] == [{"a": "\ufeff1", "b": "2"}]


def test_usage_reports_fuel_and_memory(backend: WasmBackend) -> None:
    outcome = backend.run_sync(request(spec_of("json_parse"), {"text": "[1]"}))
    assert outcome.usage["fuel"] > 0
    assert outcome.usage["peak_memory_bytes"] >= 65536
    assert outcome.usage["cpu_ms"] >= 0
    assert outcome.fingerprint is not None and outcome.fingerprint.backend == "wasm"


def test_errors_carry_usage(backend: WasmBackend) -> None:
    with pytest.raises(ToolFailed) as info:
        call(backend, "json_parse", {"text": "[1,"})
    assert info.value.usage["fuel"] > 0


def test_async_run_concurrently(backend: WasmBackend) -> None:
    results: list[object] = []

    async def main() -> None:
        await backend.start()
        async with anyio.create_task_group() as tg:
            for i in range(8):

                async def one(i: int = i) -> None:
                    out = await backend.run(request(spec_of("json_parse"), {"text": f"[{i}]"}))
                    results.append(out.result["data"][0])

                tg.start_soon(one)

    anyio.run(main)
    assert sorted(results) == list(range(8))  # type: ignore[type-var]
