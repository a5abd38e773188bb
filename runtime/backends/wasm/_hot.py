"""The per-call hot path on wasmtime's C API (through wasmtime-py's own ctypes bindings).

wasmtime-py's object API re-derives function types, builds ``Val`` objects and lists every
export on each use; per call that costs more than the guest's work. Here exports are looked
up by name, functions are called with ``wasmtime_func_call_unchecked`` and memory is copied
with one ``memmove``.

Hazards: ``call_unchecked`` does not check argument types, so it is only used on functions
whose signatures the backend checked when the module was loaded ((i32) -> i32 and
(i32, i32) -> i64). Guest memory may move on ``memory.grow``: its base address is fetched
after every call into the guest and never cached across one. Offsets from the guest are
bounds-checked against the memory's current size before any copy.
"""

from __future__ import annotations

import ctypes
from typing import Any, cast

import wasmtime
from wasmtime import _ffi as ffi

__all__ = ["GuestInstance"]

_KIND_FUNC = 0
_KIND_MEMORY = 3


class GuestInstance:
    """One instantiated guest in one store: named exports, raw calls and memory copies."""

    __slots__ = ("_ctx", "_instance", "_memory")

    def __init__(self, store: wasmtime.Store, instance: wasmtime.Instance) -> None:
        self._ctx = store._context()
        self._instance = instance._instance
        memory = self._export(b"memory", _KIND_MEMORY)
        self._memory: Any = memory.of.memory if memory is not None else None

    def _export(self, name: bytes, kind: int) -> Any:
        item = ffi.wasmtime_extern_t()
        found = ffi.wasmtime_instance_export_get(
            self._ctx, ctypes.byref(self._instance), name, len(name), ctypes.byref(item)
        )
        if not found or cast(int, item.kind) != kind:
            return None
        return item

    def func(self, name: str) -> Any:
        item = self._export(name.encode(), _KIND_FUNC)
        return item.of.func if item is not None else None

    @property
    def has_memory(self) -> bool:
        return self._memory is not None

    def call(self, func: Any, *args: int) -> int:
        """Call a checked-signature function; returns its single i32/i64 result (signed)."""
        raw = (ffi.wasmtime_val_raw_t * max(1, len(args)))()
        for i, arg in enumerate(args):
            raw[i].i32 = arg
        trap = ctypes.POINTER(ffi.wasm_trap_t)()
        error = ffi.wasmtime_func_call_unchecked(
            self._ctx, ctypes.byref(func), raw, len(raw), ctypes.byref(trap)
        )
        if error:
            raise wasmtime.WasmtimeError._from_ptr(error)
        if trap:
            raise wasmtime.Trap._from_ptr(trap)
        return int(raw[0].i64)

    def call_i32(self, func: Any, *args: int) -> int:
        return self.call(func, *args) & 0xFFFF_FFFF

    def memory_size(self) -> int:
        if self._memory is None:
            return 0
        return int(ffi.wasmtime_memory_data_size(self._ctx, ctypes.byref(self._memory)))

    def _base(self) -> int:
        data = ffi.wasmtime_memory_data(self._ctx, ctypes.byref(self._memory))
        return ctypes.cast(data, ctypes.c_void_p).value or 0

    def write(self, offset: int, data: bytes) -> bool:
        """Copy ``data`` to guest memory at ``offset``; False when it does not fit."""
        if self._memory is None or offset + len(data) > self.memory_size():
            return False
        ctypes.memmove(self._base() + offset, data, len(data))
        return True

    def read(self, offset: int, length: int) -> bytes | None:
        """A copy of guest memory [offset, offset+length); None when out of bounds."""
        if self._memory is None or offset + length > self.memory_size():
            return None
        return ctypes.string_at(self._base() + offset, length)
