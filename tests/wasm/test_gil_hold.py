"""The native call keeps the GIL while its guest runs and gives it up at the guest's first
epoch tick (``_native.c``), ticked by a C thread that never needs the GIL (``_ticker.c``);
a forked child, which has no such thread, starts its own (``backend._EpochTicker``).

Nothing here is timed: each test asks whether another Python thread could run during a
guest's run, counted by that thread itself."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.wasm import WasmBackend
from runtime.backends.wasm._native import NativeCaller, NativeResult, Status
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.backend import _TABLE_ELEMENTS, EPOCH_TICK_S
from runtime.errors import ResourceLimitExceeded, ToolTimeout
from tests._forked import held_by_another_thread, in_a_forked_child

from .conftest import ECHO_WAT, request, wat_tool

pytestmark = pytest.mark.wasm

LOOP = """(module
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "run") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0))"""
#: Fuel for a run of the loop that is long next to a thread switch (~10^8 iterations).
SPIN_FUEL = 300_000_000


class _Counter:
    """A thread counting while it can get the GIL (it drops it at every step)."""

    def __init__(self) -> None:
        self.n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.n += 1
            time.sleep(0)  # releases the GIL

    def __enter__(self) -> _Counter:
        self._thread.start()
        while self.n < 3:  # running, and between two counts from now on
            time.sleep(0.001)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def no_forced_switch() -> Iterator[None]:
    """The interpreter never takes the GIL from this thread (it only gives it up itself),
    and no collection runs a finalizer that does I/O (which would give it up) meanwhile."""
    old = sys.getswitchinterval()
    gc.collect()
    gc.disable()
    sys.setswitchinterval(1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(old)
        gc.enable()


@pytest.fixture
def fresh(native_backend: WasmBackend) -> Iterator[WasmBackend]:
    """A backend whose engine nothing ticks yet (run_sync would start its ticker); the
    native helper is already built in the session's cache."""
    b = WasmBackend(cache_dir=native_backend.cache_dir)
    yield b
    b.close()


def _spinner(backend: WasmBackend, tmp_path: Path, native: NativeCaller) -> Any:
    """A call of the loop, everything but the call itself done up front (loading a module
    does I/O, which gives the GIL up)."""
    loaded = backend.load(wat_tool(tmp_path, "spin", LOOP))
    args = (backend._engine_ptr, loaded.pre, b"run", GuestABI.encode_arguments({}), 1 << 20,
            _TABLE_ELEMENTS, SPIN_FUEL, 10**6, 1 << 20, loaded.has_oom, False)  # fmt: skip

    def spin(ticker: int) -> Any:
        return native.run(*args, ticker)

    return spin


def _others_steps(spin: Any, ticker: int) -> tuple[Any, int]:
    """One spin with ``ticker``: its result, and how many steps another thread made meanwhile."""
    with _Counter() as counter:
        before = counter.n
        res = spin(ticker)
        return res, counter.n - before


def _out_of_fuel(res: Any) -> None:
    assert isinstance(res, NativeResult) and res.status == Status.TRAP
    assert res.trap is not None and res.trap.trap_code is not None
    assert res.trap.trap_code.name == "OUT_OF_FUEL"


def test_a_guest_before_its_first_tick_keeps_the_gil(
    fresh: WasmBackend, tmp_path: Path, no_forced_switch: None
) -> None:
    """With a ticker that never ticks, no other thread runs during a long guest run: the
    call never handed the GIL over (without the hold, the counter ran all along)."""
    native = fresh.native_caller()
    assert native is not None
    if native._direct is None:
        pytest.skip("no C accelerator: the ctypes path releases the GIL for the whole call")
    never = native.ticker(fresh._engine_ptr, 3600.0)
    assert never is not None
    spin = _spinner(fresh, tmp_path, native)
    res, steps = _others_steps(spin, never.address)
    never.stop()
    _out_of_fuel(res)
    assert steps == 0


def test_the_first_tick_gives_the_gil_up(
    fresh: WasmBackend, tmp_path: Path, no_forced_switch: None
) -> None:
    native = fresh.native_caller()
    assert native is not None
    ticker = native.ticker(fresh._engine_ptr, EPOCH_TICK_S)
    assert ticker is not None
    spin = _spinner(fresh, tmp_path, native)
    res, steps = _others_steps(spin, ticker.address)
    ticker.stop()
    _out_of_fuel(res)
    assert steps > 0


def test_a_stopped_ticker_is_not_waited_for(
    fresh: WasmBackend, tmp_path: Path, no_forced_switch: None
) -> None:
    """A ticker that no longer ticks would never end the hold: the call releases the GIL
    before it starts, as with no ticker."""
    native = fresh.native_caller()
    assert native is not None
    ticker = native.ticker(fresh._engine_ptr, 3600.0)
    assert ticker is not None
    ticker.stop()
    ticker.stop()  # idempotent
    spin = _spinner(fresh, tmp_path, native)
    res, steps = _others_steps(spin, ticker.address)
    _out_of_fuel(res)
    assert steps > 0


def test_a_runaway_guest_does_not_stop_other_threads(
    native_backend: WasmBackend, tmp_path: Path
) -> None:
    """An infinite loop with a generous timeout, from another thread: this thread keeps
    running while it spins, and the guest still ends at its deadline."""
    spec = wat_tool(tmp_path, "loop", LOOP)
    done = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            native_backend.run_sync(request(spec, {}, wasm_fuel=10**15, timeout_s=2.0))
        except BaseException as exc:  # checked below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    steps = 0
    while not done.is_set():
        time.sleep(0.005)
        steps += not done.is_set()
    thread.join()
    assert native_backend._ticker.native is not None  # the C ticker, the GIL-holding path
    assert len(errors) == 1 and isinstance(errors[0], ToolTimeout), errors
    assert errors[0].details == {"trap": "interrupt", "limit": "timeout_s"}
    # Held for the whole 2 s, this thread would have made a step or two (before the guest
    # started); released at the first tick (10 ms), it makes hundreds.
    assert steps >= 10


def test_limits_on_the_holding_path(native_backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "loop", LOOP)
    with pytest.raises(ToolTimeout) as timeout:
        native_backend.run_sync(request(spec, {}, wasm_fuel=10**15, timeout_s=0.05))
    assert timeout.value.details == {"trap": "interrupt", "limit": "timeout_s"}
    # Fuel is unknown after an interrupt (the backend's docstring); the time is not.
    assert timeout.value.usage["fuel"] is None and timeout.value.usage["wall_ms"] >= 40
    with pytest.raises(ResourceLimitExceeded) as fuel:
        native_backend.run_sync(request(spec, {}, wasm_fuel=100_000, timeout_s=30))
    assert fuel.value.details["limit"] == "wasm_fuel"
    assert native_backend._ticker.native is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_wait_for_the_parents_ticker(
    fresh: WasmBackend, tmp_path: Path
) -> None:
    """The child has no ticker thread: its calls release the GIL up front."""
    native = fresh.native_caller()
    assert native is not None
    ticker = native.ticker(fresh._engine_ptr, EPOCH_TICK_S)
    assert ticker is not None
    spin = _spinner(fresh, tmp_path, native)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            sys.setswitchinterval(1000.0)
            res, steps = _others_steps(spin, ticker.address)
            ok = isinstance(res, NativeResult) and res.status == Status.TRAP
            code = 0 if ok and steps > 0 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    ticker.stop()
    assert os.waitstatus_to_exitcode(status) == 0


# -- a forked child: threads do not survive fork, the backend starts its ticker again ----


def _runaway_then_normal(backend: WasmBackend, tmp_path: Path) -> Callable[[], str]:
    """For the child: a guest that loops forever with fuel for hours, stopped by its 0.2 s
    deadline; then an ordinary call."""
    loop = wat_tool(tmp_path, "loop", LOOP)
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)

    def body() -> str:
        try:
            backend.run_sync(request(loop, {}, wasm_fuel=10**15, timeout_s=0.2))
        except ToolTimeout as exc:
            if exc.details != {"trap": "interrupt", "limit": "timeout_s"}:
                return f"timeout {exc.details}"
        else:
            return "the loop returned"
        result = backend.run_sync(request(echo, {})).result
        return "ok" if result == {"ok": True} else f"echo gave {result!r}"

    return body


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_childs_runaway_guest_ends_at_its_deadline(
    fresh: WasmBackend, tmp_path: Path
) -> None:
    """The parent's C ticker is not in the child (nor ticking its copy of the engine): the
    child's first call starts its own, so the deadline holds there too, not only fuel."""
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)
    assert fresh.run_sync(request(echo, {})).result == {"ok": True}
    parents = fresh._ticker.native
    assert parents is not None  # the C ticker runs in the parent when it forks
    body = _runaway_then_normal(fresh, tmp_path)

    def child() -> str:
        report = body()
        ticker = fresh._ticker.native
        if ticker is None or ticker is parents:
            return f"{report}; the child's ticker: {ticker!r}"
        return report

    assert in_a_forked_child(child) == "ok"
    # The parent's own ticker and calls are untouched.
    assert fresh._ticker.native is parents
    assert fresh.run_sync(request(echo, {})).result == {"ok": True}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_of_a_python_ticker_ends_a_runaway_guest(
    ctypes_backend: WasmBackend, tmp_path: Path
) -> None:
    """Without the native helper the ticker is a Python thread: started again in the child."""
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)
    assert ctypes_backend.run_sync(request(echo, {})).result == {"ok": True}
    assert ctypes_backend._ticker.native is None and ctypes_backend._ticker.started
    assert in_a_forked_child(_runaway_then_normal(ctypes_backend, tmp_path)) == "ok"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_childs_calls_keep_the_gil_until_the_first_tick(
    fresh: WasmBackend, tmp_path: Path, no_forced_switch: None
) -> None:
    """The hold (the fast path) works in the child too: the ticker the child's first call
    starts (here at a period of an hour) is live, and with it no other thread of the child
    runs during a guest run that its fuel ends (with the parent's ticker, not live in the
    child, the call would release the GIL up front)."""
    native = fresh.native_caller()
    assert native is not None
    if native._direct is None:
        pytest.skip("no C accelerator: the ctypes path releases the GIL for the whole call")
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)
    assert fresh.run_sync(request(echo, {})).result == {"ok": True}
    parents = fresh._ticker.native
    assert parents is not None
    spin = _spinner(fresh, tmp_path, native)
    from runtime.backends.wasm import backend as module

    def child() -> str:
        module.EPOCH_TICK_S = 3600.0  # the period of the ticker the next call starts
        if fresh.run_sync(request(echo, {})).result != {"ok": True}:
            return "the echo call failed"
        ticker = fresh._ticker.native
        if ticker is None or ticker is parents:
            return f"the child's ticker: {ticker!r}"
        # The backend's own hot path, as _call passes it, with nothing done around the call
        # that could give the GIL up (a module load's I/O, the ticker's start).
        res, steps = _others_steps(spin, ticker.address)
        if not (isinstance(res, NativeResult) and res.status == Status.TRAP):
            return f"the spin gave {res!r}"
        return "ok" if steps == 0 else f"another thread ran {steps} steps"

    assert in_a_forked_child(child) == "ok"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_compiles_a_module_new_to_it(tmp_path: Path) -> None:
    """Wasmtime would compile on its own pool of threads, started by the parent's first
    compilation and gone in the child, which would then wait for them forever: compilation
    runs on the calling thread (``_engine``)."""
    backend = WasmBackend(cache_dir=tmp_path / "cache", native=False)  # nothing cached yet
    try:
        echo = wat_tool(tmp_path, "echo", ECHO_WAT)
        assert backend.run_sync(request(echo, {})).result == {"ok": True}  # compiled here
        other = wat_tool(tmp_path, "other", ECHO_WAT.replace("ok", "ko"))

        def child() -> str:
            result = backend.run_sync(request(other, {})).result
            return "ok" if result == {"ko": True} else f"gave {result!r}"

        assert in_a_forked_child(child, timeout_s=30) == "ok"
    finally:
        backend.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_compiles_while_the_parent_was_compiling(tmp_path: Path) -> None:
    """Forked while another thread of the parent held the backend's lock (compiling a
    module, loading the helper): that thread is gone in the child, whose own first
    compilation must not wait for it."""
    backend = WasmBackend(cache_dir=tmp_path / "cache", native=False)
    echo = wat_tool(tmp_path, "echo", ECHO_WAT)

    def child() -> str:
        result = backend.run_sync(request(echo, {})).result
        return "ok" if result == {"ok": True} else f"gave {result!r}"

    try:
        with held_by_another_thread(backend._lock):
            assert in_a_forked_child(child, timeout_s=20) == "ok"
    finally:
        backend.close()
