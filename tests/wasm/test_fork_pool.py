"""A forked child and the engine's pool (``WasmBackend.forked_child``): calls in flight on
the parent's other threads at the fork hold pool slots (and the backend's tokens for them)
that nothing returns in the child; its calls must still run, on an engine of its own, while
a child of an idle parent keeps the parent's engine (it pays nothing)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.backends.wasm import WasmBackend, _engine
from runtime.backends.wasm import backend as wasm_backend
from runtime.errors import ToolTimeout
from tests._forked import held_by_another_thread, in_a_forked_child

from .conftest import ECHO_WAT, request, wat_tool
from .test_gil_hold import LOOP

pytestmark = [pytest.mark.wasm, pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")]

#: Slots of the small pool these tests fill (two guests spinning on two cores).
SLOTS = 2


@pytest.fixture(params=[True, False], ids=["native", "ctypes"])
def small_pool(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    native_backend: WasmBackend,
    ctypes_backend: WasmBackend,
) -> Iterator[WasmBackend]:
    """A backend whose pool (and tokens) hold ``SLOTS`` instances; the helper and modules
    come from the session's caches (nothing is built here)."""
    native: bool = request.param
    monkeypatch.setattr(_engine, "POOL_SLOTS", SLOTS)
    monkeypatch.setattr(wasm_backend, "POOL_SLOTS", SLOTS)
    cache = (native_backend if native else ctypes_backend).cache_dir
    backend = WasmBackend(cache_dir=cache, native=native)
    try:
        yield backend
    finally:
        backend.close()


def _echo_in_child(backend: WasmBackend, tmp_path: Path) -> str:
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)
    parents = backend.engine

    def child() -> str:
        result = backend.run_sync(request(echo, {})).result
        if result != {"ok": True}:
            return f"echo gave {result!r}"
        # A second call: the tokens the first took are back (no slot lost per call).
        for _ in range(SLOTS + 1):
            backend.run_sync(request(echo, {}))
        return "new engine" if backend.engine is not parents else "same engine"

    return in_a_forked_child(child, timeout_s=30)


def test_a_child_forked_with_every_slot_in_flight_still_calls(
    small_pool: WasmBackend, tmp_path: Path
) -> None:
    """Every slot held by a guest spinning on another thread when the process forks: the
    child's first call waited for a token for ever (and with tokens alone, wasmtime's pool
    would refuse its instance); it runs on a fresh engine instead."""
    backend = small_pool
    loop = wat_tool(tmp_path, "loop", LOOP)
    timeouts: list[BaseException] = []

    def spin() -> None:
        try:
            backend.run_sync(request(loop, {}, wasm_fuel=10**15, timeout_s=2))
        except ToolTimeout as exc:
            timeouts.append(exc)

    threads = [threading.Thread(target=spin) for _ in range(SLOTS)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 10
        while backend._slots.qsize():  # every token taken
            assert time.monotonic() < deadline, "the guests never started"
            time.sleep(0.001)
        time.sleep(0.05)  # and every guest inside its instance
        report = _echo_in_child(backend, tmp_path)
    finally:
        for thread in threads:
            thread.join()
    assert report == "new engine"
    assert len(timeouts) == SLOTS  # the parent's calls ended as they would have
    assert backend._slots.qsize() == SLOTS


def test_a_child_forked_while_compiling_gets_a_new_engine(
    small_pool: WasmBackend, tmp_path: Path
) -> None:
    """A thread compiling (the backend's lock held) may hold the engine's own locks too."""
    with held_by_another_thread(small_pool._lock):
        report = _echo_in_child(small_pool, tmp_path)
    assert report == "new engine"


def test_a_child_of_an_idle_parent_keeps_its_engine(
    small_pool: WasmBackend, tmp_path: Path
) -> None:
    """Nothing in flight at the fork: the engine is consistent, and the child uses it (no
    new pool, no module loaded again)."""
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)
    assert small_pool.run_sync(request(echo, {})).result == {"ok": True}
    assert _echo_in_child(small_pool, tmp_path) == "same engine"
