"""Hostile guests (WAT compiled at test time) and hostile inputs: each ends as a typed error
within its limit, and the backend keeps serving calls afterwards."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import wasmtime

from runtime.backends.wasm import WasmBackend, load_custom_module
from runtime.errors import (
    ManifestError,
    OutputTooLarge,
    ResourceLimitExceeded,
    SandboxError,
    ToolFailed,
    ToolTimeout,
)

from .conftest import call, request, wat_tool

pytestmark = pytest.mark.wasm

# The ABI boilerplate: one page of memory and a bump allocator handing out offset 1024.
ABI = """
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
"""


def module(body: str) -> str:
    return f"(module {ABI} {body})"


LOOP = module('(func (export "run") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0)')
GROW_BOMB = module(
    """(func (export "run") (param i32 i32) (result i64)
         (loop $l (br_if $l (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
         unreachable)"""
)
RECURSE = module(
    """(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))
       (func (export "run") (param i32 i32) (result i64)
         (drop (call $r (i32.const 0))) i64.const 0)"""
)
# A "result" of 16 MiB: status byte 0 at offset 0, length 16 MiB, after growing memory.
HUGE = module(
    """(func (export "run") (param i32 i32) (result i64)
         (drop (memory.grow (i32.const 256)))
         (i64.shl (i64.const 16777216) (i64.const 32)))"""
)
OUT_OF_BOUNDS = module(
    '(func (export "run") (param i32 i32) (result i64) (i64.const 0x7fffffff00000010))'
)
BAD_STATUS = module(
    """(data (i32.const 16) "\\07oops")
       (func (export "run") (param i32 i32) (result i64) (i64.const 0x0000000500000010))"""
)
GARBAGE_JSON = module(
    """(data (i32.const 16) "\\00{nope")
       (func (export "run") (param i32 i32) (result i64) (i64.const 0x0000000600000010))"""
)
DIV_ZERO = module(
    """(func (export "run") (param i32 i32) (result i64)
         (drop (i32.div_u (i32.const 1) (i32.const 0))) i64.const 0)"""
)
ECHO = module(
    """(data (i32.const 16) "\\00{\\"ok\\":true}")
       (func (export "run") (param i32 i32) (result i64) (i64.const 0x0000000c00000010))"""
)


def returning(output: bytes) -> str:
    """A guest whose every call returns ``output`` (status byte included) from offset 16."""
    data = "".join(f"\\{b:02x}" for b in output)
    packed = (len(output) << 32) | 16
    return module(
        f"""(data (i32.const 16) "{data}")
            (func (export "run") (param i32 i32) (result i64) (i64.const {packed}))"""
    )


@pytest.fixture(params=["native", "ctypes"])
def backend(
    request: pytest.FixtureRequest, native_backend: WasmBackend, ctypes_backend: WasmBackend
) -> WasmBackend:
    """Every hostile guest against both call paths: the one-foreign-call helper and the
    step-by-step ctypes one must end in the same typed errors."""
    if request.param == "native":
        assert native_backend.native_caller() is not None
        return native_backend
    assert ctypes_backend.native_caller() is None
    return ctypes_backend


@pytest.fixture(autouse=True)
def still_serving(backend: WasmBackend) -> object:
    yield
    # Whatever the hostile guest did, the next ordinary call works.
    assert call(backend, "json_parse", {"text": "[1]"}) == {"data": [1]}


def test_infinite_loop_runs_out_of_fuel(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "loop", LOOP)
    with pytest.raises(ResourceLimitExceeded) as info:
        backend.run_sync(request(spec, {}, wasm_fuel=5_000_000))
    assert info.value.details == {"trap": "out_of_fuel", "limit": "wasm_fuel"}
    assert info.value.usage["fuel"] == 5_000_000


def test_infinite_loop_hits_the_epoch_deadline(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "loop", LOOP)
    with pytest.raises(ToolTimeout) as info:
        backend.run_sync(request(spec, {}, wasm_fuel=10**15, timeout_s=0.05))
    assert info.value.details == {"trap": "interrupt", "limit": "timeout_s"}


def test_memory_grow_bomb(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "grow", GROW_BOMB)
    with pytest.raises(ResourceLimitExceeded) as info:
        backend.run_sync(request(spec, {}, wasm_memory_mb=4))
    assert info.value.details == {"trap": "unreachable", "limit": "wasm_memory_mb"}
    assert info.value.usage["peak_memory_bytes"] <= 4 * 1024 * 1024


def test_deep_recursion(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "recurse", RECURSE)
    with pytest.raises(ResourceLimitExceeded) as info:
        backend.run_sync(request(spec, {}))
    assert info.value.details == {"trap": "stack_overflow", "limit": "wasm_stack"}


def test_huge_output(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "huge", HUGE)
    with pytest.raises(OutputTooLarge) as info:
        backend.run_sync(request(spec, {}, output_bytes=1024 * 1024))
    assert info.value.details["limit"] == "output_bytes"


def test_builtin_output_limit(backend: WasmBackend) -> None:
    with pytest.raises(OutputTooLarge):
        call(backend, "base64_encode", {"text": "x" * 10_000}, output_bytes=1000)


def test_guest_memory_limit_in_a_real_guest(backend: WasmBackend) -> None:
    # 3 MiB of arguments fit the input check of an 8 MiB guest but not their DOM (every guest
    # parses its arguments into one): the guest's own allocator fails, sets rt_oom and traps.
    data = [[1]] * 750_000
    with pytest.raises(ResourceLimitExceeded) as info:
        call(backend, "json_query", {"data": data, "pointer": ""}, wasm_memory_mb=8)
    assert info.value.details["limit"] == "wasm_memory_mb"


def test_json_parse_memory_is_linear_in_escaped_strings(backend: WasmBackend) -> None:
    # Each escaped string used to keep a decode buffer the size of the rest of the document:
    # 40,000 of them in 320 KiB asked for gigabytes. Now the unused tail is given back.
    text = "[" + '"\\n",' * 40_000 + "1]"
    result = call(backend, "json_parse", {"text": text}, wasm_memory_mb=16)
    assert result == {"data": json.loads(text)}


def test_out_of_bounds_result(backend: WasmBackend, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="out-of-bounds"):
        backend.run_sync(request(wat_tool(tmp_path, "oob", OUT_OF_BOUNDS), {}))


def test_unknown_status_and_garbage_json(backend: WasmBackend, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="unknown status 7"):
        backend.run_sync(request(wat_tool(tmp_path, "status", BAD_STATUS), {}))
    with pytest.raises(SandboxError, match="invalid result"):
        backend.run_sync(request(wat_tool(tmp_path, "garbage", GARBAGE_JSON), {}))


def test_other_traps_are_tool_errors_with_code(backend: WasmBackend, tmp_path: Path) -> None:
    with pytest.raises(ToolFailed) as info:
        backend.run_sync(request(wat_tool(tmp_path, "div", DIV_ZERO), {}))
    assert info.value.details == {"trap": "integer_division_by_zero"}


def test_custom_module_with_pin(backend: WasmBackend, tmp_path: Path) -> None:
    digest = hashlib.sha256(wasmtime.wat2wasm(ECHO)).hexdigest()
    spec = wat_tool(tmp_path, "echo", ECHO, sha256=digest)
    assert load_custom_module(spec).sha256 == digest
    assert backend.run_sync(request(spec, {"x": 1})).result == {"ok": True}


def test_hash_mismatch_refused(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "pinned", ECHO, sha256="0" * 64)
    with pytest.raises(ManifestError, match="sha256 pin") as info:
        load_custom_module(spec)
    assert info.value.details["expected"] == "0" * 64
    with pytest.raises(SandboxError, match="sha256 pin"):
        backend.run_sync(request(spec, {}))


def test_module_swapped_after_load_is_rechecked(backend: WasmBackend, tmp_path: Path) -> None:
    digest = hashlib.sha256(wasmtime.wat2wasm(ECHO)).hexdigest()
    spec = wat_tool(tmp_path, "swap", ECHO, sha256=digest)
    assert backend.run_sync(request(spec, {})).result == {"ok": True}
    (tmp_path / "swap.wasm").write_bytes(wasmtime.wat2wasm(LOOP) + b"")
    # The call's own error (sandbox_error), naming the manifest and the mismatch: it was a
    # ManifestError, which the broker can only report as internal_error.
    with pytest.raises(SandboxError, match="sha256 pin") as info:
        backend.run_sync(request(spec, {}))
    assert info.value.message.startswith(f"{spec.source}: ")
    assert info.value.details["file"] == str(spec.source)
    assert info.value.details["expected"] == digest
    assert info.value.details["actual"] == hashlib.sha256(wasmtime.wat2wasm(LOOP)).hexdigest()
    assert info.value.usage["fuel"] == 0


def test_unpinned_custom_module_refused(backend: WasmBackend, tmp_path: Path) -> None:
    # The pin is required: without one, a module replaced on disk ran silently. The refusal
    # gives the file's digest, to pin once the user has checked the file.
    spec = wat_tool(tmp_path, "unpinned", ECHO, sha256=None)
    digest = hashlib.sha256(wasmtime.wat2wasm(ECHO)).hexdigest()
    with pytest.raises(ManifestError, match="not pinned") as info:
        load_custom_module(spec)
    assert digest in info.value.message
    assert info.value.details == {"field": "wasm.sha256", "actual": digest}
    with pytest.raises(SandboxError, match="not pinned"):
        backend.run_sync(request(spec, {}))
    # Nor does a pinned spec's compiled module serve another, unpinned spec of the file.
    pinned = wat_tool(tmp_path, "unpinned", ECHO)
    assert backend.run_sync(request(pinned, {})).result == {"ok": True}
    with pytest.raises(SandboxError, match="not pinned"):
        backend.run_sync(request(spec, {}))


def test_wat_text_is_not_a_module(backend: WasmBackend, tmp_path: Path) -> None:
    # wasmtime-py compiles WAT text as well: such a file failed validation at manifest load
    # and then ran at call time. A module is the binary form, at load and at call alike.
    text = ECHO.encode()
    spec = wat_tool(tmp_path, "text", ECHO, sha256=hashlib.sha256(text).hexdigest())
    (tmp_path / "text.wasm").write_bytes(text)
    with pytest.raises(ManifestError, match="not WAT text"):
        load_custom_module(spec)
    with pytest.raises(SandboxError, match="not WAT text"):
        backend.run_sync(request(spec, {}))


@pytest.mark.parametrize(
    "content", [b"", b"\0asm", b"not wasm at all", None], ids=["empty", "header", "text", "cut"]
)
def test_malformed_or_truncated_module(
    backend: WasmBackend, tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "bad.wasm"
    data = wasmtime.wat2wasm(ECHO)
    bad = data[: len(data) // 2] if content is None else content
    spec = wat_tool(tmp_path, "bad", ECHO, sha256=hashlib.sha256(bad).hexdigest())
    path.write_bytes(bad)
    with pytest.raises(ManifestError, match="not a valid wasm module"):
        load_custom_module(spec)
    with pytest.raises(SandboxError, match="not a valid wasm module"):
        backend.run_sync(request(spec, {}))


def test_imports_refused(backend: WasmBackend, tmp_path: Path) -> None:
    wat = (
        '(module (import "wasi_snapshot_preview1" "fd_write" '
        "(func (param i32 i32 i32 i32) (result i32))) " + ABI[1:] + ")"
    )
    spec = wat_tool(tmp_path, "imports", wat)
    with pytest.raises(ManifestError, match="may not import"):
        load_custom_module(spec)
    with pytest.raises(SandboxError, match="may not import"):
        backend.run_sync(request(spec, {}))


def test_abi_violations_refused(backend: WasmBackend, tmp_path: Path) -> None:
    no_alloc = (
        '(module (memory (export "memory") 1) '
        '(func (export "run") (param i32 i32) (result i64) i64.const 0))'
    )
    for spec, said in [
        (wat_tool(tmp_path, "noalloc", no_alloc), "guest ABI"),
        (wat_tool(tmp_path, "noexport", ECHO, export="nope"), "exports no function nope"),
    ]:
        with pytest.raises(ManifestError, match=said):
            load_custom_module(spec)
        with pytest.raises(SandboxError, match=said):
            backend.run_sync(request(spec, {}))


def test_initial_memory_over_the_limit(backend: WasmBackend, tmp_path: Path) -> None:
    wat = ECHO.replace('(memory (export "memory") 1)', '(memory (export "memory") 200)')
    with pytest.raises(ResourceLimitExceeded) as info:
        backend.run_sync(request(wat_tool(tmp_path, "bigmem", wat), {}, wasm_memory_mb=4))
    assert info.value.details["limit"] == "wasm_memory_mb"


def test_trap_during_instantiation(backend: WasmBackend, tmp_path: Path) -> None:
    wat = ECHO.replace("(module", "(module (func $boom unreachable) (start $boom)", 1)
    with pytest.raises(ToolFailed) as info:
        backend.run_sync(request(wat_tool(tmp_path, "start", wat), {}))
    assert info.value.details == {"trap": "unreachable"}


def test_allocator_lies(backend: WasmBackend, tmp_path: Path) -> None:
    wat = ECHO.replace("i32.const 1024)", "i32.const 0x7ffffff0)", 1)
    with pytest.raises(SandboxError, match="out-of-bounds pointer"):
        backend.run_sync(request(wat_tool(tmp_path, "liar", wat), {}))
    wat = ECHO.replace("i32.const 1024)", "i32.const 0)", 1)
    with pytest.raises(ResourceLimitExceeded, match="could not allocate"):
        backend.run_sync(request(wat_tool(tmp_path, "null", wat), {}))


def test_deeply_nested_result_is_a_sandbox_error(backend: WasmBackend, tmp_path: Path) -> None:
    depth = 150_000
    wat = f"""(module
      (memory (export "memory") 3)
      (func (export "rt_alloc") (param i32) (result i32) i32.const 180000)
      (data (i32.const 16) "\\00{"[" * depth}")
      (func (export "run") (param i32 i32) (result i64)
        (i64.const {((depth + 1) << 32) | 16})))"""
    with pytest.raises(SandboxError, match="invalid result"):
        backend.run_sync(request(wat_tool(tmp_path, "nested", wat), {}))


def test_epoch_ticker_restarts_after_close(tmp_path: Path) -> None:
    b = WasmBackend(cache_dir=tmp_path)
    spec = wat_tool(tmp_path, "loop", LOOP)
    b.close()
    with pytest.raises(ToolTimeout):
        b.run_sync(request(spec, {}, wasm_fuel=10**15, timeout_s=0.05))
    b.close()


def test_no_state_survives_between_calls(backend: WasmBackend, tmp_path: Path) -> None:
    # Writes a mark into memory and a global; a later call that sees either would report it.
    wat = module(
        """(global $calls (mut i32) (i32.const 0))
           (data (i32.const 16) "\\00{\\"ok\\":true}")
           (data (i32.const 48) "\\01dirty")
           (func (export "run") (param i32 i32) (result i64)
             (if (i32.or (i32.load8_u (i32.const 30000)) (global.get $calls))
               (then (return (i64.const 0x0000000600000030))))
             (i32.store8 (i32.const 30000) (i32.const 0xAA))
             (global.set $calls (i32.const 1))
             (i64.const 0x0000000c00000010))"""
    )
    spec = wat_tool(tmp_path, "state", wat)
    for _ in range(2 * 64 + 1):  # more calls than the pool has slots: every slot is reused
        assert backend.run_sync(request(spec, {})).result == {"ok": True}


def test_pooling_allocator_active(backend: WasmBackend) -> None:
    assert backend.pooled
    assert "pooling_allocator" not in backend.fingerprint().missing
    native = backend.native_caller() is not None
    assert ("native_call" in backend.fingerprint().missing) is not native


def test_export_defaults_to_the_tool_name(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "run", ECHO)
    assert spec.wasm is not None
    del spec.wasm["export"]
    assert backend.run_sync(request(spec, {})).result == {"ok": True}


@pytest.mark.parametrize(
    "result",
    [
        b'{"x":"\\ud800"}',
        b'{"\\udfff":1}',
        b'[["a","\\uDC00b"]]',
        b'{"x":"\\ud800","big":1e100}',  # a float that may overflow: the other decoder
        b"[" * 300 + b'"\\ud800"' + b"]" * 300,  # past jiter's nesting limit
    ],
    ids=["value", "key", "nested", "float_checked", "deep"],
)
def test_lone_surrogate_in_a_result_is_the_guest_s_fault(
    backend: WasmBackend, tmp_path: Path, result: bytes
) -> None:
    # CPython's json fallback decoded these into a str no UTF-8 carries; the audit then
    # refused the result and the call ended as internal_error. The ABI says strict UTF-8.
    spec = wat_tool(tmp_path, "surrogate", returning(b"\0" + result))
    with pytest.raises(SandboxError, match="lone surrogate"):
        backend.run_sync(request(spec, {}))


def test_a_surrogate_pair_escape_is_one_character(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "pair", returning(b'\0{"\\ud83d\\ude00":["\\\\ud800"]}'))
    assert backend.run_sync(request(spec, {})).result == {"\U0001f600": ["\\ud800"]}


USAGE_KEYS = {"fuel", "peak_memory_bytes", "cpu_ms", "wall_ms"}
LOOP_WITH_CALL = module(
    """(func $f)
       (func (export "run") (param i32 i32) (result i64) (loop $l (call $f) (br $l)) i64.const 0)"""
)


@pytest.mark.parametrize("wat", [LOOP, LOOP_WITH_CALL], ids=["loop", "loop_with_call"])
def test_a_deadline_reports_fuel_as_unknown(backend: WasmBackend, tmp_path: Path, wat: str) -> None:
    # A loop without calls stopped by the epoch check reported fuel 2 after spinning for
    # the whole deadline: Wasmtime does not save the counter there. No wrong figure.
    spec = wat_tool(tmp_path, "spin", wat)
    with pytest.raises(ToolTimeout) as info:
        backend.run_sync(request(spec, {}, wasm_fuel=10**15, timeout_s=0.05))
    usage = info.value.usage
    assert set(usage) == USAGE_KEYS
    assert usage["fuel"] is None
    assert usage["wall_ms"] >= 40 and usage["cpu_ms"] > 0
    assert usage["peak_memory_bytes"] == 65536


@pytest.mark.parametrize(
    ("wat", "error"),
    [
        (GARBAGE_JSON, SandboxError),
        (returning(b'\0{"x":"\\ud800"}'), SandboxError),
        (returning(b'\0{"x":1e400}'), ToolFailed),
        (module('(func (export "run") (param i32 i32) (result i64) i64.const 0)'), SandboxError),
    ],
    ids=["invalid_json", "lone_surrogate", "float_out_of_range", "no_output"],
)
def test_result_errors_carry_usage(
    backend: WasmBackend, tmp_path: Path, wat: str, error: type[Exception]
) -> None:
    spec = wat_tool(tmp_path, "bad", wat)
    with pytest.raises(error) as info:
        backend.run_sync(request(spec, {}))
    usage = info.value.usage  # type: ignore[attr-defined]
    assert set(usage) == USAGE_KEYS
    assert usage["fuel"] > 0 and usage["peak_memory_bytes"] == 65536


@pytest.mark.parametrize(
    ("pointer", "error"),
    [("0", ResourceLimitExceeded), ("0x7ffffff0", SandboxError)],
    ids=["alloc_failed", "bad_input_pointer"],
)
def test_input_allocation_errors_carry_usage(
    backend: WasmBackend, tmp_path: Path, pointer: str, error: type[Exception]
) -> None:
    wat = f"""(module (memory (export "memory") 1)
      (func (export "rt_alloc") (param i32) (result i32) i32.const {pointer})
      (func (export "run") (param i32 i32) (result i64) i64.const 0))"""
    spec = wat_tool(tmp_path, "alloc", wat)
    with pytest.raises(error) as info:
        backend.run_sync(request(spec, {"x": "y"}))
    usage = info.value.usage  # type: ignore[attr-defined]
    assert set(usage) == USAGE_KEYS
    assert usage["fuel"] > 0 and usage["peak_memory_bytes"] == 65536


def test_a_call_refused_before_it_ran_carries_zero_usage(
    backend: WasmBackend, tmp_path: Path
) -> None:
    spec = wat_tool(tmp_path, "echo", ECHO)
    with pytest.raises(ResourceLimitExceeded) as info:
        backend.run_sync(request(spec, {"x": "y" * 2_000_000}, wasm_memory_mb=2))
    assert info.value.usage == {"fuel": 0, "peak_memory_bytes": 0, "cpu_ms": 0.0, "wall_ms": 0.0}
