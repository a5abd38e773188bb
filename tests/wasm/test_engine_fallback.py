"""Under an address-space limit too low for the pooling allocator's reservation (~260 GiB), a
wasm engine falls back to the on-demand allocator and says so in its fingerprint. wasmtime's
C API does not report the failed reservation: it panicked and aborted the process (SIGABRT,
exit 134), so a call through the broker, a manifest load (``runtime tools --tools-dir``) or
an MCP server died with no result and no audit record."""

from __future__ import annotations

import hashlib
import json
import resource
import subprocess
import sys
from pathlib import Path

import wasmtime

from runtime.backends.wasm._engine import POOL_RESERVATION, make_engine, pool_fits
from tests._pythonpath import python_path
from tests.wasm.conftest import ECHO_WAT

ROOT = Path(__file__).resolve().parents[2]
#: Room for the interpreter and on-demand instances (their memory's size plus 64 MiB each),
#: far below the pool's.
_LIMIT = 8 * 1024**3

_SCRIPT = """
import json, sys
from pathlib import Path
from runtime import AuditLog, SyncBroker
from runtime.backends.wasm._engine import pool_fits
from runtime.catalogue.loader import load_manifests
ws, audit, tools = sys.argv[1:]
loaded = [spec.name for spec in load_manifests([Path(tools)])]
with SyncBroker(workspace=ws, audit=audit) as broker:
    result = broker.call({"tool": "json_parse", "arguments": {"text": "[1]"}})
with AuditLog(audit) as log:
    sandbox = [r.sandbox for r in log.tail(10) if r.kind == "completion"]
print(json.dumps({"fits": pool_fits(), "loaded": loaded, "success": result.success,
                  "result": result.result, "sandbox": sandbox}))
"""


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_LIMIT, _LIMIT))


def _custom_tool(folder: Path) -> Path:
    folder.mkdir()
    module = wasmtime.wat2wasm(ECHO_WAT)
    (folder / "echo.wasm").write_bytes(module)
    wasm = {"module": "echo.wasm", "export": "run", "sha256": hashlib.sha256(module).hexdigest()}
    manifest = {
        "name": "echo_guest",
        "description": "echoes",
        "category": "custom",
        "parameters": {"type": "object"},
        "backend": "wasm",
        "wasm": wasm,
    }
    (folder / "echo.json").write_text(json.dumps(manifest))
    return folder


def test_a_low_address_space_limit_falls_back_to_on_demand(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    tools = _custom_tool(tmp_path / "tools")
    args = [str(tmp_path / "ws"), str(tmp_path / "audit.db"), str(tools)]
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        preexec_fn=_limit_address_space,
        timeout=120,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    out = json.loads(proc.stdout)
    assert out["fits"] is False
    assert out["loaded"] == ["echo_guest"]
    assert out["success"] is True and out["result"] == {"data": [1]}
    [sandbox] = out["sandbox"]
    assert sandbox["backend"] == "wasm" and "pooling_allocator" in sandbox["missing"]


def test_without_a_limit_the_engine_is_pooled() -> None:
    assert POOL_RESERVATION > 64 * 4 * 1024**3
    assert pool_fits()
    assert make_engine()[1] is True
