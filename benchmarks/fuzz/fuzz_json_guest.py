"""Atheris harness: the json_parse wasm guest against CPython's json (not run in CI).

    pip install atheris
    python benchmarks/fuzz/fuzz_json_guest.py -max_len=4096 -runs=1000000 [corpus_dir]

For every input that is valid UTF-8 it asserts that the guest and ``json.loads`` agree: both
accept with equal values, or both refuse; the documented deliberate differences (NaN/Infinity,
lone surrogate escapes, floats overflowing to inf, depth > 512, integers over 4300 digits) are
allowed only as "guest refuses, CPython accepts". Any other exception from the backend (an
internal error, a trap) is a finding.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris  # type: ignore[import-not-found]

with atheris.instrument_imports():
    from runtime.backends.base import ExecRequest
    from runtime.backends.wasm import WasmBackend
    from runtime.errors import ToolFailed
    from runtime.models import Decision, Limits, ToolSpec
    from runtime.toolkit import builtin_tools_dir

_SPEC_PATH = builtin_tools_dir() / "data" / "json_parse.json"
_SPEC = ToolSpec.model_validate(json.loads(_SPEC_PATH.read_text()))
_BACKEND = WasmBackend(cache_dir=Path(tempfile.mkdtemp(prefix="fuzz-wasm-")))


def _deliberately_refused(doc: str, value: Any) -> bool:
    def walk(v: Any) -> bool:
        if isinstance(v, float):
            return math.isnan(v) or math.isinf(v)
        if isinstance(v, str):
            return any(0xD800 <= ord(c) <= 0xDFFF for c in v)
        if isinstance(v, list):
            return any(walk(x) for x in v)
        if isinstance(v, dict):
            return any(walk(k) or walk(x) for k, x in v.items())
        return False

    return walk(value) or doc.count("[") + doc.count("{") > 512 or len(doc) > 4300


def test_one_input(data: bytes) -> None:
    try:
        doc = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        expected: Any = json.loads(doc)
        ok = True
    except (ValueError, RecursionError):
        ok = False
    request = ExecRequest(
        call_id="fuzz",
        spec=_SPEC,
        arguments={"text": doc},
        workspace=Path("/nonexistent"),
        limits=Limits(),
        decision=Decision(action="allow", rule="fuzz"),
    )
    try:
        got = _BACKEND.run_sync(request).result["data"]
    except ToolFailed:
        if ok and not _deliberately_refused(doc, expected):
            raise AssertionError(f"guest refused what CPython accepts: {doc!r}") from None
        return
    if not ok:
        raise AssertionError(f"guest accepted what CPython refuses: {doc!r}")
    if got != expected:
        raise AssertionError(f"values differ for {doc!r}: {got!r} != {expected!r}")


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
