"""What a wasm tool's ``wasm.module`` names: a built-in guest, or a module file.

Here rather than in the wasm backend so that loading manifests (every broker, ``runtime
tools``) can tell the two apart without importing wasmtime (~25 ms a process): only a
module file is checked when its manifest loads.
"""

from __future__ import annotations

from pathlib import Path

from runtime.errors import ManifestError
from runtime.models import ToolSpec

__all__ = ["module_path", "wasm_field"]


def wasm_field(spec: ToolSpec, key: str) -> str:
    value = (spec.wasm or {}).get(key)
    if not isinstance(value, str) or not value:
        raise ManifestError(f"tool {spec.name}: wasm.{key} must be a non-empty string")
    return value


def module_path(spec: ToolSpec) -> Path | None:
    """The file of a custom module (a path ending in .wasm), or None for a built-in name."""
    ref = wasm_field(spec, "module")
    if not ref.endswith(".wasm") and "/" not in ref:
        return None
    path = Path(ref)
    if not path.is_absolute():
        if spec.source is None:
            raise ManifestError(f"tool {spec.name}: a relative wasm module needs a manifest path")
        path = spec.source.parent / path
    return path
