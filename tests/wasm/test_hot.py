"""The raw C-API hot path (``_hot.GuestStore``): every binding runs, bounds hold, a closed store
is refused, traps and errors come back as wasmtime-py's own exception types."""

from __future__ import annotations

import ctypes
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import wasmtime
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import _speedups
from runtime.audit import _canonical
from runtime.backends.wasm import WasmBackend, _engine, _hot
from runtime.backends.wasm import backend as wasm_backend
from runtime.backends.wasm._engine import make_engine
from runtime.backends.wasm._hot import GuestStore, PreLinked, address_of
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.backend import EPOCH_TICK_S, _TickClock
from runtime.errors import InvalidArguments, SandboxError, ToolFailed, ToolTimeout

from .conftest import ECHO_WAT, request, wat_tool

pytestmark = pytest.mark.wasm

GUEST = """(module
  (memory (export "memory") 1)
  (global $top (mut i32) (i32.const 1024))
  (func (export "rt_alloc") (param i32) (result i32)
    (global.get $top)
    (global.set $top (i32.add (global.get $top) (local.get 0))))
  (func (export "grow") (result i32) (memory.grow (i32.const 1)))
  (func (export "add") (param i32 i32) (result i64)
    (i64.extend_i32_u (i32.add (local.get 0) (local.get 1))))
  (func (export "trap") (result i32) unreachable)
  (func (export "spin") (result i32) (loop $l (br $l)) i32.const 0)
  (func (export "neg") (result i32) i32.const -1))"""
NO_MEMORY = '(module (func (export "f") (result i32) i32.const 7))'
START_TRAP = '(module (memory (export "memory") 1) (func $s unreachable) (start $s))'


@pytest.fixture(scope="module")
def engine() -> wasmtime.Engine:
    return make_engine()[0]


def _pre(engine: wasmtime.Engine, wat: str) -> PreLinked:
    module = wasmtime.Module(engine, wasmtime.wat2wasm(wat))
    return PreLinked(wasmtime.Linker(engine).instantiate_pre(module))


def _store(engine: wasmtime.Engine, fuel: int = 1_000_000, memory: int = 1 << 20) -> GuestStore:
    return GuestStore(
        address_of(engine.ptr()),
        memory_bytes=memory,
        table_elements=100,
        fuel=fuel,
        epoch_deadline=1_000_000,
    )


def test_calls_memory_and_fuel(engine: wasmtime.Engine) -> None:
    pre = _pre(engine, GUEST)
    store = _store(engine)
    try:
        store.instantiate(pre)
        assert store.has_memory and store.memory_size() == 65536
        assert store.call_i32(store.func(b"rt_alloc"), 100) == 1024
        assert store.call_i32(store.func(b"rt_alloc"), 1) == 1124
        assert store.call(store.func(b"add"), 40, 2) == 42
        # i32 results are sign-extended in the raw slot; call_i32 gives the unsigned bits.
        assert store.call_i32(store.func(b"neg")) == 0xFFFF_FFFF
        assert store.write(1024, b"hello") and store.read(1024, 5) == b"hello"
        assert store.read(0, 0) == b""
        # Growth moves nothing we cache: the new page is readable right after.
        assert store.call_i32(store.func(b"grow")) == 1
        assert store.memory_size() == 2 * 65536
        assert store.write(65536 + 10, b"x") and store.read(65536 + 10, 1) == b"x"
        assert 0 < store.fuel_left() < 1_000_000
    finally:
        store.close()


def test_bounds_are_checked(engine: wasmtime.Engine) -> None:
    store = _store(engine)
    try:
        pre = _pre(engine, GUEST)
        store.instantiate(pre)
        size = store.memory_size()
        assert store.write(size - 2, b"ab")
        assert not store.write(size - 1, b"ab")
        assert store.read(size - 1, 2) is None
        assert store.read(size, 1) is None
        assert store.func(b"missing") is None
        assert store.func(b"memory") is None  # a memory, not a function
    finally:
        store.close()


def test_module_without_memory(engine: wasmtime.Engine) -> None:
    store = _store(engine)
    try:
        pre = _pre(engine, NO_MEMORY)
        store.instantiate(pre)
        assert not store.has_memory and store.memory_size() == 0
        assert not store.write(0, b"x") and store.read(0, 1) is None
        assert store.call_i32(store.func(b"f")) == 7
    finally:
        store.close()


def test_traps_and_fuel_are_wasmtime_exceptions(engine: wasmtime.Engine) -> None:
    store = _store(engine, fuel=10_000)
    try:
        pre = _pre(engine, GUEST)
        store.instantiate(pre)
        with pytest.raises(wasmtime.Trap) as trap:
            store.call(store.func(b"trap"))
        assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE
        with pytest.raises(wasmtime.Trap) as spin:
            store.call(store.func(b"spin"))
        assert spin.value.trap_code == wasmtime.TrapCode.OUT_OF_FUEL
        assert store.fuel_left() == 0
    finally:
        store.close()


def test_start_function_trap_is_raised_at_instantiation(engine: wasmtime.Engine) -> None:
    store = _store(engine)
    pre = _pre(engine, START_TRAP)
    try:
        with pytest.raises(wasmtime.Trap):
            store.instantiate(pre)
        assert not store.has_memory
    finally:
        store.close()


def test_memory_limit_applies_at_instantiation(engine: wasmtime.Engine) -> None:
    store = _store(engine, memory=65536 - 1)
    pre = _pre(engine, GUEST)
    try:
        with pytest.raises(wasmtime.WasmtimeError):
            store.instantiate(pre)
    finally:
        store.close()


def test_closed_store_is_refused(engine: wasmtime.Engine) -> None:
    store = _store(engine)
    pre = _pre(engine, GUEST)
    store.instantiate(pre)
    func = store.func(b"add")
    store.close()
    store.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        store.call(func, 1, 2)
    with pytest.raises(ValueError, match="closed"):
        store.memory_size()
    with pytest.raises(ValueError, match="closed"):
        store.fuel_left()


@pytest.mark.parametrize(
    "payload",
    [b"\xef\xbb\xbf{}", b'{"a":"\xed\xa0\x80"}', b'{"a":"\xff"}'],
    ids=["bom", "utf8-surrogate", "invalid-byte"],
)
def test_results_must_be_strict_utf8(payload: bytes) -> None:
    with pytest.raises(SandboxError):
        GuestABI.decode_result(payload)


def test_cached_codecs_round_trip() -> None:
    args = {"text": 'é\u2028"\\', "n": [1, 2.5, None, True]}
    encoded = GuestABI.encode_arguments(args)
    assert encoded == '{"text":"é\u2028\\"\\\\","n":[1,2.5,null,true]}'.encode()
    assert GuestABI.decode_result(encoded) == args
    assert GuestABI.decode_result(b'{"i":12}') == {"i": 12}
    with pytest.raises(ToolFailed):
        GuestABI.decode_result(b'{"big":1e400}')
    with pytest.raises(SandboxError):
        GuestABI.decode_result(b'{"nan":NaN}')


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), _values, max_size=5) | st.dictionaries(st.text(), st.text()))
def test_encode_arguments_is_json_dumps(arguments: dict[str, Any]) -> None:
    # The reused C encoder must give the bytes json.dumps gives with the ABI's settings.
    expected = json.dumps(arguments, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    assert GuestABI.encode_arguments(arguments) == expected.encode()


_text_arguments = st.dictionaries(st.text(max_size=8), st.text(), max_size=4) | (
    st.dictionaries(st.text(max_size=8), st.text(), max_size=4).map(
        lambda d: dict(sorted(d.items()))
    )
)


@settings(max_examples=400, deadline=None)
@given(arguments=_text_arguments)
def test_canonical_arguments_are_the_encoding_where_reused(arguments: dict[str, str]) -> None:
    """Where encode_arguments returns the caller's canonical text instead of encoding (text
    only, keys in order), that text is byte for byte what it would have encoded — with the C
    accelerator's canonical form and with the pure-Python one."""
    encoded = GuestABI.encode_arguments(arguments)
    mod = _speedups.module()
    for encoder in (_canonical._py_encode, *(() if mod is None else (mod.canonical,))):
        canonical = encoder(arguments, True)
        reused = GuestABI.encode_arguments(arguments, canonical)
        keys = list(arguments)
        in_order = len(keys) <= 1 or (keys == sorted(keys) and "".join(keys).isascii())
        assert (reused is canonical) is in_order
        assert reused == encoded


@pytest.mark.parametrize(
    "arguments",
    [{"n": 1}, {"b": "x", "a": "y"}, {"e": "y", "\u00e9": "x"}, {"a": "x", "b": ["y"]}],
    ids=["number", "unordered", "non-ascii-keys", "list"],
)
def test_canonical_text_is_not_reused_where_it_could_differ(arguments: dict[str, Any]) -> None:
    sentinel = b'{"not":"this"}'
    assert GuestABI.encode_arguments(arguments, sentinel) != sentinel


@settings(max_examples=300, deadline=None)
@given(value=_values)
def test_decode_result_equals_cpython_json(value: Any) -> None:
    payload = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    expected = json.loads(payload.decode("utf-8", "surrogatepass"))
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(SandboxError):  # surrogates smuggled in as UTF-8 bytes
            GuestABI.decode_result(payload)
        return
    got = GuestABI.decode_result(payload)
    assert got == expected and repr(got) == repr(expected)


@settings(max_examples=500, deadline=None)
@given(
    lead=st.integers(min_value=1, max_value=9),
    length=st.integers(min_value=1, max_value=400),
    frac=st.text("0123456789", max_size=5),
    exp=st.none() | st.integers(min_value=-500, max_value=500),
    plus=st.booleans(),
)
def test_every_overflowing_float_is_caught(
    lead: int, length: int, frac: str, exp: int | None, plus: bool
) -> None:
    lexeme = str(lead) + "9" * (length - 1) + "." + (frac or "0")
    if exp is not None:
        lexeme += f"e{'+' if plus and exp >= 0 else ''}{exp}"
    doc = f'{{"x":[1,{lexeme}]}}'.encode()
    if float(lexeme) == float("inf"):
        with pytest.raises(ToolFailed, match="out of the float range"):
            GuestABI.decode_result(doc)
    else:
        assert GuestABI.decode_result(doc) == json.loads(doc)


@pytest.mark.parametrize(
    "lexeme", ["2" + "0" * 308 + ".0", "9" * 210 + "e99", "1e309", "-1E+309", "1.8e308", "1e0400"]
)
def test_overflow_boundaries(lexeme: str) -> None:
    assert float(lexeme) in (float("inf"), float("-inf"))
    with pytest.raises(ToolFailed, match="out of the float range"):
        GuestABI.decode_result(f"[{lexeme}]".encode())


@pytest.mark.parametrize(
    "doc",
    [
        "[" * 300 + "]" * 300,  # deeper than pydantic-core's parser goes
        '"\\ud83d\\ude00"',  # a surrogate pair escape (a lone one is refused: test_hostile)
        "1" * 4300,  # CPython's int digit limit, exactly
        '{"a":1,"b":2,"a":3}',
        "[1e-400, -0.0, 1E+2, 0.1e1]",
    ],
    ids=["deep", "surrogate-pair", "long-int", "duplicate-key", "small-floats"],
)
def test_decode_result_falls_back_to_cpython(doc: str) -> None:
    got = GuestABI.decode_result(doc.encode())
    assert got == json.loads(doc) and repr(got) == repr(json.loads(doc))
    if isinstance(got, dict):
        assert list(got) == list(json.loads(doc))


def test_strings_only_encoding_is_json_dumps_for_every_code_point() -> None:
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    arguments = {"text": every, every[:300]: "k"}
    expected = json.dumps(arguments, ensure_ascii=False, separators=(",", ":")).encode()
    assert GuestABI.encode_arguments(arguments) == expected


@pytest.mark.parametrize(
    "arguments", [{"text": "\ud800"}, {"a": "ok", "b": "\udfff x"}, {"x": float("nan")}]
)
def test_unencodable_arguments_are_invalid(arguments: dict[str, Any]) -> None:
    # Lone surrogates cannot be UTF-8, NaN is not JSON: on the strings-only path too.
    with pytest.raises(InvalidArguments, match="cannot be passed to a wasm guest"):
        GuestABI.encode_arguments(arguments)


def test_circular_arguments_are_invalid() -> None:
    args: dict[str, Any] = {"x": 1}
    args["self"] = args
    with pytest.raises(InvalidArguments):
        GuestABI.encode_arguments(args)
    with pytest.raises(InvalidArguments):
        GuestABI.encode_arguments({"x": float("nan")})
    with pytest.raises(InvalidArguments):
        GuestABI.encode_arguments({"x": "\ud800"})


SPIN = """(module
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "run") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0))"""


def test_more_concurrent_calls_than_pool_slots(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Every call holds a pool slot while its instance lives; the calls past the pool's size
    # wait for one instead of failing to instantiate. A pool of 2 (on 2 cores, 64 spinning
    # guests starve the threads that would start more): 6 guests spin to their deadline.
    monkeypatch.setattr(_engine, "POOL_SLOTS", 2)
    monkeypatch.setattr(wasm_backend, "POOL_SLOTS", 2)
    backend = WasmBackend(cache_dir=tmp_path / "cache")
    spec = wat_tool(tmp_path, "spin", SPIN)
    n = 6
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def one() -> None:
        barrier.wait()
        try:
            backend.run_sync(request(spec, {}, timeout_s=0.2, wasm_fuel=10**12))
        except BaseException as exc:  # every outcome is checked below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        backend.close()
    assert backend.pooled
    assert len(errors) == n
    assert all(isinstance(e, ToolTimeout) for e in errors), [repr(e) for e in errors]


def test_fuel_beyond_u64_is_clamped_not_wrapped(backend: WasmBackend, tmp_path: Path) -> None:
    # 2**64 + 5 would wrap to a budget of 5 instructions in a C u64.
    spec = wat_tool(tmp_path, "echo", ECHO_WAT)
    outcome = backend.run_sync(request(spec, {}, wasm_fuel=2**64 + 5))
    assert outcome.result == {"ok": True}
    assert 0 < outcome.usage["fuel"] < 100


def test_epoch_ticks_follow_the_clock_not_the_wakeups() -> None:
    # A ticker that wakes late (GIL, CPU) still owes one tick per period: deadlines do not
    # stretch with load. A fake clock, so nothing here depends on timing.
    tick = EPOCH_TICK_S
    clock = _TickClock(100.0)
    assert clock.due(100.0 + tick / 2) == 0
    assert clock.wait_s(100.0 + tick / 2) == pytest.approx(tick / 2)
    assert clock.due(100.0 + 1.1 * tick) == 1
    assert clock.due(100.0 + 1.5 * tick) == 0
    assert clock.due(100.0 + 6.2 * tick) == 5  # woke 4 periods late: pays all 5
    assert clock.due(100.0 + 7.3 * tick) == 1
    assert clock.wait_s(100.0 + 7.3 * tick) == pytest.approx(0.7 * tick)
    # A stall of an hour: a bounded payment, then ticking resumes from then.
    later = 100.0 + 3600.0
    assert clock.due(later) == _TickClock.MAX_CATCH_UP
    assert clock.due(later + tick / 2) == 0
    assert clock.due(later + 1.1 * tick) == 1


def test_bindings_are_checked_against_wasmtime_py() -> None:
    # A C signature that drifted (arity or a scalar type) fails at import, not in memory.
    with pytest.raises(ImportError, match="wasmtime_store_limiter"):
        _hot._bind("wasmtime_store_limiter", None, ctypes.c_void_p, ctypes.c_int64)
    with pytest.raises(ImportError, match="wasmtime_context_set_fuel"):
        _hot._bind("wasmtime_context_set_fuel", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32)
    with pytest.raises(ImportError, match="wasmtime_memory_data"):
        _hot._bind(
            "wasmtime_memory_data",
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.POINTER(wasmtime._ffi.wasmtime_func_t),
        )
