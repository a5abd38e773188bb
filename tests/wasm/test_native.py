"""The one-foreign-call helper (``_native``): the same results, usage and errors as the ctypes
path, and it is only loaded from a private cache (otherwise the backend falls back)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.backends.wasm import WasmBackend, _native
from runtime.backends.wasm._native import load_native
from runtime.backends.wasm.abi import _may_overflow
from runtime.errors import ExecutionError, ToolFailed

from .conftest import ECHO_WAT, request, spec_of, wat_tool

pytestmark = pytest.mark.wasm

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("json_parse", {"text": '{"a": [1, 2.5, "x\\u00e9"], "b": null}'}),
    ("json_parse", {"text": "[" * 600}),  # a tool error (nesting)
    ("json_stringify", {"data": {"k": list(range(50))}}),
    ("base64_encode", {"text": "héllo" * 40_000}),  # a result of ~270 KB
    ("base64_decode", {"data": "!!!"}),
    ("hash", {"text": "abc", "algorithm": "sha256"}),
    ("csv_to_json", {"text": "a,b\n1,2\n"}),
    ("regex_match", {"pattern": "(a+)+b", "text": "a" * 30}),
]


def _outcome(backend: WasmBackend, tool: str, arguments: dict[str, Any]) -> tuple[Any, ...]:
    try:
        out = backend.run_sync(request(spec_of(tool), arguments))
    except ExecutionError as exc:  # compared field by field below
        usage = exc.usage
        return (type(exc).__name__, str(exc), usage.get("fuel"), usage.get("peak_memory_bytes"))
    return ("ok", out.result, out.usage["fuel"], out.usage["peak_memory_bytes"])


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[c[0] for c in CALLS])
def test_same_outcome_and_usage_on_both_paths(
    native_backend: WasmBackend, ctypes_backend: WasmBackend, tool: str, arguments: Any
) -> None:
    # Fuel is counted instruction by instruction, so equal fuel means the guest did exactly
    # the same work on both paths (same input bytes, same output).
    assert native_backend.native_caller() is not None
    assert ctypes_backend.native_caller() is None
    native = _outcome(native_backend, tool, arguments)
    assert native == _outcome(ctypes_backend, tool, arguments)
    assert native[2] is not None and native[2] > 0


def test_native_is_the_default_and_named_in_the_fingerprint(native_backend: WasmBackend) -> None:
    assert native_backend.native_caller() is not None
    assert "native_call" not in native_backend.fingerprint().missing
    usage = native_backend.run_sync(request(spec_of("json_parse"), {"text": "[1]"})).usage
    assert set(usage) == {"fuel", "peak_memory_bytes", "cpu_ms", "wall_ms"}
    assert usage["wall_ms"] > 0 and usage["cpu_ms"] >= 0 and usage["peak_memory_bytes"] >= 65536
    off = WasmBackend(cache_dir=native_backend.cache_dir, native=False)
    assert off.native_caller() is None
    assert "native_call" in off.fingerprint().missing


def test_shared_writable_cache_is_not_loaded(tmp_path: Path) -> None:
    # dlopen runs the file's code: a directory others can write is never loaded from.
    cache = tmp_path / "cache"
    (cache / "native").mkdir(parents=True)
    os.chmod(cache / "native", 0o777)
    with pytest.raises(OSError, match="not a private directory"):
        load_native(cache)
    backend = WasmBackend(cache_dir=cache)
    try:
        assert backend.native_caller() is None
        assert "native_call" in backend.fingerprint().missing
        spec = wat_tool(tmp_path, "echo", ECHO_WAT)
        assert backend.run_sync(request(spec, {})).result == {"ok": True}
    finally:
        backend.close()


def test_writable_library_file_is_not_loaded(tmp_path: Path) -> None:
    load_native(tmp_path)
    (built,) = (tmp_path / "native").glob("*/_native.so")
    os.chmod(built, 0o775)
    with pytest.raises(OSError, match="not ours alone"):
        load_native(tmp_path)


def test_symlinked_library_is_not_followed(tmp_path: Path) -> None:
    load_native(tmp_path / "real")
    (built,) = (tmp_path / "real" / "native").glob("*/_native.so")
    load_native(tmp_path / "link")
    (placed,) = (tmp_path / "link" / "native").glob("*/_native.so")
    placed.unlink()
    placed.symlink_to(built)  # ours and intact, but a symlink is never followed
    with pytest.raises(OSError):
        load_native(tmp_path / "link")


@pytest.mark.skipif(not os.path.exists("/lib/x86_64-linux-gnu/libz.so.1"), reason="Debian path")
def test_a_library_without_the_helpers_symbols_is_refused(tmp_path: Path) -> None:
    # Another library in the helper's place (ours, private): ImportError, so the backend
    # takes the ctypes path instead of failing on a missing symbol.
    load_native(tmp_path)
    (built,) = (tmp_path / "native").glob("*/_native.so")
    # Put in place by a rename, as a rebuild would: the first load_native mapped the file,
    # and rewriting a mapped library in place changes that mapping's pages under this
    # process (its destructors then crashed the interpreter's exit).
    other = built.with_name("other.so")
    other.write_bytes(Path("/lib/x86_64-linux-gnu/libz.so.1").read_bytes())
    other.replace(built)
    with pytest.raises(ImportError, match="is not the native helper"):
        load_native(tmp_path)


def test_layout_mismatch_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another wasmtime whose structs differ from the helper's must not be driven by it.
    monkeypatch.setattr(_native, "_expected_layout", lambda: [1, 2, 3])
    with pytest.raises(ImportError, match="layouts differ"):
        load_native(tmp_path)


def test_build_failure_falls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "_native.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(_native, "_SOURCE", broken)
    with pytest.raises(OSError, match="zig cc exited"):
        load_native(tmp_path / "a")
    backend = WasmBackend(cache_dir=tmp_path / "b")
    try:
        assert backend.native_caller() is None
        spec = wat_tool(tmp_path, "echo", ECHO_WAT)
        assert backend.run_sync(request(spec, {})).result == {"ok": True}
    finally:
        backend.close()
    assert not list((tmp_path / "a" / "native").glob("*/*.so"))  # no half-built file left


# Bytes rich in what the scan looks for: digits, exponent markers, signs.
_NUMBERISH = st.one_of(
    st.binary(max_size=64),
    st.text(alphabet="0123456789eE+-.x ", max_size=300).map(str.encode),
    st.integers(200, 260).map(lambda n: b"1" * n),
)


@settings(max_examples=400, deadline=None)
@given(data=_NUMBERISH)
def test_c_overflow_scan_is_the_python_one(native_backend: WasmBackend, data: bytes) -> None:
    # The helper's flag replaces abi._may_overflow for native calls: a False where Python
    # says True would let an inf through, so they must agree on every input.
    native = native_backend.native_caller()
    assert native is not None
    assert native.may_overflow(data) == _may_overflow(data)


OVERFLOW_WAT = """(module
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (data (i32.const 16) "\\00{\\"x\\":1e999}")
  (func (export "run") (param i32 i32) (result i64) (i64.const 0x0000000c00000010)))"""


def test_overflowing_float_from_a_guest_on_both_paths(
    native_backend: WasmBackend, ctypes_backend: WasmBackend, tmp_path: Path
) -> None:
    spec = wat_tool(tmp_path, "inf", OVERFLOW_WAT)
    for backend in (native_backend, ctypes_backend):
        with pytest.raises(ToolFailed, match="out of the float range"):
            backend.run_sync(request(spec, {}))


def test_a_call_reentering_on_its_thread_does_not_touch_the_busy_scratch(
    native_backend: WasmBackend,
) -> None:
    # Outputs land in a per-thread buffer; a call made while this thread's buffer is still
    # in use (a signal handler between the foreign call and the copy out) gets its own.
    native = native_backend.native_caller()
    assert native is not None
    native_backend.run_sync(request(spec_of("json_parse"), {"text": "[0]"}))
    scratch = native._local.scratch
    scratch.buf[:4] = b"MARK"
    scratch.busy = True
    try:
        outcome = native_backend.run_sync(request(spec_of("json_parse"), {"text": "[12345]"}))
        assert outcome.result == {"data": [12345]}
        assert scratch.buf[:4] == b"MARK" and scratch.busy
    finally:
        scratch.busy = False
    outcome = native_backend.run_sync(request(spec_of("json_parse"), {"text": "[7]"}))
    assert outcome.result == {"data": [7]}
    assert bytes(scratch.buf[:10]) == b'{"data":[7'


def test_outputs_past_the_scratch_buffer(native_backend: WasmBackend) -> None:
    text = "x" * (_native.SCRATCH_BYTES * 3)
    outcome = native_backend.run_sync(request(spec_of("base64_encode"), {"text": text}))
    assert outcome.result["encoded"] == base64.b64encode(text.encode()).decode()
