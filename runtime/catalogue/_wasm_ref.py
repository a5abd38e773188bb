"""What a wasm tool's ``wasm.module`` names: a built-in guest, or a module file.

Here rather than in the wasm backend so that loading manifests (every broker, ``runtime
tools``) can tell the two apart without importing wasmtime (~25 ms a process).

The rule: a built-in guest is named exactly (one of :func:`builtin_guest_names`: ``json``,
``hash``, ...); anything else is a module file, relative to the manifest's folder unless
absolute, whatever its name ends in (``echo.wasm``, ``echo.WASM``, ``echo``). A file of a
built-in guest's name is named by a path (``./json``). Before, a name that neither ended in
``.wasm`` nor held a ``/`` was taken for a built-in guest's, so ``echo.WASM`` skipped every
check at load and then failed every call ("no built-in wasm guest named").
"""

from __future__ import annotations

import functools
from pathlib import Path

from runtime.errors import ManifestError
from runtime.models import ToolSpec
from runtime.toolkit import guests_source_dir

__all__ = ["GUEST_SHARED", "builtin_guest_names", "module_path", "wasm_field"]

#: The guests' sources folder linked into every guest, not a guest of its own.
GUEST_SHARED = "rt"


def wasm_field(spec: ToolSpec, key: str) -> str:
    value = (spec.wasm or {}).get(key)
    if not isinstance(value, str) or not value:
        raise ManifestError(f"tool {spec.name}: wasm.{key} must be a non-empty string")
    return value


@functools.lru_cache(maxsize=1)
def builtin_guest_names() -> frozenset[str]:
    """The built-in guests: each folder of the guests' sources holding C sources, but the
    shared one (what ``build_guests`` builds). Listed once a process (the sources are part
    of the installed package)."""
    src = guests_source_dir()
    if not src.is_dir():
        return frozenset()
    return frozenset(
        p.name
        for p in src.iterdir()
        if p.is_dir() and p.name != GUEST_SHARED and any(p.glob("*.c"))
    )


def module_path(spec: ToolSpec) -> Path | None:
    """The file of a custom module, or None when ``wasm.module`` names a built-in guest."""
    ref = wasm_field(spec, "module")
    if ref in builtin_guest_names():
        return None
    path = Path(ref)
    if not path.is_absolute():
        if spec.source is None:
            raise ManifestError(
                f"tool {spec.name}: wasm.module {ref!r} is not a built-in guest "
                f"({', '.join(sorted(builtin_guest_names()))}), and a module file named "
                "relative to its manifest needs a manifest path"
            )
        path = spec.source.parent / path
    return path
