"""``NativeCaller.run``, the backend's hot path: a call that ran to its end comes back as a
plain tuple holding exactly what ``NativeCaller.call``'s NativeResult says; any other
status as the NativeResult ``call`` returns."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.backends.wasm import WasmBackend
from runtime.backends.wasm._native import NativeResult, Status
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.backend import _TABLE_ELEMENTS, _export_name

from .conftest import spec_of

pytestmark = pytest.mark.wasm

_MIB = 1024 * 1024


def _args(backend: WasmBackend, tool: str, text: str, fuel: int) -> tuple[Any, ...]:
    spec = spec_of(tool)
    loaded = backend.load(spec)
    payload = GuestABI.encode_arguments({"text": text})
    return (
        backend._engine_ptr,
        loaded.pre,
        _export_name(spec).encode(),
        payload,
        64 * _MIB,
        _TABLE_ELEMENTS,
        fuel,
        1000,
        1 << 20,
        loaded.has_oom,
    )


@pytest.mark.parametrize("text", ['{"a": [1, 2.5, "x"], "b": null}', "[" * 600, "[1e999]"])
def test_ok_tuple_is_calls_result(native_backend: WasmBackend, text: str) -> None:
    native = native_backend.native_caller()
    assert native is not None
    args = _args(native_backend, "json_parse", text, 10**9)
    ok = native.run(*args)
    assert type(ok) is tuple
    full = native.call(
        *args[:4],
        memory_bytes=args[4],
        table_elements=args[5],
        fuel=args[6],
        epoch_deadline=args[7],
        max_output=args[8],
        has_oom=args[9],
    )
    assert full.status == Status.OK and full.error is None and full.trap is None
    out_status, body, may_overflow, fuel_left, memory_size, _cpu, _wall = ok
    assert (out_status, bytes(body), may_overflow) == (
        full.out_status,
        bytes(full.body or b""),
        full.may_overflow,
    )
    # A fresh instance per call: the same work, the same fuel and memory.
    assert (fuel_left, memory_size) == (full.fuel_left, full.memory_size)
    assert full.may_overflow == (text == "[1e999]")
    again = native.run(*args, full=True)  # call()'s own path: always a NativeResult
    assert isinstance(again, NativeResult) and again.status == Status.OK
    assert (again.out_status, again.fuel_left, again.memory_size) == (
        full.out_status,
        full.fuel_left,
        full.memory_size,
    )


def test_a_failed_call_is_a_native_result(native_backend: WasmBackend) -> None:
    native = native_backend.native_caller()
    assert native is not None
    res = native.run(*_args(native_backend, "json_parse", "[" + "1," * 5000 + "1]", 10))
    assert isinstance(res, NativeResult)
    assert res.status == Status.TRAP and res.trap is not None and res.body is None
