"""The on-demand engine (the fallback where the pool's reservation does not fit: a low
RLIMIT_AS) runs wasm calls under a moderate address-space limit.

With wasmtime's default memory settings every on-demand instance reserved 4 GiB + a 32 MiB
guard of address space: under RLIMIT_AS 4 GiB no json_parse call could run, and 16
concurrent ones under 8 GiB failed by the handful, each as an empty sandbox_error ("wasm
guest could not be run") hiding wasmtime's "mmap failed to reserve". Now an on-demand memory
reserves its size plus a small growth room, and an instance that cannot be created is
resource_limit with wasmtime's reason in its details."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.wasm._engine import ENGINE_TAGS
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]
_GIB = 1024**3

_CALLS = """
import json, sys
from runtime import SyncBroker
from runtime.backends.wasm._engine import pool_fits
ws, audit, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = json.dumps(list(range(120000)))
with SyncBroker(workspace=ws, audit=audit) as broker:
    calls = [{"tool": "json_parse", "arguments": {"text": text}} for _ in range(n)]
    results = broker.call_many(calls) if n > 1 else [broker.call(calls[0])]
print(json.dumps({"fits": pool_fits(), "errors": [
    r.error.model_dump(mode="json") for r in results if not r.success
], "ok": sum(r.success for r in results)}))
"""

#: A module whose initial memory (65535 pages, 64 KiB short of 4 GiB) no instance can
#: reserve under RLIMIT_AS 4 GiB; wasm_memory_mb 4096 lets the call try.
_HUGE_WAT = """(module
  (memory (export "memory") 65535)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "run") (param i32 i32) (result i64) (i64.const 0)))"""

_HUGE = """
import hashlib, json, sys
from pathlib import Path
import wasmtime
from runtime.backends.wasm import WasmBackend
from runtime.catalogue.loader import load_manifests
from runtime.errors import ResourceLimitExceeded
from tests.wasm.conftest import request
folder = Path(sys.argv[1])
wasm = wasmtime.wat2wasm(sys.argv[2])
(folder / "huge.wasm").write_bytes(wasm)
(folder / "huge.json").write_text(json.dumps({
    "name": "huge", "description": "t", "category": "custom",
    "parameters": {"type": "object"}, "backend": "wasm",
    "wasm": {"module": "huge.wasm", "export": "run",
             "sha256": hashlib.sha256(wasm).hexdigest()},
}))
[spec] = load_manifests([folder])
out = {}
for native in (True, False):
    backend = WasmBackend(native=native)
    try:
        backend.run_sync(request(spec, {}, wasm_memory_mb=4096))
        out[str(native)] = None
    except ResourceLimitExceeded as exc:
        out[str(native)] = exc.details
    finally:
        backend.close()
print(json.dumps(out))
"""


def _limited(gib: int) -> Any:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (gib * _GIB, gib * _GIB))

    return limit


def _run(script: str, gib: int, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        preexec_fn=_limited(gib),
        timeout=300,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    out: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return out


@pytest.mark.parametrize(("gib", "calls"), [(4, 1), (8, 16)])
def test_json_parse_calls_run_under_an_address_space_limit(
    tmp_path: Path, gib: int, calls: int
) -> None:
    (tmp_path / "ws").mkdir()
    out = _run(_CALLS, gib, str(tmp_path / "ws"), str(tmp_path / "audit.db"), str(calls))
    assert out["fits"] is False
    assert out["errors"] == []
    assert out["ok"] == calls


def test_an_instance_that_cannot_be_reserved_is_a_resource_limit(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    out = _run(_HUGE, 4, str(tmp_path / "tools"), _HUGE_WAT)
    for path in ("True", "False"):  # the native helper, then the ctypes path
        details = out[path]
        assert details is not None, path
        assert details["limit"] == "wasm_instance"
        assert "reserve" in details["cause"], details["cause"]


def test_the_two_engines_cache_their_modules_apart() -> None:
    # Their code differs (bounds checks): a module compiled for one is not the other's.
    assert ENGINE_TAGS[True] != ENGINE_TAGS[False]
