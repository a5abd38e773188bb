"""Arbitrary inputs to every built-in guest: a result or a clear ToolFailed, never a trap."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.backends.wasm import WasmBackend
from runtime.errors import ToolFailed

from .conftest import call

pytestmark = pytest.mark.wasm

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
noise = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)
regexish = st.text(st.sampled_from(list("ab.*+?{}[]()^$|\\-,0123dws:=!é")), max_size=20)


def no_trap(backend: WasmBackend, tool: str, arguments: dict[str, Any]) -> None:
    try:
        call(backend, tool, arguments)
    except ToolFailed as exc:
        assert "trap" not in exc.details, exc.message


@SETTINGS
@given(text=noise, header=st.booleans(), delimiter=st.sampled_from([",", ";", "\t", "|"]))
def test_csv_noise(backend: WasmBackend, text: str, header: bool, delimiter: str) -> None:
    no_trap(backend, "csv_to_json", {"text": text, "header": header, "delimiter": delimiter})


@SETTINGS
@given(pattern=regexish, text=noise)
def test_regex_noise(backend: WasmBackend, pattern: str, text: str) -> None:
    no_trap(backend, "regex_match", {"pattern": pattern, "text": text})


@SETTINGS
@given(encoded=noise, url_safe=st.booleans())
def test_base64_noise(backend: WasmBackend, encoded: str, url_safe: bool) -> None:
    no_trap(backend, "base64_decode", {"encoded": encoded, "url_safe": url_safe})


@SETTINGS
@given(pointer=st.text(st.sampled_from(list("/~01a-")), max_size=12))
def test_json_query_noise(backend: WasmBackend, pointer: str) -> None:
    no_trap(backend, "json_query", {"data": {"a": [1, {"0": 2}], "~": 3}, "pointer": pointer})
