"""A custom wasm tool folder whose guest answers every call with the same bytes: for tests
that need a hostile result or error message from a real wasm call (the guest ABI:
``guests/README.md``; a status byte, then the payload)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import wasmtime


def constant_guest_tool(folder: Path, name: str, payload: bytes, description: str) -> Path:
    """Create ``folder`` holding the tool ``name``: its manifest (sha256 pinned) and a
    module whose ``run`` returns ``payload`` (status byte first) whatever it is given."""
    data = "".join(f"\\{b:02x}" for b in payload)
    wat = f"""(module
      (memory (export "memory") 1)
      (func (export "rt_alloc") (param i32) (result i32) i32.const 4096)
      (data (i32.const 64) "{data}")
      (func (export "run") (param i32 i32) (result i64)
        (i64.or (i64.shl (i64.const {len(payload)}) (i64.const 32)) (i64.const 64))))"""
    folder.mkdir()
    wasm = wasmtime.wat2wasm(wat)
    (folder / f"{name}.wasm").write_bytes(wasm)
    manifest = {
        "name": name,
        "description": description,
        "category": "data",
        "backend": "wasm",
        "parameters": {"type": "object", "properties": {}},
        "wasm": {
            "module": f"{name}.wasm",
            "export": "run",
            "sha256": hashlib.sha256(wasm).hexdigest(),
        },
    }
    (folder / f"{name}.json").write_text(json.dumps(manifest))
    return folder
