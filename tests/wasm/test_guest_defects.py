"""Defects found by hunting the built-in data guests against their references (CPython's csv
and re), each pinned by the input that showed it."""

from __future__ import annotations

import csv
import io

import pytest

from runtime.backends.wasm import WasmBackend

from .conftest import call

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
