"""The whole per-call sequence in one foreign call: ``_native.c``, built for this host.

``_hot.GuestStore`` makes ~20 ctypes calls per wasm call (store, limits, fuel, epoch,
instantiate, three export lookups, two guest calls, sizes, copies, delete); each converts its
arguments, releases and re-takes the GIL and sits in a Python frame, which together cost more
than wasmtime's own work. ``NativeCaller.call`` does the same steps in C in one foreign call
(the GIL given up at most once: see the hazard below), then hands back the statuses, the
usage figures and a copy of the output.

The helper is compiled with the pinned ``ziglang`` (already needed for the guests) into the
user's cache, keyed by a digest of its sources (``_native.c``, ``_ticker.c``/``.h``,
``_overflow.c``), the compiler version, the flags and the machine. It links against nothing:
wasmtime's functions reach it as the addresses of the ctypes bindings in ``_hot`` (whose C
signatures are checked against wasmtime-py's own at import) and its struct layouts are
compared with wasmtime-py's ctypes view before first use.

Hazards:

- ``dlopen`` runs the file's code in this process, so it is only loaded from a directory that
  is ours and writable by nobody else, from a file that is ours and not group/world-writable
  (the same rule as the compiled-module cache), checked on the open descriptor that is then
  loaded (``runtime._fsio.own_library``: through /proc under a name no other library of the
  process has), so nothing can be swapped in between; anything else (no /proc included) and
  the helper is not used.
- Any failure to build, load or verify the helper (no compiler, a read-only cache, another
  wasmtime's layouts) leaves the backend on the ``GuestStore`` path, which has the same
  behaviour and errors; the backend's fingerprint then lists ``native_call`` as missing.
- ``rt_call.output`` is malloc'd by the helper and must be freed with ``rt_native_free``
  exactly once; ``error`` and ``trap`` are wasmtime objects whose ownership passes to the
  exception objects built from them.
- The GIL: through the accelerator's ``wasm_call`` a call keeps it while its guest runs and
  gives it up at the guest's first epoch tick (``_native.c`` says why); that needs the C
  ticker (:class:`NativeTicker`, ``_ticker.c``), which never needs the GIL, passed as
  ``ticker``. A :class:`NativeTicker`'s memory is freed only when the object is collected,
  so a call holding a reference can never see it freed; ``stop()`` runs with the GIL held,
  so no call can be between its "is the ticker live" check and its guest's first tick when
  the ticker stops. The ctypes path releases the GIL for the whole call, as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import platform
import threading
from ctypes import c_char_p, c_int32, c_size_t, c_void_p
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import wasmtime

from runtime import _speedups
from runtime._forksafe import ForkSafeLock
from runtime._fsio import own_library, private_dir
from runtime._zigcc import zig_cc
from runtime.backends.wasm import _hot
from runtime.backends.wasm._native_abi import (
    NativeTicker,
    Status,
    _Api,
    _Call,
    _TickerStart,
    address,
    api_functions,
)
from runtime.backends.wasm._native_abi import (
    expected_layout as _expected_layout,  # the seam tests replace
)
from runtime.errors import SandboxError

__all__ = [
    "SCRATCH_BYTES",
    "NativeCaller",
    "NativeResult",
    "NativeTicker",
    "Ok",
    "Status",
    "load_native",
]

_SOURCE = Path(__file__).with_name("_native.c")
#: The other sources built into the helper, and its header (the digest covers them all).
_PARTS = tuple(Path(__file__).with_name(name) for name in ("_ticker.c", "_overflow.c"))
_HEADERS = (Path(__file__).with_name("_ticker.h"),)
CFLAGS = ("-O2", "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror")
_lock = ForkSafeLock()  # a forked child gets it unheld (runtime._forksafe)


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs ~2x, once per call
class NativeResult:
    """One call's outcome. ``error``/``trap`` are built (and own their wasmtime objects);
    ``out_status`` and ``body`` (the output after its status byte) are set for Status.OK;
    for Status.OUTPUT_TOO_LARGE, ``body`` is the output's head (the error's preview)."""

    status: int
    fuel_left: int
    memory_size: int
    packed: int
    oom_flag: int
    has_memory: bool
    cpu_ns: int
    wall_ns: int
    may_overflow: bool
    out_status: int
    body: bytes | bytearray | None
    error: wasmtime.WasmtimeError | None
    trap: wasmtime.Trap | None


#: What :meth:`NativeCaller.run` returns for a call that ran to its end (``Status.OK``):
#: ``(out_status, body, may_overflow, fuel_left, memory_size, cpu_ns, wall_ns)``.
Ok = tuple[int, bytes | bytearray, bool, int, int, int, int]

#: Bytes of output body a thread's scratch buffer takes; longer ones are malloc'd in C.
SCRATCH_BYTES = 64 * 1024


class _Scratch:
    """A thread's reusable call struct, its pointer, and the buffer outputs are copied into:
    building those per call (a ctypes Structure, byref, string_at on a malloc'd copy, free)
    cost more than the rest of the host's side of a call."""

    __slots__ = ("address", "buf", "busy", "call", "ref", "view")

    def __init__(self) -> None:
        self.busy = False
        self.call = _Call()
        self.ref = ctypes.pointer(self.call)
        self.buf = bytearray(SCRATCH_BYTES)
        # Exports buf's memory (buf can no longer be resized, and is not); the view keeps it.
        self.view = (ctypes.c_char * SCRATCH_BYTES).from_buffer(self.buf)
        self.address = self.call.out_buf = ctypes.addressof(self.view)
        self.call.out_cap = SCRATCH_BYTES


def _direct_call(lib: ctypes.CDLL) -> tuple[Any, int, int] | None:
    """The C accelerator's ``wasm_call`` with the helper's ``rt_native_call`` and
    ``rt_native_free`` addresses, when its rt_call is :class:`_Call` (whose layout the helper
    itself reported): the native call without ctypes' foreign call and struct fields. None
    (the ctypes path) without the accelerator (``RUNTIME_PURE_PYTHON=1`` included) or with
    any difference in the layout."""
    mod = _speedups.module()
    if mod is None:
        return None
    fields: list[tuple[str, Any]] = _Call._fields_  # type: ignore[assignment]
    expected = (ctypes.sizeof(_Call), *(getattr(_Call, field[0]).offset for field in fields))
    if tuple(mod.wasm_call_layout()) != expected:
        return None
    return mod.wasm_call, address(lib.rt_native_call), address(lib.rt_native_free)


class NativeCaller:
    """The loaded helper (see the module docstring)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        layout = (c_size_t * 64)()
        count = lib.rt_native_layout
        count.restype = c_size_t
        count.argtypes = [ctypes.POINTER(c_size_t), c_size_t]
        n = count(layout, 64)
        if list(layout[:n]) != _expected_layout():
            raise ImportError("the native wasm helper's struct layouts differ from wasmtime-py's")
        self._lib = lib  # keeps the library mapped for as long as the function objects live
        api = _Api(*(address(fn) for fn in api_functions()))
        if not all(getattr(api, field[0]) for field in _Api._fields_):
            raise ImportError("a wasmtime function's address is missing")
        init = lib.rt_native_init
        init.restype = None
        init.argtypes = [ctypes.POINTER(_Api)]
        init(ctypes.byref(api))
        self._call = lib.rt_native_call
        self._call.restype = c_int32
        self._call.argtypes = [ctypes.POINTER(_Call)]
        self._local = threading.local()
        self._free = lib.rt_native_free
        self._free.restype = None
        self._free.argtypes = [c_void_p]
        self._may_overflow = lib.rt_native_may_overflow
        self._may_overflow.restype = c_int32
        self._may_overflow.argtypes = [c_char_p, c_size_t]
        self._direct = _direct_call(lib)
        self._ticker_start = _TickerStart(address(lib.rt_native_ticker_start))

    def ticker(self, engine: int, period_s: float) -> NativeTicker | None:
        """Start a C ticker advancing ``engine``'s epoch (the address of a live Engine, which
        the ticker clones: it never outlives it) once per ``period_s``; None when it cannot
        be started (the caller then ticks from Python, and calls release the GIL up front)."""
        address = self._ticker_start(engine, round(period_s * 1e9))
        return NativeTicker(self._lib, address) if address else None

    def may_overflow(self, data: bytes) -> bool:
        """The C twin of ``abi._may_overflow`` (what ``call`` reports for its output)."""
        return bool(self._may_overflow(data, len(data)))

    def call(
        self,
        engine: int,
        pre: _hot.PreLinked,
        export: bytes,
        payload: bytes,
        *,
        memory_bytes: int,
        table_elements: int,
        fuel: int,
        epoch_deadline: int,
        max_output: int,
        has_oom: bool,
    ) -> NativeResult:
        """Run one call: a fresh store and instance, freed before this returns."""
        res = self.run(
            engine,
            pre,
            export,
            payload,
            memory_bytes,
            table_elements,
            fuel,
            epoch_deadline,
            max_output,
            has_oom,
            True,
        )
        assert type(res) is NativeResult
        return res

    def run(  # noqa: PLR0917 - positional: keywords cost per call on the hot path
        self,
        engine: int,
        pre: _hot.PreLinked,
        export: bytes,
        payload: bytes,
        memory_bytes: int,
        table_elements: int,
        fuel: int,
        epoch_deadline: int,
        max_output: int,
        has_oom: bool,
        full: bool = False,
        ticker: int = 0,
    ) -> Ok | NativeResult:
        """:meth:`call` for the backend's hot path, positional: on ``Status.OK`` the tuple
        :data:`Ok` (``(out_status, body, may_overflow, fuel_left, memory_size, cpu_ns,
        wall_ns)``) without building a NativeResult (~60 opcodes a call), else (and with
        ``full``, always) the call's NativeResult. ``ticker``: a live :class:`NativeTicker`'s
        address (the caller holds the object) for the accelerator's path to keep the GIL
        during a short guest run; 0, or the ctypes path, release it for the whole call."""
        local = self._local
        scratch: _Scratch | None = getattr(local, "scratch", None)
        if scratch is None:
            scratch = local.scratch = _Scratch()
        elif scratch.busy:
            # Re-entered on this thread (a signal handler calling a tool between the foreign
            # call and the copy out of the buffer): a scratch of its own, not the one in use.
            scratch = _Scratch()
        direct = self._direct
        if direct is not None and not full:
            # The accelerator's wasm_call: the same struct on its C stack, the helper called
            # directly, the output into this thread's scratch, the same answers
            # (tests/wasm/test_native_direct.py compares them).
            scratch.busy = True
            try:
                res = direct[0](
                    direct[1],
                    direct[2],
                    engine,
                    pre.address,
                    export,
                    payload,
                    memory_bytes,
                    table_elements,
                    fuel,
                    epoch_deadline,
                    max_output,
                    has_oom,
                    scratch.address,
                    SCRATCH_BYTES,
                    ticker,
                )
            finally:
                scratch.busy = False
            if type(res) is tuple:
                if len(res) == 7:
                    return res
                st, left, size, packed, oom, has_mem, cpu, wall, over, out, data, err, trap = res
                return NativeResult(
                    st, left, size, packed, oom, has_mem, cpu, wall, over, out, data,
                    _hot._error(err) if err else None,
                    _hot._trap(trap) if trap else None,
                )  # fmt: skip
            # NotImplemented: an argument outside the struct's fields; ctypes decides.
        scratch.busy = True
        c = scratch.call
        try:
            c.engine = engine
            c.pre = pre.address
            c.memory_bytes = memory_bytes
            c.table_elements = table_elements
            c.fuel = fuel
            c.epoch_deadline = epoch_deadline
            c.export_name = export
            c.export_len = len(export)
            c.input = payload
            c.input_len = len(payload)
            c.max_output = max_output
            c.has_oom = has_oom
            # gil_save stays NULL: ctypes releases the GIL around this foreign call.
            # The caller holds ``pre`` (and with it the InstancePre) for the whole call.
            status = self._call(scratch.ref)
            body: bytes | bytearray | None = None
            if status == Status.OUTPUT_TOO_LARGE:
                # The output's head, for the error's preview (never malloc'd: RT_PREVIEW).
                body = scratch.buf[: min(c.body_len, SCRATCH_BYTES)]
            elif status == Status.OK:
                n = c.body_len
                if c.output:
                    try:
                        body = ctypes.string_at(c.output, n)
                    finally:
                        self._free(c.output)
                else:
                    body = scratch.buf[:n]
                if not full:
                    return (
                        c.out_status,
                        body,
                        bool(c.may_overflow),
                        c.fuel_left,
                        c.memory_size,
                        c.cpu_ns,
                        c.wall_ns,
                    )
            # Positional, in field order: keywords cost a dict's worth of work per call.
            return NativeResult(
                status,
                c.fuel_left,
                c.memory_size,
                c.packed,
                c.oom_flag,
                bool(c.has_memory),
                c.cpu_ns,
                c.wall_ns,
                bool(c.may_overflow),
                c.out_status,
                body,
                _hot._error(c.error) if c.error else None,
                _hot._trap(c.trap) if c.trap else None,
            )
        finally:
            c.input = None  # the struct would otherwise keep the last payload alive
            scratch.busy = False


def _digest() -> str:
    h = hashlib.sha256()
    h.update(f"zig {version('ziglang')} {' '.join(CFLAGS)} {platform.machine()}\n".encode())
    for source in (_SOURCE, *_PARTS, *_HEADERS):
        h.update(source.read_bytes())
    return h.hexdigest()[:16]


def _open_own_library(path: Path) -> ctypes.CDLL:
    """dlopen exactly the file that was checked (:func:`runtime._fsio.own_library`)."""
    return own_library(path, "the native helper", ctypes.CDLL)


def _compile(target: Path) -> None:
    try:
        zig_cc([_SOURCE, *_PARTS], CFLAGS, target, what="the wasm native helper", mode=0o700)
    except SandboxError as exc:  # the caller falls back to the ctypes path on OSError
        stderr = exc.details.get("stderr")
        raise OSError(f"{exc.message}: {stderr[-2000:]}" if stderr else exc.message) from exc


def load_native(cache_dir: Path) -> NativeCaller:
    """Build (once per source and compiler) and load the helper from ``cache_dir/native``.

    Raises OSError (no compiler, a cache that is not private) or ImportError (layouts)."""
    root = cache_dir / "native"
    out = root / _digest()
    with _lock:
        if not (private_dir(root) and private_dir(out)):
            raise OSError(f"{out} is not a private directory; the native helper is not loaded")
        target = out / "_native.so"
        if not target.exists():
            _compile(target)
        lib = _open_own_library(target)
        try:
            return NativeCaller(lib)
        except AttributeError as exc:  # a library without the helper's symbols
            raise ImportError(f"{target} is not the native helper: {exc}") from exc
