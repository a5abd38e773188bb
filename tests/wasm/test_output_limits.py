"""A data tool's output past output_bytes is output_too_large, whatever the guest's memory.

A small input can expand (a CSV's wide header repeated in every row, an indented document,
base64's 4/3): before RT_CUT the guest's output buffer ran into its memory limit first and the
call ended as resource_limit, the wrong type for an output the policy's output_bytes refuses.
Now the guest hands back the part it could write (status 3) and the host sizes it: past
output_bytes it is output_too_large, within it (output_bytes above the memory) resource_limit
naming wasm_memory_mb. Both call paths (the native helper and ctypes) are checked.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.backends.wasm import WasmBackend
from runtime.errors import OutputTooLarge, ResourceLimitExceeded

from .conftest import call

pytestmark = pytest.mark.wasm

_MIB = 1024 * 1024


@pytest.fixture(params=["native", "ctypes"])
def any_backend(
    request: pytest.FixtureRequest, backend: WasmBackend, ctypes_backend: WasmBackend
) -> WasmBackend:
    return backend if request.param == "native" else ctypes_backend


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


# (tool, arguments, wasm_memory_mb): each output is many times its input and past the memory.
EXPANDING = [
    # A 20 KB header name repeated in 4,000 rows: ~80 MB of JSON from 28 KB of CSV.
    ("csv_to_json", {"text": "h" * 20_000 + "\n" + "x\n" * 4_000}, 16),
    # Every field a control character escaped as \u0001: 6 bytes out per byte in.
    ("csv_to_json", {"text": "a\n" + "\x01\n" * 600_000, "header": True}, 12),
    # 300 copies of a 120-deep nesting (within the guests' 127 levels), indented: ~9 MB of
    # text from 73 KB.
    ("json_stringify", {"data": [_nested(120)] * 300, "pretty": True}, 8),
    # 3 MB of text (under half the memory) to 4 MB of base64.
    ("base64_encode", {"text": "x" * 3_000_000}, 8),
    # 2 MB of base64 for 1.5 MB of NUL bytes, each written back as \u0000: 9 MB.
    ("base64_decode", {"encoded": "AAAA" * 500_000}, 8),
    # A match of 600,000 control characters, each escaped in the result.
    ("regex_match", {"pattern": "\x01+", "text": "\x01" * 600_000}, 8),
    # A document of 3 MB whose minified copy does not fit next to it.
    ("json_parse", {"text": json.dumps(["abcdefgh"] * 260_000)}, 8),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "memory_mb"), EXPANDING, ids=[e[0] for e in EXPANDING]
)
def test_expanding_output_is_output_too_large(
    any_backend: WasmBackend, tool: str, arguments: dict[str, Any], memory_mb: int
) -> None:
    # 256 KiB: where the guest's memory ran out, more than that had been written (its first
    # part is what the host sizes; with json_parse's 3 MB in 8 MiB, about 500 KB).
    limit = 256 * 1024
    with pytest.raises(OutputTooLarge) as info:
        call(any_backend, tool, arguments, wasm_memory_mb=memory_mb, output_bytes=limit)
    assert info.value.details["limit"] == "output_bytes"
    assert info.value.details["size"] > limit
    # The output's head, as the other backends give it (DESIGN §3: a truncated preview).
    preview = info.value.details["preview"]
    assert 0 < len(preview) <= 1024
    assert preview.startswith(("{", "["))


@pytest.mark.parametrize("tool", ["base64_encode", "json_stringify"])
def test_output_too_large_previews_the_result(any_backend: WasmBackend, tool: str) -> None:
    arguments = {"text": "x" * 9000} if tool == "base64_encode" else {"data": "x" * 9000}
    with pytest.raises(OutputTooLarge) as info:
        call(any_backend, tool, arguments, output_bytes=4096)
    preview = info.value.details["preview"]
    expected = {"base64_encode": '{"encoded":"eHh4', "json_stringify": '{"text":"\\"xxx'}[tool]
    assert preview.startswith(expected), preview[:40]
    assert len(preview) == 1024


def test_output_past_memory_within_output_bytes_is_resource_limit(
    any_backend: WasmBackend,
) -> None:
    # output_bytes (64 MiB) above what an 8 MiB guest can hold: the memory bound is what the
    # call ran into, and the error says so.
    with pytest.raises(ResourceLimitExceeded) as info:
        call(
            any_backend,
            "csv_to_json",
            {"text": "h" * 20_000 + "\n" + "x\n" * 4_000},
            wasm_memory_mb=8,
            output_bytes=64 * _MIB,
        )
    assert info.value.details["limit"] == "wasm_memory_mb"
    assert 0 < info.value.details["written_bytes"] <= 8 * _MIB


def test_large_input_whose_output_fits_still_succeeds(backend: WasmBackend) -> None:
    # csv_to_json asks for twice its text up front; where memory cannot give that, it starts
    # small and grows (3 MB of CSV in a 12 MiB guest: the input, its decoded copy and that
    # guess did not fit together; the 3.4 MB output does).
    text = ("a" * 20 + "\n") * 150_000
    out = call(
        backend,
        "csv_to_json",
        {"text": text, "header": False},
        wasm_memory_mb=12,
        output_bytes=8 * _MIB,
    )
    assert len(out["rows"]) == 150_000
