"""The one Engine of a WasmBackend: fuel, epochs, and a pooling instance allocator.

Per-call instantiation is the cost that matters (a fresh instance for every call). With the
default on-demand allocator each instance maps and unmaps its linear memory; the pooling
allocator keeps ``POOL_SLOTS`` pre-reserved slots and resets a slot's pages when an instance
dies, so nothing of one call's memory is visible to the next (wasmtime's multi-tenant design).
wasmtime-py has no Config setter for it, so it is set through the C API.

Hazards: each slot reserves ``POOL_MAX_MEMORY`` of address space (not memory) up front; when
that reservation would fail (a low RLIMIT_AS, a 32-bit host) the backend falls back to the
on-demand allocator and says so in its fingerprint (``pooling_allocator`` in ``missing``),
with small memory reservations (``_on_demand_memories``) since its address space is short.
That is decided before the engine is made (``pool_fits``): wasmtime's C API does not report a
failed reservation, it panics and aborts the process. At most ``POOL_SLOTS`` instances can be
live at once: the backend holds a semaphore of that size around every call. Modules compile
on the calling thread, never on a pool of wasmtime's (see ``_config``: fork).
"""

from __future__ import annotations

import mmap

import wasmtime
from wasmtime import _ffi as ffi

__all__ = [
    "ENGINE_TAGS",
    "ON_DEMAND_GROWTH",
    "POOL_MAX_MEMORY",
    "POOL_SLOTS",
    "make_engine",
    "pool_fits",
]

#: Concurrent instances (= concurrent wasm calls) per backend.
POOL_SLOTS = 64
#: Largest linear memory a slot holds: Limits.wasm_memory_mb allows up to 4096 MiB.
POOL_MAX_MEMORY = 4096 * 1024 * 1024
_TABLE_ELEMENTS = 10_000
#: The guard wasmtime puts after each slot's memory (and once before the first): its default
#: ``memory_guard_size`` on 64-bit hosts.
_GUARD = 32 * 1024 * 1024
#: Address space asked for on top of the memory slots: the pool's other mappings (~2 GiB,
#: measured with wasmtime 50: instance and table slots, sized by wasmtime's own defaults) and
#: room for the rest of the process (thread stacks, malloc arenas, compiled code). A pool that
#: fits with less would leave wasmtime's next allocation to fail, and Rust aborts on that too.
_MARGIN = 4 * 1024 * 1024 * 1024
#: What must be free for the pooled engine to be made: ~264 GiB.
POOL_RESERVATION = POOL_SLOTS * (POOL_MAX_MEMORY + _GUARD) + _GUARD + _MARGIN
#: The on-demand engine's linear memories (see ``_on_demand_memories``): reserved at their
#: initial size plus ``ON_DEMAND_GROWTH`` (again after each move), guarded by
#: ``_ON_DEMAND_GUARD``. 64 MiB is ``Limits.wasm_memory_mb``'s default: a call within it
#: never moves its memory.
ON_DEMAND_GROWTH = 64 * 1024 * 1024
_ON_DEMAND_GUARD = 64 * 1024
#: What changes the code an engine generates, for the module cache's key: a module compiled
#: for one kind of engine is never offered to the other (wasmtime would refuse it anyway).
ENGINE_TAGS = {
    True: "pool",
    False: f"on-demand/reserve0+grow{ON_DEMAND_GROWTH}+guard{_ON_DEMAND_GUARD}",
}


def _config(pooled: bool) -> wasmtime.Config:
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    config.cranelift_opt_level = "speed"
    # Compiled on this thread, not on wasmtime's (rayon's) pool: the pool's threads do not
    # survive fork, so a forked child compiling a module would wait for them forever. The
    # guests are small (tens of KiB: ~70 ms to compile either way on 2 cores) and each is
    # compiled once, then loaded from the module cache.
    config.parallel_compilation = False
    # Copying the (small) data segments into a slot measured faster than mapping a
    # copy-on-write image and faulting its pages in.
    config.memory_init_cow = False
    if pooled:
        pool = ffi.wasmtime_pooling_allocation_config_new()
        try:
            ffi.wasmtime_pooling_allocation_config_total_core_instances_set(pool, POOL_SLOTS)
            ffi.wasmtime_pooling_allocation_config_total_memories_set(pool, POOL_SLOTS)
            ffi.wasmtime_pooling_allocation_config_total_tables_set(pool, POOL_SLOTS)
            ffi.wasmtime_pooling_allocation_config_max_memory_size_set(pool, POOL_MAX_MEMORY)
            ffi.wasmtime_pooling_allocation_config_table_elements_set(pool, _TABLE_ELEMENTS)
            # Reset dead instances' pages in batches (one madvise pass for many slots):
            # ~5% of a small call, measured. A slot waiting in the batch is not handed out
            # until it is reset, and an allocation that finds no free slot flushes the batch
            # first, so this changes neither isolation nor capacity.
            ffi.wasmtime_pooling_allocation_config_decommit_batch_size_set(
                pool, max(1, POOL_SLOTS // 2)
            )
            ffi.wasmtime_pooling_allocation_strategy_set(config.ptr(), pool)
        finally:
            ffi.wasmtime_pooling_allocation_config_delete(pool)
    else:
        _on_demand_memories(config)
    return config


def _on_demand_memories(config: wasmtime.Config) -> None:
    """Small reservations for the on-demand engine's linear memories.

    Hazard: it is the engine of a process whose address space is short (a low RLIMIT_AS:
    ``pool_fits``), yet wasmtime's defaults reserve 4 GiB + a 32 MiB guard of address space
    for every instance (so that compiled code needs no bounds checks): under ``ulimit -v``
    4 GiB no call could run, and 16 concurrent calls under 8 GiB failed by the handful. Here
    each memory reserves its initial size plus ``ON_DEMAND_GROWTH`` (and a small guard), and
    moves (a copy) when it outgrows that: a call growing far past it copies its memory once
    per ``ON_DEMAND_GROWTH`` of growth, the price of the fallback. The code checks bounds
    explicitly, so it differs from the pooled engine's (``ENGINE_TAGS``)."""
    config.memory_reservation = 0
    config.memory_guard_size = _ON_DEMAND_GUARD
    config.memory_reservation_for_growth = ON_DEMAND_GROWTH
    config.memory_may_move = True


def pool_fits() -> bool:
    """Whether this process can reserve ``POOL_RESERVATION`` of address space now: a mapping
    of that size with no access (which commits no memory, ~20 µs) is made and dropped. It
    fails where the pool's own reservation would: past RLIMIT_AS (counted with what the
    process has mapped already), or past a 32-bit host's address space (OverflowError)."""
    try:
        # prot 0 is PROT_NONE (the mmap module does not name it).
        probe = mmap.mmap(-1, POOL_RESERVATION, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)
    except (OSError, OverflowError):
        return False
    probe.close()
    return True


def make_engine() -> tuple[wasmtime.Engine, bool]:
    """(engine, pooled): pooled when :func:`pool_fits`, else the on-demand allocator with
    small memory reservations. Every Engine of the backend is made here. The two generate
    different code (bounds checks): their compiled modules are cached apart (``ENGINE_TAGS``)."""
    pooled = pool_fits()
    return wasmtime.Engine(_config(pooled=pooled)), pooled
