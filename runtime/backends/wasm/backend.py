"""WasmBackend: pure data tools as Wasmtime guests, a fresh Store and instance per call.

Limits (all from :class:`runtime.models.Limits`) and what exceeding them becomes:

- ``wasm_fuel`` (instructions) -> :class:`ResourceLimitExceeded` ``limit="wasm_fuel"``: fuel is a
  CPU budget like RLIMIT_CPU, so it is a resource limit, not a timeout;
- ``timeout_s`` (wall clock, via epoch interruption) -> :class:`ToolTimeout`; its usage has
  ``fuel: None`` (unknown: Wasmtime does not save the fuel counter when the epoch check
  stops a loop without calls, so the store's figure can be far too low);
- ``wasm_memory_mb`` (linear memory, store limit) -> :class:`ResourceLimitExceeded`
  ``limit="wasm_memory_mb"``; a wasm stack overflow -> ``limit="wasm_stack"``;
- ``output_bytes`` -> :class:`OutputTooLarge`, checked before the output is copied out;
- an instance that cannot be created (its memory's reservation failed: the address space is
  short; or the store's limits refuse its memory or tables) -> :class:`ResourceLimitExceeded`
  ``limit="wasm_instance"``, wasmtime's reason in ``details["cause"]``;
- a guest's status-1 message -> :class:`ToolFailed`; any other trap -> :class:`ToolFailed`.

Every error of a call carries its usage (``fuel``, ``peak_memory_bytes``, ``cpu_ms``,
``wall_ms``; zeros for a call refused before its guest ran), which the broker writes into
the call's audit completion record.

The trap code is data in ``details["trap"]`` (``TrapCode`` name, lower case); nothing is
parsed out of a message. Calls run in a worker thread (``run``) or the caller's thread
(``run_sync``); a call cannot be interrupted by cancellation, but is bounded by its fuel and
epoch deadline.

A call's store, instance, guest calls and copies run as one foreign call in a small C helper
(``_native``, built with the pinned zig on first use), which keeps the GIL until the guest's
first epoch tick (a short call never hands it to another thread; a long one holds it for at
most one tick) and ticks the epoch from a C thread that never needs the GIL; where the helper
cannot be built or loaded, the same steps run one ctypes call at a time (``_hot``) with the
GIL released and a Python ticker, with the same results and errors, and the fingerprint
lists ``native_call`` as missing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import queue
import stat
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread
import wasmtime

from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.backends.wasm._build import build_guests, default_cache_dir
from runtime.backends.wasm._engine import ENGINE_TAGS, POOL_SLOTS, make_engine
from runtime.backends.wasm._hot import GuestStore, PreLinked, address_of
from runtime.backends.wasm._native import (
    NativeCaller,
    NativeResult,
    NativeTicker,
    Status,
    load_native,
)
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.cache import ModuleCache, read_own_file
from runtime.catalogue._wasm_ref import builtin_guest_names
from runtime.catalogue._wasm_ref import module_path as _module_path
from runtime.catalogue._wasm_ref import wasm_field as _wasm_field
from runtime.errors import (
    ExecutionError,
    ManifestError,
    OutputTooLarge,
    ResourceLimitExceeded,
    SandboxError,
    ToolFailed,
    ToolTimeout,
)
from runtime.models import Limits, ToolSpec
from runtime.toolkit import is_builtin

__all__ = [
    "EPOCH_TICK_S",
    "MAX_MODULE_BYTES",
    "GuestModule",
    "WasmBackend",
    "check_custom_module",
    "load_custom_module",
]

#: The largest custom wasm module accepted, bytes (a larger one is a ManifestError at manifest
#: load). Compiling costs about 2 s per MB of code (a 12 MB module of 20k functions took 23 s),
#: and the first call of a tool waits for it; the built-in guests are each under 100 KB.
MAX_MODULE_BYTES = 4 * 1024 * 1024
#: Epoch ticker period, seconds: the granularity of the wall-clock deadline.
EPOCH_TICK_S = 0.01
_MIB = 1024 * 1024
_PAGE = 65536
_TABLE_ELEMENTS = 10_000
_I32 = wasmtime.ValType.i32()
_I64 = wasmtime.ValType.i64()
_MAX_FUEL = 2**63 - 1
_ALLOC = GuestABI.ALLOC.encode()
_OOM = GuestABI.OOM.encode()
_WASM_MAGIC = b"\0asm"
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GuestModule:
    """A module's bytes; a custom module's are verified against its (required) pin."""

    path: Path
    sha256: str
    wasm: bytes


#: Tools kept in WasmBackend._hot.
_HOT_MAX = 256


def _export_name(spec: ToolSpec) -> str:
    """``wasm.export``, defaulting to the tool's name."""
    if (spec.wasm or {}).get("export") is None:
        return spec.name
    return _wasm_field(spec, "export")


def _read_module_file(spec: ToolSpec, path: Path) -> bytes:
    """The bytes of a custom module file, at most MAX_MODULE_BYTES; ManifestError otherwise.

    Hazard: the path comes from a manifest. Read naively, a FIFO there blocks for ever (at
    manifest load, or under a call) and ``/dev/zero`` reads until MemoryError. So it is
    opened non-blocking, must be a regular file (checked on the descriptor before anything
    else: ``os.fdopen`` of a directory raises IsADirectoryError, which escaped as a
    traceback) and is read from that descriptor, no more than the cap."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ManifestError(f"tool {spec.name}: cannot read wasm module {path}: {exc}") from exc
    try:
        _check_module_stat(spec, path, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as f:
        try:
            wasm = f.read(MAX_MODULE_BYTES + 1)  # the file may have grown since the fstat
        except OSError as exc:
            raise ManifestError(f"tool {spec.name}: cannot read wasm module {path}: {exc}") from exc
    if len(wasm) > MAX_MODULE_BYTES:
        raise ManifestError(
            f"tool {spec.name}: wasm module {path.name} is over the {MAX_MODULE_BYTES} bytes "
            "a custom module may have",
            limit=MAX_MODULE_BYTES,
        )
    return wasm


def _check_module_stat(spec: ToolSpec, path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise ManifestError(f"tool {spec.name}: wasm module {path} is not a regular file")
    if st.st_size > MAX_MODULE_BYTES:
        raise ManifestError(
            f"tool {spec.name}: wasm module {path.name} is {st.st_size} bytes, over the "
            f"{MAX_MODULE_BYTES} a custom module may have",
            limit=MAX_MODULE_BYTES,
            size=st.st_size,
        )


def _check_pin(spec: ToolSpec, path: Path, digest: str, *, required: bool) -> None:
    """``wasm.sha256`` against the module's digest (hex in either case: PowerShell's
    Get-FileHash prints upper case). A custom module must be pinned (``required``): the
    manifest is what the user reviewed, and without a pin a module replaced on disk ran
    silently. The refusal gives the module's digest, to pin once the user has checked the
    file is theirs. A built-in guest is the project's own build: a pin there is optional."""
    pin = (spec.wasm or {}).get("sha256")
    if pin is None:
        if required:
            raise ManifestError(
                f"tool {spec.name}: wasm module {path.name} is not pinned: a custom module "
                f'needs "sha256" in the manifest\'s "wasm"; this file\'s sha256 is {digest} '
                "(pin it once you have checked the file is the module you mean to run)",
                field="wasm.sha256",
                actual=digest,
            )
        return
    if not isinstance(pin, str) or pin.lower() != digest:
        raise ManifestError(
            f"tool {spec.name}: wasm module {path.name} does not match its sha256 pin",
            field="wasm.sha256",
            expected=pin,
            actual=digest,
        )


def _read_guest(path: Path) -> GuestModule:
    """A built-in guest's bytes, read with the checks ``build_guests`` kept it by: ours, no
    symlink, closed to others."""
    wasm = read_own_file(path)
    if wasm is None:
        raise SandboxError(
            f"built-in wasm guest {path} is not a private file of this user", path=str(path)
        )
    return GuestModule(path=path, sha256=hashlib.sha256(wasm).hexdigest(), wasm=wasm)


def _read_pinned(spec: ToolSpec, path: Path) -> GuestModule:
    """A custom module's bytes, checked against its (required) pin."""
    wasm = _read_module_file(spec, path)
    digest = hashlib.sha256(wasm).hexdigest()
    _check_pin(spec, path, digest, required=True)
    return GuestModule(path=path, sha256=digest, wasm=wasm)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a compiled module offers the guest ABI (guests/README.md): its memory's initial
    size, its tool functions ``(i32, i32) -> i64`` by name, and whether it has ``rt_oom``."""

    min_memory_bytes: int
    exports: frozenset[str]
    has_oom: bool


def _compiled(
    spec: ToolSpec, path: Path, guest: GuestModule, modules: ModuleCache
) -> wasmtime.Module:
    """``guest`` compiled (or loaded precompiled) by ``modules``' engine; ManifestError with
    wasmtime's reason when it cannot be."""
    if not guest.wasm.startswith(_WASM_MAGIC):
        # wasmtime-py compiles WAT text too: a text file passed no validation at manifest
        # load and then ran at call time. A module is its binary form (guests/README.md).
        raise ManifestError(
            f"tool {spec.name}: {path.name} is not a valid wasm module (no binary module "
            "header: a .wasm file, not WAT text, is needed)"
        )
    try:
        return modules.load(guest.wasm, guest.sha256)
    except wasmtime.WasmtimeError as exc:
        msg = f"tool {spec.name}: {path.name} is not a valid wasm module"
        # wasmtime's first line says why: a parse error, or valid wasm past what the
        # pooling allocator gives an instance (a huge table, a second memory), which the
        # bare sentence above would misname.
        reason = next(iter(str(exc).strip().splitlines()), "")
        if reason:
            msg = f"{msg} for this runtime ({reason})"
        raise ManifestError(msg) from exc


def _abi_shape(spec: ToolSpec, path: Path, module: wasmtime.Module) -> _Shape:
    """The module's :class:`_Shape`; ManifestError when it imports anything or lacks the
    ABI's exports (``memory``, ``rt_alloc(i32) -> i32``)."""
    if module.imports:
        raise ManifestError(f"tool {spec.name}: a wasm guest may not import anything")
    tools: set[str] = set()
    min_memory = 0
    has_memory = has_alloc = has_oom = False
    for exp in module.exports:
        ty = exp.type
        if isinstance(ty, wasmtime.MemoryType) and exp.name == GuestABI.MEMORY:
            has_memory = True
            min_memory = ty.limits.min * _PAGE
        elif isinstance(ty, wasmtime.FuncType):
            params, results = list(ty.params), list(ty.results)
            if exp.name == GuestABI.ALLOC and params == [_I32] and results == [_I32]:
                has_alloc = True
            elif exp.name == GuestABI.OOM and params == [] and results == [_I32]:
                has_oom = True
            elif params == [_I32, _I32] and results == [_I64]:
                tools.add(exp.name)
    if not (has_memory and has_alloc):
        raise ManifestError(
            f"tool {spec.name}: {path.name} does not follow the guest ABI "
            f"(exports '{GuestABI.MEMORY}' and '{GuestABI.ALLOC}(i32) -> i32' needed)"
        )
    return _Shape(min_memory, frozenset(tools), has_oom)


def _check_export(spec: ToolSpec, exports: frozenset[str]) -> None:
    export = _export_name(spec)
    if export not in exports:
        raise ManifestError(
            f"tool {spec.name}: wasm module exports no function {export}(i32, i32) -> i64"
        )


def _module_cache(engine: wasmtime.Engine, pooled: bool, directory: Path | None) -> ModuleCache:
    """The module cache of an engine from ``make_engine`` (``directory`` None: in memory)."""
    tag = f"{WasmBackend.CONFIG_TAG}/{ENGINE_TAGS[pooled]}"
    return ModuleCache(engine, directory, tag)


def _load_shape(spec: ToolSpec, module: GuestModule) -> _Shape:
    """The checks a call's first compile makes (``WasmBackend._compile``), at manifest load:
    compiled by an engine made as the backend's is (its pooling allocator refuses what no
    call could instantiate), in memory (loading manifests writes nothing), then dropped."""
    engine, pooled = make_engine()
    compiled = _compiled(spec, module.path, module, _module_cache(engine, pooled, None))
    return _abi_shape(spec, module.path, compiled)


def load_custom_module(spec: ToolSpec) -> GuestModule:
    """Read a custom tool's module (relative to its manifest) and check it as a call would.

    For registration: raises ManifestError when the file is missing or not a regular file,
    is unpinned or does not match its pin, is not valid wasm, or is valid wasm that no call
    could run: it imports anything, lacks the ABI's exports, lacks the tool's export (or has
    it with another signature), or is past what the engine gives an instance (a huge table,
    a second memory). The same checks as a call's (``WasmBackend.load``), not a copy."""
    path = _module_path(spec)
    if path is None:
        raise ManifestError(f"tool {spec.name}: wasm.module is a built-in guest name, not a file")
    try:
        module = _read_pinned(spec, path)
    except ManifestError as exc:
        raise _not_a_guest_either(spec, path, exc) from exc
    _check_export(spec, _load_shape(spec, module).exports)
    return module


def _not_a_guest_either(spec: ToolSpec, path: Path, exc: ManifestError) -> ManifestError:
    """``exc``, or when a bare name (no folder, no ``.wasm``) names no file, an error that
    says which guests there are: most likely a built-in guest's name misspelt."""
    ref = _wasm_field(spec, "module")
    if "/" in ref or ref.lower().endswith(".wasm") or path.exists():
        return exc
    names = ", ".join(sorted(builtin_guest_names()))
    return ManifestError(
        f"tool {spec.name}: no built-in wasm guest named {ref!r} (the guests: {names}) and "
        f"no module file {path}",
        **exc.details,
    )


def _built_guest(ref: str) -> GuestModule | None:
    """The built-in guest ``ref``, built in the default cache if need be; None when it cannot
    be built or read on this machine (a cache that cannot be made or is not private, no
    compiler): the SandboxError every call of a built-in wasm tool reports then."""
    try:
        return _read_guest(build_guests(default_cache_dir() / "guests")[ref])
    except SandboxError as exc:
        _log.warning("wasm: built-in guest %r not checked at manifest load (%s)", ref, exc)
        return None


def _check_guest_tool(spec: ToolSpec) -> None:
    """A tool naming a built-in guest, checked as a call would: the guest (built in the
    default cache if need be) matches the pin if there is one, and has the tool's export.

    Where the guests cannot be built on this machine, only the guest's name is checked (by
    ``module_path``, which found it among the built-in guests): the pin and the export need
    the binary, and are left to the tool's calls. Those fail as every built-in wasm tool's
    do there (sandbox_error naming the cause); refusing the manifest instead would stop the
    whole folder loading, and every command given it, for a cache or a compiler, not for
    anything wrong with the manifest."""
    ref = _wasm_field(spec, "module")
    guest = _built_guest(ref)
    if guest is None:
        return
    _check_pin(spec, Path(ref), guest.sha256, required=False)
    _check_export(spec, _load_shape(spec, guest).exports)


def check_custom_module(spec: ToolSpec) -> None:
    """At manifest load: a module file must pass :func:`load_custom_module`, and a built-in
    guest named by a manifest outside the built-in catalogue must have the tool's export and
    match its pin if it has one (ManifestError otherwise; not checked where the guests cannot
    be built: :func:`_check_guest_tool`). The built-in catalogue's own
    manifests are not checked here: the project builds and tests them, and checking would
    compile every guest at every broker's start."""
    if _module_path(spec) is not None:
        load_custom_module(spec)
    elif not is_builtin(spec):
        _check_guest_tool(spec)


@dataclass(slots=True)
class _Loaded:
    module: wasmtime.Module
    pre: PreLinked
    sha256: str
    min_memory_bytes: int
    exports: frozenset[str]
    has_oom: bool


class _TickClock:
    """How many epoch ticks are due: one per EPOCH_TICK_S of wall time since the start.

    Hazard: the ticker is a Python thread, so it waits for the GIL and for a CPU; under load
    it wakes late. Counting one tick per wake-up would stretch every deadline by that lag
    (0.4 s became 1 s with 36 guests spinning on 2 cores); ticks are owed by the clock instead
    and paid on the next wake-up. After a very long stall (a suspended process) at most
    ``MAX_CATCH_UP`` are paid at once and the rest forgiven, so one wake-up stays short."""

    MAX_CATCH_UP = 1000

    __slots__ = ("_paid", "_start")

    def __init__(self, now: float) -> None:
        self._start = now
        self._paid = 0  # ticks paid since _start; counted, not summed, so nothing drifts

    def wait_s(self, now: float) -> float:
        return max(0.0, self._start + (self._paid + 1) * EPOCH_TICK_S - now)

    def due(self, now: float) -> int:
        owed = int((now - self._start) / EPOCH_TICK_S) - self._paid
        if owed <= 0:
            return 0
        if owed > self.MAX_CATCH_UP:
            self._start, self._paid = now, 0
            return self.MAX_CATCH_UP
        self._paid += owed
        return owed


class _EpochTicker:
    """What advances the engine's epoch; deadlines are counted in its ticks.

    With the native helper, a C thread (``NativeTicker``): native calls keep the GIL during a
    guest's first tick, so the tick source must never need the GIL (a Python ticker could
    not tick while a runaway guest holds it). Without the helper (or if the C thread cannot
    be started), one daemon Python thread, and calls release the GIL for their whole run.

    Hazard (fork): a forked child has neither thread, so nothing would tick its copy of the
    engine, and a runaway guest there would be stopped by its fuel alone, never its
    deadline. An after-fork hook (:func:`_forked_child`) marks every ticker not started, so
    the child's first call starts its own (``run_sync`` checks ``started``; nothing per
    call). The hook only assigns: after fork only the forking thread exists, so the locks
    and events the parent's threads used are replaced rather than taken, and no thread is
    started there (a child that makes no wasm call never has one)."""

    def __init__(self, engine: wasmtime.Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The C ticker while it runs; a call reads it once and holds it (see NativeTicker).
        self.native: NativeTicker | None = None
        self.started = False
        self._lock = threading.Lock()
        _TICKERS.add(self)

    def forked_child(self) -> None:
        """In a forked child (see the class): nothing runs, and the next call starts it."""
        # The parent's C ticker is not live here (_ticker.c: its generation is the
        # parent's), so dropping it stops, joins and destroys nothing; only its memory goes.
        self.native = None
        self._thread = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.started = False

    def start(self, native: NativeCaller | None) -> None:
        if self.started:
            return
        with self._lock:  # run_sync starts it lazily, possibly from several threads at once
            if not self.started:
                if native is not None:
                    self.native = native.ticker(address_of(self._engine.ptr()), EPOCH_TICK_S)
                if self.native is None:
                    self._stop.clear()
                    self._thread = threading.Thread(
                        target=self._run, name="wasm-epoch", daemon=True
                    )
                    self._thread.start()
                self.started = True

    def _run(self) -> None:
        clock = _TickClock(time.monotonic())
        while not self._stop.wait(clock.wait_s(time.monotonic())):
            for _ in range(clock.due(time.monotonic())):
                self._engine.increment_epoch()

    def close(self) -> None:
        with self._lock:
            thread, self._thread = self._thread, None
            ticker, self.native = self.native, None
            self.started = False
        if ticker is not None:
            ticker.stop()  # the memory goes with the object, once no call holds it
        if thread is not None:
            self._stop.set()
            thread.join()


#: Every live ticker, for the after-fork hook (weak: a backend's ticker goes with it).
_TICKERS: weakref.WeakSet[_EpochTicker] = weakref.WeakSet()
#: Every live backend, for the same hook.
_BACKENDS: weakref.WeakSet[WasmBackend] = weakref.WeakSet()
#: In a forked child: the engines (and what was made for them) that were busy at the fork,
#: replaced and kept for the process's life (WasmBackend._renew_inherited_engine).
_INHERITED_BUSY: list[object] = []


def _forked_child() -> None:
    for ticker in list(_TICKERS):
        ticker.forked_child()
    for backend in list(_BACKENDS):
        backend.forked_child()


os.register_at_fork(after_in_child=_forked_child)


class WasmBackend:
    """The ``wasm`` backend (see the module docstring for limits and errors)."""

    name = "wasm"
    #: ``run_sync`` runs a whole call in the caller's thread (the broker's sync fast path).
    sync_capable = True
    CONFIG_TAG = "fuel+epoch/v1"

    def __init__(self, *, cache_dir: Path | None = None, native: bool = True) -> None:
        """``native=False`` keeps calls on the ctypes path (``_hot.GuestStore``) even where the
        one-foreign-call helper (``_native``) could be built; both behave the same."""
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self._guests: dict[str, Path] | None = None
        self._lock = threading.Lock()
        # None: not resolved yet (first call); False: not available (or not wanted).
        self._native: NativeCaller | bool | None = None if native else False
        #: In a forked child whose engine was busy at the fork: replace it before its first
        #: use (see forked_child).
        self._engine_inherited_busy = False
        self._new_engine()
        _BACKENDS.add(self)

    def _new_engine(self) -> None:
        """The Engine and everything made for it: its pool's tokens, the compiled modules and
        their memos, the linker, the epoch ticker (not started) and the fingerprint."""
        self.engine, self.pooled = make_engine()
        self._engine_ptr = address_of(self.engine.ptr())
        # One token per pool slot: a call holds one while its instance is alive, so the pool is
        # never asked for more than it has. (A SimpleQueue is a C-level lock, cheaper per call
        # than a BoundedSemaphore built on a Condition.)
        self._capacity = POOL_SLOTS
        self._slots: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(self._capacity):
            self._slots.put(None)
        self._modules = _module_cache(self.engine, self.pooled, self.cache_dir / "modules")
        self._linker = wasmtime.Linker(self.engine)
        self._ticker = _EpochTicker(self.engine)
        self._loaded: dict[tuple[str, int, int], _Loaded] = {}
        #: A lock per module being compiled (see _compile_once).
        self._compiling: dict[tuple[str, int, int], threading.Lock] = {}
        self._builtin: dict[str, _Loaded] = {}
        # Per tool of a built-in guest: (its spec, the module, the export) as load() found
        # them. Built-in guests are never re-checked (no stat), and what else load() checks
        # (the export, the pin) depends only on the spec, treated as immutable once
        # registered (as the policy's plans do): the spec's identity is the key's check.
        self._hot: dict[str, tuple[ToolSpec, _Loaded, str]] = {}
        self._fingerprint = self._make_fingerprint()

    def forked_child(self) -> None:
        """In a forked child: a fresh lock, and a fresh engine on first use if the parent's
        was busy. Only assignments (see _EpochTicker).

        Hazards: the parent's threads are gone here, with whatever they held. The lock may
        have been held by one compiling a module (or loading the helper): the child's first
        compilation would wait for it for ever. A call in flight holds one of our tokens
        and a slot of the engine's pool, which nothing returns here: with all of them taken
        the child's first call would wait for ever, and its pool is short of them for good.
        Its store, and the engine's own locks a compiling thread held, are in whatever state
        the fork caught them. So an engine that had a call or a compilation in flight is
        not used again here: the child's first call (or load) makes a new one, and modules
        come back from the on-disk cache (a few ms for the engine's pool and ~0.3 ms a
        guest, measured). An idle engine is consistent and kept: a child of an idle parent
        pays nothing. A thread between taking a token and creating its store counts as in
        flight; no thread touches the pool without a token, or compiles without holding its
        module's lock (``_compiling``), which is in the table while it compiles."""
        self._engine_inherited_busy = (
            self._slots.qsize() < self._capacity
            or self._lock.locked()
            or any(lock.locked() for lock in list(self._compiling.values()))
        )
        self._lock = threading.Lock()
        self._compiling = {}

    def _renew_inherited_engine(self) -> None:
        """A forked child's engine busy at the fork (see forked_child) is replaced, once;
        the old one and all made for it are kept, never freed: freeing could take a lock a
        parent's thread held, and nothing here uses them again."""
        with self._lock:
            if self._engine_inherited_busy:
                _INHERITED_BUSY.append(
                    (self.engine, self._modules, self._linker, self._ticker, self._loaded)
                )
                self._new_engine()
                self._engine_inherited_busy = False

    def _make_fingerprint(self) -> Fingerprint:
        return Fingerprint(
            backend="wasm",
            mechanisms=("wasmtime", "fuel", "epoch_deadline", "store_limits", "no_imports"),
            missing=tuple(
                name
                for name, present in [
                    ("module_cache", self._modules.directory is not None),
                    ("pooling_allocator", self.pooled),
                    ("native_call", self._native is not False),
                ]
                if not present
            ),
        )

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Build the guests and the native helper (first run: a few seconds of zig), then
        start the epoch ticker (a C thread when the helper loaded)."""
        await anyio.to_thread.run_sync(self.guests)
        native = await anyio.to_thread.run_sync(self.native_caller)
        self._start(native)

    def _start(self, native: NativeCaller | None) -> None:
        """Before a process's first call (a forked child's included: see forked_child)."""
        if self._engine_inherited_busy:
            self._renew_inherited_engine()
        self._ticker.start(native)

    async def aclose(self) -> None:
        self._ticker.close()

    def close(self) -> None:
        self._ticker.close()

    def fingerprint(self) -> Fingerprint:
        return self._fingerprint

    # -- modules ---------------------------------------------------------------------------

    def native_caller(self) -> NativeCaller | None:
        """The one-foreign-call helper, built and loaded on first use; None when it cannot
        be (no compiler, a cache that is not private, another wasmtime's struct layouts):
        calls then take the ctypes path, with the same results and errors."""
        native = self._native
        if native is None:
            with self._lock:
                native = self._native
                if native is None:
                    try:
                        native = load_native(self.cache_dir)
                    except (OSError, ImportError) as exc:
                        _log.warning("wasm: native call helper unavailable (%s)", exc)
                        native = False
                    self._native = native
                    self._fingerprint = self._make_fingerprint()
        return native if isinstance(native, NativeCaller) else None

    def guests(self) -> dict[str, Path]:
        """Built-in guest name -> built module (built on first use)."""
        if self._guests is None:
            self._guests = build_guests(self.cache_dir / "guests")
        return self._guests

    def load(self, spec: ToolSpec) -> _Loaded:
        """Resolve, verify, compile (or load precompiled) and pre-link a tool's module.

        Custom modules are re-checked whenever the file changes (stat per call); built-in
        guests live in the user's own cache and are resolved once per backend."""
        if self._engine_inherited_busy:  # not one compilation for an engine replaced next
            self._renew_inherited_engine()
        ref = _wasm_field(spec, "module")
        loaded = self._builtin.get(ref)  # a built-in guest's name is never a file's
        custom: Path | None = None
        if loaded is None:
            custom = _module_path(spec)
            path = custom if custom is not None else self.guests().get(ref)
            if path is None:
                raise ManifestError(f"tool {spec.name}: no built-in wasm guest named {ref!r}")
            try:
                st = path.stat()
            except OSError as exc:
                missing = ManifestError(f"tool {spec.name}: wasm module {path} is missing")
                raise _not_a_guest_either(spec, path, missing) from exc
            key = (str(path), st.st_mtime_ns, st.st_size)
            loaded = self._loaded.get(key)
            if loaded is None:
                loaded = self._compile_once(key, spec, path, custom is None)
            if custom is None:
                self._builtin[ref] = loaded
        _check_export(spec, loaded.exports)
        # The pin was checked against these bytes when they were read, but by the spec that
        # first reached them: another spec of the same file (another pin, or none) may not.
        _check_pin(spec, custom or Path(ref), loaded.sha256, required=custom is not None)
        return loaded

    def _compile_once(
        self, key: tuple[str, int, int], spec: ToolSpec, path: Path, builtin: bool
    ) -> _Loaded:
        """The module at ``key``, compiled by one thread while others wanting it wait.

        Hazard: compiling is unbounded by any call's limits (a valid 12 MB module took 23 s).
        Under the backend-wide lock it held up every other tool's first call; now each module
        has its own lock, and ``self._lock`` is held only to find or drop that lock."""
        with self._lock:
            lock = self._compiling.setdefault(key, threading.Lock())
        try:
            with lock:
                loaded = self._loaded.get(key)
                if loaded is None:
                    loaded = self._compile(spec, path, builtin)
                    self._loaded[key] = loaded
                return loaded
        finally:
            with self._lock:
                if self._compiling.get(key) is lock and not lock.locked():
                    del self._compiling[key]

    def _compile(self, spec: ToolSpec, path: Path, builtin: bool) -> _Loaded:
        guest = _read_guest(path) if builtin else _read_pinned(spec, path)
        module = _compiled(spec, path, guest, self._modules)
        shape = _abi_shape(spec, path, module)
        try:
            pre = self._linker.instantiate_pre(module)
        except wasmtime.WasmtimeError as exc:
            raise ManifestError(f"tool {spec.name}: {path.name} cannot be linked") from exc
        return _Loaded(
            module,
            PreLinked(pre),
            guest.sha256,
            shape.min_memory_bytes,
            shape.exports,
            shape.has_oom,
        )

    # -- calls -----------------------------------------------------------------------------

    async def run(self, request: ExecRequest) -> ExecOutcome:
        return await anyio.to_thread.run_sync(self.run_sync, request)

    def run_sync(self, request: ExecRequest) -> ExecOutcome:
        """Run one call in the calling thread (the broker's sync path and benchmarks)."""
        if not self._ticker.started:  # the first call, in this process
            self._start(self.native_caller())
        spec = request.spec
        hot = self._hot.get(spec.name)
        if hot is not None and hot[0] is spec:
            loaded, export = hot[1], hot[2]
        else:
            loaded = self._load_for_call(spec)
            export = _export_name(spec)
            if self._builtin.get(_wasm_field(spec, "module")) is loaded:
                if len(self._hot) >= _HOT_MAX:  # names come from manifests: bound the memo
                    self._hot.clear()
                self._hot[spec.name] = (spec, loaded, export)
        payload = GuestABI.encode_arguments(request.arguments, request.arguments_json)
        result, usage = self._call(loaded, export, payload, request.limits)
        return ExecOutcome(result, usage, self._fingerprint)

    def _load_for_call(self, spec: ToolSpec) -> _Loaded:
        """``load``, whose ManifestError becomes the call's SandboxError naming the manifest.

        The manifest passed these checks when it loaded (the catalogue's loader); failing
        them now means what is on disk changed since (a module replaced, removed, made
        unreadable) or the spec never came from a loaded manifest. Either way the backend
        could not set the call up: ``sandbox_error`` (set-up failed), not ``internal_error``
        (a bug of ours) nor ``tool_error`` (the guest never ran, so it reported nothing)."""
        try:
            return self.load(spec)
        except ManifestError as exc:
            details: dict[str, Any] = {"field": "wasm.module", **exc.details}
            where = f"tool {spec.name}"
            if spec.source is not None:
                where = details["file"] = str(spec.source)
            raise SandboxError(f"{where}: {exc.message}", usage=_not_run(), **details) from exc

    def _call(
        self, loaded: _Loaded, export: str, payload: bytes, limits: Limits
    ) -> tuple[Any, dict[str, Any]]:
        memory_limit = limits.wasm_memory_mb * _MIB
        if loaded.min_memory_bytes > memory_limit:
            raise ResourceLimitExceeded(
                "the wasm module needs more memory than the limit allows",
                usage=_not_run(),
                limit="wasm_memory_mb",
                needed_bytes=loaded.min_memory_bytes,
            )
        # Size bombs end here, before any copy: the input has to fit in guest memory anyway.
        if len(payload) > memory_limit // 2:
            raise ResourceLimitExceeded(
                f"input of {len(payload)} bytes is over half the wasm memory limit",
                usage=_not_run(),
                limit="wasm_memory_mb",
                input_bytes=len(payload),
            )
        # Limits.wasm_fuel has no upper bound; the C API takes a u64 (and ctypes would wrap a
        # larger int silently, to a budget of next to nothing).
        fuel = min(limits.wasm_fuel, _MAX_FUEL)
        deadline = max(1, math.ceil(limits.timeout_s / EPOCH_TICK_S)) + 1
        native = self._native if self._native is not None else self.native_caller()
        # Held across the call: its memory cannot go while the helper may use it.
        tick = self._ticker.native
        slots = self._slots
        slots.get()
        try:
            if isinstance(native, NativeCaller):
                # The native call inline (this is every call's path where the helper loads):
                # one frame instead of two; a call that ran to its end comes back as a plain
                # tuple (NativeCaller.run), no NativeResult built.
                res = native.run(
                    self._engine_ptr,
                    loaded.pre,
                    export.encode(),
                    payload,
                    memory_limit,
                    _TABLE_ELEMENTS,
                    fuel,
                    deadline,
                    limits.output_bytes + 1,
                    loaded.has_oom,
                    False,
                    tick.address if tick is not None else 0,
                )
                if isinstance(res, NativeResult):
                    usage = {
                        "fuel": fuel - res.fuel_left,
                        "peak_memory_bytes": res.memory_size,
                        "cpu_ms": res.cpu_ns / 1e6,
                        "wall_ms": res.wall_ns / 1e6,
                    }
                    raise self._native_error(
                        res, usage, loaded.has_oom, memory_limit, limits.output_bytes
                    )
                status, body, may_overflow, fuel_left, memory_size, cpu_ns, wall_ns = res
                usage = {
                    "fuel": fuel - fuel_left,
                    "peak_memory_bytes": memory_size,
                    "cpu_ms": cpu_ns / 1e6,
                    "wall_ms": wall_ns / 1e6,
                }
                if status == GuestABI.STATUS_OK:
                    return _decoded(body, may_overflow, usage), usage
            else:
                out, usage = self._run_ctypes(
                    loaded, export, payload, limits=limits, fuel=fuel, deadline=deadline
                )
                status, body = out[0], out[1:]
                if status == GuestABI.STATUS_OK:
                    return _decoded(body, None, usage), usage
        finally:
            slots.put(None)
        if status == GuestABI.STATUS_CUT:
            # The output's first part, within output_bytes (a larger one is OutputTooLarge
            # before anything is copied): the memory bound was hit first.
            raise ResourceLimitExceeded(
                f"the wasm guest's result outgrew its memory ({len(body)} bytes written)",
                usage=usage,
                limit="wasm_memory_mb",
                written_bytes=len(body),
            )
        message = GuestABI.decode_message(body)[:2000]
        if status == GuestABI.STATUS_EXHAUSTED:
            raise ResourceLimitExceeded(message, usage=usage, limit="guest")
        if status == GuestABI.STATUS_ERROR:
            raise ToolFailed(message, usage=usage)
        raise SandboxError(f"wasm guest returned unknown status {status}", usage=usage)

    def _native_error(
        self,
        res: NativeResult,
        usage: dict[str, Any],
        has_oom: bool,
        memory_limit: int,
        output_limit: int,
    ) -> ExecutionError:
        status = res.status
        err: ExecutionError
        if status == Status.TRAP and res.trap is not None:

            def out_of_memory() -> bool:
                if not res.has_memory:
                    return False
                if has_oom:  # rt_oom() was called in the store, after the trap
                    return res.oom_flag == 1
                return res.memory_size + _PAGE > memory_limit

            err = self._trap_error(res.trap, usage=usage, out_of_memory=out_of_memory)
        elif status == Status.ERROR and not res.has_memory and res.error is not None:
            # An error before the instance had its memory: instantiating failed.
            err = _instance_error(res.error, usage)
        elif status in (Status.NO_STORE, Status.FUEL_ERROR):
            err = SandboxError("wasm store could not be set up", usage=usage)
        elif status == Status.ALLOC_FAILED:
            err = ResourceLimitExceeded(
                "the wasm guest could not allocate its input", usage=usage, limit="wasm_memory_mb"
            )
        elif status in (Status.BAD_INPUT_PTR, Status.NO_EXPORT):
            # NO_EXPORT: memory or rt_alloc missing, which load() already refuses.
            err = SandboxError(
                "wasm guest's rt_alloc returned an out-of-bounds pointer", usage=usage
            )
        elif status == Status.BAD_OUTPUT:
            err = SandboxError("wasm guest returned an out-of-bounds result", usage=usage)
        elif status == Status.OUTPUT_TOO_LARGE:
            size = (res.packed >> 32) - 1
            err = OutputTooLarge(
                f"wasm result of {size} bytes exceeds the {output_limit} limit",
                usage=usage,
                limit="output_bytes",
                size=size,
                preview=_preview(res.body),
            )
        else:  # ERROR, NO_HOST_MEMORY, or OK without an output (cannot happen)
            err = SandboxError("wasm guest could not be run", usage=usage)
        cause = res.trap or res.error
        if cause is not None:
            err.__cause__ = cause
        return err

    def _run_ctypes(
        self,
        loaded: _Loaded,
        export: str,
        payload: bytes,
        *,
        limits: Limits,
        fuel: int,
        deadline: int,
    ) -> tuple[bytes, dict[str, Any]]:
        """The call step by step through ``_hot.GuestStore`` (no native helper)."""
        memory_limit = limits.wasm_memory_mb * _MIB
        try:
            store = GuestStore(
                self._engine_ptr,
                memory_bytes=memory_limit,
                table_elements=_TABLE_ELEMENTS,
                fuel=fuel,
                epoch_deadline=deadline,
            )
        except wasmtime.WasmtimeError as exc:
            raise SandboxError("wasm store could not be set up", usage=_not_run()) from exc
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        try:
            try:
                store.instantiate(loaded.pre)
            except wasmtime.WasmtimeError as exc:
                usage = self._usage(store, fuel, cpu0, wall0)
                raise _instance_error(exc, usage) from exc
            ptr = store.call_i32(store.func(_ALLOC), len(payload))
            if not ptr:
                raise ResourceLimitExceeded(
                    "the wasm guest could not allocate its input",
                    usage=self._usage(store, fuel, cpu0, wall0),
                    limit="wasm_memory_mb",
                )
            if not store.write(ptr, payload):
                raise SandboxError(
                    "wasm guest's rt_alloc returned an out-of-bounds pointer",
                    usage=self._usage(store, fuel, cpu0, wall0),
                )
            func = store.func(export.encode())
            out_ptr, out_len = GuestABI.unpack(store.call(func, ptr, len(payload)))
            usage = self._usage(store, fuel, cpu0, wall0)
            if out_len == 0 or out_ptr + out_len > usage["peak_memory_bytes"]:
                raise SandboxError("wasm guest returned an out-of-bounds result", usage=usage)
            if out_len - 1 > limits.output_bytes:
                raise OutputTooLarge(
                    f"wasm result of {out_len - 1} bytes exceeds the {limits.output_bytes} limit",
                    usage=usage,
                    limit="output_bytes",
                    size=out_len - 1,
                    preview=_preview(store.read(out_ptr + 1, min(out_len - 1, _PREVIEW_BYTES))),
                )
            out = store.read(out_ptr, out_len) or b"\xff"
        except wasmtime.Trap as exc:
            usage = self._usage(store, fuel, cpu0, wall0)

            def out_of_memory() -> bool:
                return store.has_memory and self._out_of_memory(store, loaded.has_oom, memory_limit)

            raise self._trap_error(exc, usage=usage, out_of_memory=out_of_memory) from exc
        except wasmtime.WasmtimeError as exc:
            usage = self._usage(store, fuel, cpu0, wall0)
            raise SandboxError("wasm guest could not be run", usage=usage) from exc
        finally:
            store.close()
        return out, usage

    @staticmethod
    def _usage(store: GuestStore, fuel: int, cpu0: float, wall0: float) -> dict[str, Any]:
        # Linear memory never shrinks, so its size at the end is its peak (0 before the
        # instance exists).
        return {
            "fuel": fuel - store.fuel_left(),
            "peak_memory_bytes": store.memory_size(),
            "cpu_ms": (time.thread_time() - cpu0) * 1000.0,
            "wall_ms": (time.perf_counter() - wall0) * 1000.0,
        }

    @staticmethod
    def _trap_error(
        exc: wasmtime.Trap,
        *,
        usage: dict[str, Any],
        out_of_memory: Callable[[], bool],
    ) -> ExecutionError:
        """The typed error of a trap; ``out_of_memory`` is asked (while the store is alive)
        only for traps that are not fuel, deadline or stack."""
        code = exc.trap_code
        trap = code.name.lower() if code is not None else "unknown"
        if code == wasmtime.TrapCode.OUT_OF_FUEL:
            return ResourceLimitExceeded(
                "the wasm guest ran out of fuel (its instruction budget)",
                usage=usage,
                trap=trap,
                limit="wasm_fuel",
            )
        if code == wasmtime.TrapCode.INTERRUPT:
            # Wasmtime does not save the fuel counter when the epoch check stops a loop that
            # makes no call: the store's figure is then what was left at the loop's start (a
            # guest that spun for a second read as fuel 2). Unknown, so not reported.
            usage = {**usage, "fuel": None}
            return ToolTimeout(
                "the wasm guest ran past its deadline", usage=usage, trap=trap, limit="timeout_s"
            )
        if code == wasmtime.TrapCode.STACK_OVERFLOW:
            return ResourceLimitExceeded(
                "the wasm guest overflowed its stack", usage=usage, trap=trap, limit="wasm_stack"
            )
        if out_of_memory():
            return ResourceLimitExceeded(
                "the wasm guest ran out of memory",
                usage=usage,
                trap=trap,
                limit="wasm_memory_mb",
            )
        return ToolFailed(f"the wasm guest trapped ({trap})", usage=usage, trap=trap)

    @staticmethod
    def _out_of_memory(store: GuestStore, has_oom: bool, memory_limit: int) -> bool:
        """The guest's own rt_oom flag when it has one; otherwise a guest whose memory can
        no longer grow by a page is taken to have trapped for want of memory."""
        if has_oom:
            try:
                return store.call_i32(store.func(_OOM)) == 1
            except (wasmtime.Trap, wasmtime.WasmtimeError):
                return False
        return store.memory_size() + _PAGE > memory_limit


def _instance_error(exc: wasmtime.WasmtimeError, usage: dict[str, Any]) -> ExecutionError:
    """A guest's instance that could not be created (an error, not a trap, from
    instantiating a module that loaded): its memory's reservation failed (the address space
    is short: a low RLIMIT_AS, see ``_engine``) or the store's limits refused its memory or
    tables. Resources, not a defect of ours: resource_limit, with wasmtime's reason in
    ``details["cause"]`` (the error object says nothing more structured)."""
    cause = str(exc).strip()
    return ResourceLimitExceeded(
        "the wasm guest's instance could not be created (its memory could not be reserved, "
        "or its memory or tables are past the store's limits)",
        usage=usage,
        limit="wasm_instance",
        cause=cause[:2000],
    )


def _not_run() -> dict[str, Any]:
    """The usage of a call refused before its guest ran: nothing was spent."""
    return {"fuel": 0, "peak_memory_bytes": 0, "cpu_ms": 0.0, "wall_ms": 0.0}


def _decoded(body: bytes | bytearray, may_overflow: bool | None, usage: dict[str, Any]) -> Any:
    """``GuestABI.decode_result``; its error (an invalid result, a float out of range)
    carries the call's usage like every other error of a call that ran."""
    try:
        return GuestABI.decode_result(body, may_overflow)
    except ExecutionError as exc:
        exc.usage = usage
        raise


#: Bytes of an output too large that its error shows (``_native.c``'s RT_PREVIEW).
_PREVIEW_BYTES = 1024


def _preview(head: bytes | bytearray | None) -> str:
    """The error's preview of an output too large: its first bytes as text (the guest's
    result JSON, cut anywhere: a split character becomes U+FFFD)."""
    return bytes(head[:_PREVIEW_BYTES]).decode("utf-8", "replace") if head else ""
