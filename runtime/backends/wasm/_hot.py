"""The per-call hot path on wasmtime's C API: one store, one instance, raw calls and copies.

wasmtime-py's object API re-derives function types, builds ``Val`` objects and lists every
export on each use, and its ``Store`` runs Python bookkeeping per object; per call that costs
more than the guest's work. Here every step is one foreign call through our *own* ctypes
function objects (``dll[name]`` makes a fresh one, so setting ``restype``/``argtypes`` never
changes the objects wasmtime-py itself uses): opaque pointers come back as plain ints, exports
are looked up by name, functions are called with ``wasmtime_func_call_unchecked`` and memory
is copied with one ``memmove`` each way. Each foreign call releases the GIL, so calls in
different threads overlap while the guest runs.

Hazards:

- ``call_unchecked`` does not check argument types, so it is only used on functions whose
  signatures the backend checked when the module was loaded ((i32) -> i32, () -> i32 and
  (i32, i32) -> i64).
- The argtypes below must match the C signatures exactly (``wasmtime.h``, the version
  wasmtime-py ships); a wrong one is memory corruption, not an exception.
  ``tests/wasm/test_hot.py`` runs every binding.
- Guest memory may move on ``memory.grow``: its base address is fetched after the last call
  into the guest and never cached across one. Offsets from the guest are bounds-checked
  against the memory's current size before any copy.
- Raw addresses outlive nothing: the engine's is taken by a backend that holds the Engine,
  an InstancePre's only through ``PreLinked``, which holds the InstancePre.
- The store is freed by ``close()`` exactly once; every use after that is refused (a
  dangling context pointer would be a use-after-free inside wasmtime).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, byref, c_bool, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any, cast

import wasmtime
from wasmtime import _bindings
from wasmtime import _ffi as ffi

__all__ = ["GuestStore", "PreLinked", "address_of"]

_KIND_FUNC = 0
_KIND_MEMORY = 3
_RAW = ffi.wasmtime_val_raw_t
_RAW2 = _RAW * 2
_EXTERN = ffi.wasmtime_extern_t
_INSTANCE = ffi.wasmtime_instance_t
_OUT_POINTER = POINTER(c_void_p)  # a trap out-parameter: wasm_trap_t **
_FUNCTION_POINTER: type = getattr(ctypes, "_CFuncPtr")  # noqa: B009 (not in the stubs)


def _is_pointer(t: Any) -> bool:
    return t in (c_void_p, ctypes.c_char_p) or (
        isinstance(t, type) and issubclass(t, (ctypes._Pointer, _FUNCTION_POINTER))
    )


def _same_abi(ours: Any, theirs: Any) -> bool:
    """Our declared C type against wasmtime-py's (generated from the shipped wasmtime.h):
    an opaque ``c_void_p``/``c_char_p`` matches any pointer, ``POINTER(c_void_p)`` any
    pointer to a pointer, anything else must be equal."""
    if ours in (c_void_p, ctypes.c_char_p):
        return _is_pointer(theirs)
    if ours is _OUT_POINTER:
        return _is_pointer(theirs) and _is_pointer(getattr(theirs, "_type_", None))
    return bool(ours == theirs)


def _bind(name: str, restype: Any, *argtypes: Any) -> Any:
    """Our own function object for ``name``, checked against wasmtime-py's declaration, so a
    wasmtime whose C signature differs fails loudly at import instead of corrupting memory."""
    theirs = getattr(_bindings, f"_{name}")
    if len(theirs.argtypes) != len(argtypes) or not all(
        _same_abi(o, t)
        for o, t in zip((restype, *argtypes), (theirs.restype, *theirs.argtypes), strict=True)
    ):
        raise ImportError(f"wasmtime's C API changed: {name} does not have the expected signature")
    fn = ffi.dll[name]  # a new function object each time: ours alone to configure
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


_store_new = _bind("wasmtime_store_new", c_void_p, c_void_p, c_void_p, c_void_p)
_store_context = _bind("wasmtime_store_context", c_void_p, c_void_p)
_store_limiter = _bind(
    "wasmtime_store_limiter", None, c_void_p, c_int64, c_int64, c_int64, c_int64, c_int64
)
_store_delete = _bind("wasmtime_store_delete", None, c_void_p)
_set_fuel = _bind("wasmtime_context_set_fuel", c_void_p, c_void_p, c_uint64)
_get_fuel = _bind("wasmtime_context_get_fuel", c_void_p, c_void_p, POINTER(c_uint64))
_set_epoch_deadline = _bind("wasmtime_context_set_epoch_deadline", None, c_void_p, c_uint64)
_instantiate = _bind(
    "wasmtime_instance_pre_instantiate",
    c_void_p,
    c_void_p,
    c_void_p,
    POINTER(_INSTANCE),
    _OUT_POINTER,
)
_export_get = _bind(
    "wasmtime_instance_export_get",
    c_bool,
    c_void_p,
    POINTER(_INSTANCE),
    ctypes.c_char_p,
    c_size_t,
    POINTER(_EXTERN),
)
_call_unchecked = _bind(
    "wasmtime_func_call_unchecked",
    c_void_p,
    c_void_p,
    POINTER(ffi.wasmtime_func_t),
    POINTER(_RAW),
    c_size_t,
    _OUT_POINTER,
)
_memory_data = _bind("wasmtime_memory_data", c_void_p, c_void_p, POINTER(ffi.wasmtime_memory_t))
_memory_size = _bind(
    "wasmtime_memory_data_size", c_size_t, c_void_p, POINTER(ffi.wasmtime_memory_t)
)


def address_of(pointer: Any) -> int:
    """The address held by a wasmtime-py pointer object (Engine.ptr(), InstancePre.ptr())."""
    return ctypes.cast(pointer, c_void_p).value or 0


def _error(ptr: int) -> wasmtime.WasmtimeError:
    # _from_ptr takes ownership: the error is freed when the exception object is.
    return wasmtime.WasmtimeError._from_ptr(ctypes.cast(ptr, POINTER(ffi.wasmtime_error_t)))


def _trap(ptr: int) -> wasmtime.Trap:
    return wasmtime.Trap._from_ptr(ctypes.cast(ptr, POINTER(ffi.wasm_trap_t)))


class PreLinked:
    """An InstancePre with its address, held together: the address is only used through this
    object, which keeps the InstancePre (and so the pointer) alive for as long as it is."""

    __slots__ = ("address", "pre")

    def __init__(self, pre: wasmtime.InstancePre) -> None:
        self.pre = pre
        self.address = address_of(pre.ptr())


class GuestStore:
    """A fresh store with its limits, then one instance of a pre-linked module in it."""

    __slots__ = ("_ctx", "_instance", "_memory", "_store")

    def __init__(
        self,
        engine: int,
        *,
        memory_bytes: int,
        table_elements: int,
        fuel: int,
        epoch_deadline: int,
    ) -> None:
        """``engine`` is the address of a live Engine (see ``address_of``) configured with
        fuel and epoch interruption; ``epoch_deadline`` is in ticks beyond the current one."""
        store = _store_new(engine, None, None)
        if not store:
            raise wasmtime.WasmtimeError("wasmtime could not create a store")
        self._store: int | None = store
        self._ctx: int = _store_context(store)
        self._instance: Any = None
        self._memory: Any = None
        _store_limiter(store, memory_bytes, table_elements, 1, 1, 1)
        err = _set_fuel(self._ctx, fuel)
        if err:
            self.close()
            raise _error(err)
        _set_epoch_deadline(self._ctx, epoch_deadline)

    def _context(self) -> int:
        if self._store is None:
            raise ValueError("the wasm store is already closed")
        return self._ctx

    def close(self) -> None:
        """Free the store and its instance (idempotent)."""
        store, self._store = self._store, None
        if store is not None:
            _store_delete(store)

    def instantiate(self, linked: PreLinked) -> None:
        """Instantiate a pre-linked module (data segments, start function, all under this
        store's fuel and limits); raises Trap or WasmtimeError."""
        ctx = self._context()
        instance = _INSTANCE()
        trap = c_void_p()
        err = _instantiate(linked.address, ctx, byref(instance), byref(trap))
        if err:
            raise _error(err)
        if trap.value:
            raise _trap(trap.value)
        self._instance = instance
        memory = self._export(b"memory", _KIND_MEMORY)
        self._memory = memory.of.memory if memory is not None else None

    def _export(self, name: bytes, kind: int) -> Any:
        if self._instance is None:
            return None
        item = _EXTERN()
        found = _export_get(self._context(), byref(self._instance), name, len(name), byref(item))
        if not found or cast(int, item.kind) != kind:
            return None
        return item

    def func(self, name: bytes) -> Any:
        """The exported function ``name``, or None (no such export, or not a function)."""
        item = self._export(name, _KIND_FUNC)
        return item.of.func if item is not None else None

    @property
    def has_memory(self) -> bool:
        return self._memory is not None

    def fuel_left(self) -> int:
        left = c_uint64()
        err = _get_fuel(self._context(), byref(left))
        if err:
            raise _error(err)
        return left.value

    def call(self, func: Any, a: int = 0, b: int = 0) -> int:
        """Call a checked-signature function with up to two i32 arguments; returns its single
        i32/i64 result (the raw 64-bit slot, signed). Raises Trap or WasmtimeError."""
        raw = _RAW2()
        raw[0].i32 = a
        raw[1].i32 = b
        trap = c_void_p()
        err = _call_unchecked(self._context(), byref(func), raw, 2, byref(trap))
        if err:
            raise _error(err)
        if trap.value:
            raise _trap(trap.value)
        return int(raw[0].i64)

    def call_i32(self, func: Any, a: int = 0, b: int = 0) -> int:
        return self.call(func, a, b) & 0xFFFF_FFFF

    def memory_size(self) -> int:
        if self._memory is None:
            return 0
        return int(_memory_size(self._context(), byref(self._memory)))

    def write(self, offset: int, data: bytes) -> bool:
        """Copy ``data`` to guest memory at ``offset``; False when it does not fit."""
        if self._memory is None:
            return False
        ctx, memory = self._context(), byref(self._memory)
        if offset + len(data) > _memory_size(ctx, memory):
            return False
        if data:  # a zero-size memory has a NULL base (None from ctypes)
            ctypes.memmove(_memory_data(ctx, memory) + offset, data, len(data))
        return True

    def read(self, offset: int, length: int) -> bytes | None:
        """A copy of guest memory [offset, offset+length); None when out of bounds."""
        if self._memory is None:
            return None
        ctx, memory = self._context(), byref(self._memory)
        if offset + length > _memory_size(ctx, memory):
            return None
        if not length:
            return b""
        return ctypes.string_at(_memory_data(ctx, memory) + offset, length)
