from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from runtime.backends.base import ExecRequest
from runtime.backends.wasm import WasmBackend
from runtime.models import Decision, Limits, ToolSpec
from runtime.toolkit import builtin_tools_dir

DATA_TOOLS = builtin_tools_dir() / "data"
HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def native_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WasmBackend]:
    """The default backend: calls go through the one-foreign-call helper (``_native``)."""
    b = WasmBackend(cache_dir=tmp_path_factory.mktemp("wasm-cache"))
    yield b
    b.close()


@pytest.fixture(scope="session")
def backend(native_backend: WasmBackend) -> WasmBackend:
    return native_backend


@pytest.fixture(scope="session")
def ctypes_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WasmBackend]:
    """A backend kept on the step-by-step ctypes path (no native call helper)."""
    b = WasmBackend(cache_dir=tmp_path_factory.mktemp("wasm-cache-ctypes"), native=False)
    yield b
    b.close()


def spec_of(tool: str) -> ToolSpec:
    path = DATA_TOOLS / f"{tool}.json"
    spec = ToolSpec.model_validate(json.loads(path.read_text()))
    spec.source = path
    return spec


def request(spec: ToolSpec, arguments: dict[str, Any], **limits: Any) -> ExecRequest:
    return ExecRequest(
        call_id="call_test",
        spec=spec,
        arguments=arguments,
        workspace=Path("/nonexistent"),
        limits=Limits().merged(**limits),
        decision=Decision(action="allow", rule="test"),
    )


def call(backend: WasmBackend, tool: str, arguments: dict[str, Any], **limits: Any) -> Any:
    return backend.run_sync(request(spec_of(tool), arguments, **limits)).result


def wat_tool(tmp_path: Path, name: str, wat: str, export: str = "run", **wasm: Any) -> ToolSpec:
    """A custom tool whose module is compiled from WAT text at test time, pinned by its
    sha256 (a custom module must be) unless ``sha256`` is given (None: no pin)."""
    module = tmp_path / f"{name}.wasm"
    data = wasmtime.wat2wasm(wat)
    module.write_bytes(data)
    wasm.setdefault("sha256", hashlib.sha256(data).hexdigest())
    if wasm["sha256"] is None:
        del wasm["sha256"]
    manifest = tmp_path / f"{name}.json"
    spec = ToolSpec(
        name=name,
        description="test guest",
        category="custom",
        parameters={"type": "object"},
        backend="wasm",  # type: ignore[arg-type]
        wasm={"module": module.name, "export": export, **wasm},
        source=manifest,
    )
    return spec


ECHO_WAT = """(module
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (data (i32.const 16) "\\00{\\"ok\\":true}")
  (func (export "run") (param i32 i32) (result i64) (i64.const 0x0000000c00000010)))"""
