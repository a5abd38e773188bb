"""``NativeCaller.run`` through the C accelerator's ``wasm_call`` (the helper called without
ctypes) against the ctypes call of the same helper: the same answers — body, statuses,
fuel, memory, errors and traps — on generated inputs and limits, the struct layouts
compared before use, and the ctypes path kept for what the accelerator declines."""

from __future__ import annotations

import ctypes
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.backends.wasm import WasmBackend
from runtime.backends.wasm._native import (
    SCRATCH_BYTES,
    NativeCaller,
    NativeResult,
    _Call,
    _direct_call,
)
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.backend import _TABLE_ELEMENTS, _export_name

from .conftest import spec_of

pytestmark = pytest.mark.wasm

_MIB = 1024 * 1024
DOCS = st.sampled_from(
    ['{"a": [1, 2.5, "x"], "b": null}', "[" * 600, "[1e999]", "not json", "", '"' + "x" * 9000]
) | st.text(max_size=200)


def _args(backend: WasmBackend, tool: str, text: str, **over: Any) -> list[Any]:
    spec = spec_of(tool)
    loaded = backend.load(spec)
    payload = GuestABI.encode_arguments({"text": text})
    args = {
        "engine": backend._engine_ptr,
        "pre": loaded.pre,
        "export": _export_name(spec).encode(),
        "payload": payload,
        "memory": 64 * _MIB,
        "table": _TABLE_ELEMENTS,
        "fuel": 10**9,
        "deadline": 1000,
        "max_output": 1 << 20,
        "has_oom": loaded.has_oom,
    }
    args.update(over)
    return list(args.values())


def _both(native: NativeCaller, args: list[Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    assert native._direct is not None
    direct = native.run(*args)
    with monkeypatch.context() as m:
        m.setattr(native, "_direct", None)
        via_ctypes = native.run(*args)
    return direct, via_ctypes


def _comparable(res: Any) -> Any:
    """Everything but the CPU and wall times; errors and traps by type and message."""
    if type(res) is tuple:
        out_status, body, may_overflow, fuel_left, memory_size, _cpu, _wall = res
        return ("ok", out_status, bytes(body), may_overflow, fuel_left, memory_size)
    assert isinstance(res, NativeResult)
    return (
        res.status,
        res.fuel_left,
        res.memory_size,
        res.packed,
        res.oom_flag,
        res.has_memory,
        res.may_overflow,
        res.out_status,
        None if res.body is None else bytes(res.body),
        None if res.error is None else (type(res.error), str(res.error)),
        None if res.trap is None else (type(res.trap), str(res.trap)),
    )


def test_layout_is_the_ctypes_views(c_mod: ModuleType) -> None:
    fields = [f[0] for f in _Call._fields_]
    assert c_mod.wasm_call_layout() == (
        ctypes.sizeof(_Call),
        *(getattr(_Call, name).offset for name in fields),
    )


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    tool=st.sampled_from(["json_parse", "base64_encode"]),
    text=DOCS | st.just('"' + "z" * SCRATCH_BYTES + '"'),
    fuel=st.sampled_from([10, 2_000, 10**9]),
    memory=st.sampled_from([1 * _MIB, 2 * _MIB, 64 * _MIB]),
    max_output=st.sampled_from([1, 16, 9000, 1 << 20]),
)
def test_direct_equals_ctypes(
    c_mod: ModuleType,
    native_backend: WasmBackend,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    text: str,
    fuel: int,
    memory: int,
    max_output: int,
) -> None:
    """Output in the thread's scratch and malloc'd (over SCRATCH_BYTES), traps (fuel,
    memory), output too large, guest errors: the same answers both ways."""
    native = native_backend.native_caller()
    assert native is not None
    args = _args(native_backend, tool, text, fuel=fuel, memory=memory, max_output=max_output)
    direct, via_ctypes = _both(native, args, monkeypatch)
    assert _comparable(direct) == _comparable(via_ctypes)


def test_statuses_covered(
    c_mod: ModuleType, native_backend: WasmBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated cases above include each shape; named here so none goes missing."""
    native = native_backend.native_caller()
    assert native is not None
    long = '"' + "y" * (SCRATCH_BYTES + 10) + '"'
    ok, twin = _both(native, _args(native_backend, "json_parse", long), monkeypatch)
    assert type(ok) is tuple and len(ok[1]) > SCRATCH_BYTES  # malloc'd by the helper, freed
    assert _comparable(ok) == _comparable(twin)
    trap, twin = _both(
        native, _args(native_backend, "json_parse", "[1]" * 500, fuel=10), monkeypatch
    )
    assert isinstance(trap, NativeResult) and trap.trap is not None
    assert _comparable(trap) == _comparable(twin)
    big, twin = _both(native, _args(native_backend, "json_parse", "[1]", max_output=1), monkeypatch)
    assert isinstance(big, NativeResult) and big.status != 0
    assert _comparable(big) == _comparable(twin)


def test_declined_arguments_take_the_ctypes_path(
    c_mod: ModuleType, native_backend: WasmBackend
) -> None:
    """An int outside the struct's field (which ctypes would wrap) or a payload that is not
    bytes: wasm_call runs nothing and answers NotImplemented; run() then calls through
    ctypes, as before."""
    native = native_backend.native_caller()
    assert native is not None and native._direct is not None
    fn, call_fn, free_fn = native._direct
    args = _args(native_backend, "json_parse", "[1]")
    scratch = bytearray(64)
    buf = (ctypes.c_char * 64).from_buffer(scratch)
    base = [call_fn, free_fn, args[0], args[1].address, *args[2:], ctypes.addressof(buf), 64, 0]
    assert type(fn(*base)) is tuple  # the well-formed call runs
    for i, bad in ((8, 1 << 64), (8, -1), (5, bytearray(b"x")), (11, 1), (6, 1.0), (12, 1.5),
                   (13, -1), (12, None), (14, 1.5)):  # fmt: skip
        odd = list(base)
        odd[i] = bad
        assert fn(*odd) is NotImplemented, (i, bad)
    args[6] = 1 << 64  # fuel: the backend bounds it; ctypes wraps it to 0
    assert isinstance(native.run(*args), NativeResult)
    with pytest.raises(TypeError):
        fn(*base[:-1])


def test_pure_python_keeps_ctypes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the accelerator (RUNTIME_PURE_PYTHON=1), or with another layout, the helper
    is called through ctypes."""
    from runtime.backends.wasm import _native

    monkeypatch.setattr(_native._speedups, "module", lambda: None)
    assert _direct_call(ctypes.CDLL(None)) is None

    class Other:
        @staticmethod
        def wasm_call_layout() -> tuple[int, ...]:
            return (1, 2, 3)

    monkeypatch.setattr(_native._speedups, "module", lambda: Other)
    assert _direct_call(ctypes.CDLL(None)) is None
