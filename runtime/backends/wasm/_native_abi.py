"""The native helper's ABI as the host sees it: ``rt_native_call``'s statuses, ``rt_api`` and
``rt_call`` as ctypes structs (``_native.c``, field for field), the wasmtime functions whose
addresses the helper is given, the layout it must report, and the C epoch ticker's handle.

Hazard: a difference between these views and the helper's own is memory corruption, not an
exception; the helper reports its layout (``rt_native_layout``) and ``_native`` refuses it
when that is not :func:`expected_layout`. The wasmtime bindings are ``_hot._bind``'s,
checked against wasmtime-py's declarations at import.
"""

from __future__ import annotations

import ctypes
from ctypes import c_char_p, c_int32, c_int64, c_size_t, c_uint64, c_void_p
from typing import Any

import wasmtime
from wasmtime import _ffi as ffi

from runtime.backends.wasm import _hot

__all__ = ["NativeTicker", "Status", "address", "api_functions", "expected_layout"]


class Status:
    """``rt_native_call``'s statuses (the enum in ``_native.c``)."""

    OK = 0
    NO_STORE = 1
    FUEL_ERROR = 2
    ERROR = 3
    TRAP = 4
    NO_EXPORT = 5
    ALLOC_FAILED = 6
    BAD_INPUT_PTR = 7
    BAD_OUTPUT = 8
    OUTPUT_TOO_LARGE = 9
    NO_HOST_MEMORY = 10


class _Api(ctypes.Structure):
    # The order of rt_api in _native.c.
    _fields_ = [
        (name, c_void_p)
        for name in (
            "store_new",
            "store_context",
            "store_limiter",
            "store_delete",
            "set_fuel",
            "get_fuel",
            "set_epoch_deadline",
            "instantiate",
            "export_get",
            "call_unchecked",
            "memory_data",
            "memory_size",
            "error_delete",
            "trap_delete",
            "epoch_callback",
            "error_new",
            "trap_new_code",
            "engine_clone",
            "engine_delete",
            "increment_epoch",
        )
    ]


class _Call(ctypes.Structure):
    # rt_call in _native.c, field for field.
    _fields_ = [
        ("engine", c_void_p),
        ("pre", c_void_p),
        ("memory_bytes", c_int64),
        ("table_elements", c_int64),
        ("fuel", c_uint64),
        ("epoch_deadline", c_uint64),
        ("export_name", c_char_p),
        ("export_len", c_size_t),
        ("input", c_char_p),
        ("input_len", c_uint64),
        ("max_output", c_uint64),
        ("out_buf", c_void_p),
        ("out_cap", c_uint64),
        ("has_oom", c_int32),
        ("status", c_int32),
        ("oom_flag", c_int32),
        ("has_memory", c_int32),
        ("error", c_void_p),
        ("trap", c_void_p),
        ("fuel_left", c_uint64),
        ("memory_size", c_uint64),
        ("packed", c_uint64),
        ("output", c_void_p),
        ("cpu_ns", c_int64),
        ("wall_ns", c_int64),
        ("may_overflow", c_int32),
        ("out_status", c_int32),
        ("body_len", c_uint64),
        ("gil_save", c_void_p),
        ("gil_restore", c_void_p),
        ("ticker", c_void_p),
    ]


_error_delete = _hot._bind("wasmtime_error_delete", None, c_void_p)
_trap_delete = _hot._bind("wasm_trap_delete", None, c_void_p)
_epoch_callback = _hot._bind(
    "wasmtime_store_epoch_deadline_callback", None, c_void_p, c_void_p, c_void_p, c_void_p
)
_error_new = _hot._bind("wasmtime_error_new", c_void_p, c_char_p)
_trap_new_code = _hot._bind("wasmtime_trap_new_code", c_void_p, ctypes.c_uint8)
_engine_clone = _hot._bind("wasmtime_engine_clone", c_void_p, c_void_p)
_engine_delete = _hot._bind("wasm_engine_delete", None, c_void_p)
_increment_epoch = _hot._bind("wasmtime_engine_increment_epoch", None, c_void_p)


def address(fn: Any) -> int:
    return ctypes.cast(fn, c_void_p).value or 0


def expected_layout() -> list[int]:
    """What rt_native_layout must report: wasmtime-py's ctypes view and ours of rt_call."""
    return [
        ctypes.sizeof(ffi.wasmtime_extern_t),
        ffi.wasmtime_extern_t.of.offset,
        ctypes.sizeof(ffi.wasmtime_func_t),
        ctypes.sizeof(ffi.wasmtime_memory_t),
        ctypes.sizeof(ffi.wasmtime_instance_t),
        ctypes.sizeof(ffi.wasmtime_val_raw_t),
        ctypes.sizeof(_Api),
        ctypes.sizeof(_Call),
        *(getattr(_Call, field[0]).offset for field in _Call._fields_),
        wasmtime.TrapCode.INTERRUPT.value,  # the trap an epoch deadline raises
    ]


def api_functions() -> tuple[Any, ...]:
    """The wasmtime functions of ``rt_api``, in its order."""
    return (
        _hot._store_new,
        _hot._store_context,
        _hot._store_limiter,
        _hot._store_delete,
        _hot._set_fuel,
        _hot._get_fuel,
        _hot._set_epoch_deadline,
        _hot._instantiate,
        _hot._export_get,
        _hot._call_unchecked,
        _hot._memory_data,
        _hot._memory_size,
        _error_delete,
        _trap_delete,
        _epoch_callback,
        _error_new,
        _trap_new_code,
        _engine_clone,
        _engine_delete,
        _increment_epoch,
    )


#: The ticker's functions, called with the GIL held (PYFUNCTYPE): ``stop`` then cannot run
#: while a call is between its "is the ticker live" check and its guest's first tick (that
#: call holds the GIL), so no call is left holding the GIL with nothing to tick.
_TickerStart = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_int64)
_TickerEnd = ctypes.PYFUNCTYPE(None, c_void_p)


class NativeTicker:
    """A running C epoch ticker of one engine (``_ticker.c``): a thread that needs no GIL.

    ``address`` is what :meth:`NativeCaller.run` takes as ``ticker``; it stays valid for as
    long as this object lives (a caller holds the object across its call)."""

    __slots__ = ("_free", "_lib", "_stop", "address")

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self._lib = lib  # the functions below live in it
        self._stop = _TickerEnd(address(lib.rt_native_ticker_stop))
        self._free = _TickerEnd(address(lib.rt_native_ticker_free))
        self.address = handle

    def stop(self) -> None:
        """Stop ticking (idempotent): calls that start afterwards release the GIL up front,
        a call already past its first tick is bounded by its fuel (as with no ticker)."""
        self._stop(self.address)

    def __del__(self) -> None:
        # The memory goes only with this object: a call holds it while the helper may read.
        handle, self.address = self.address, 0
        if handle:
            self._free(handle)
