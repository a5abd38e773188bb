"""Build the guests in ``guests/`` to wasm with the pinned ``ziglang`` from PyPI.

Every folder of ``guests/`` with ``.c`` files (except ``rt``, the shared runtime linked into
each) becomes ``<folder>.wasm``. Outputs go to a directory named by a digest of the sources,
the compiler version and the flags, so an edited source never reuses a stale binary.

Hazard: the guests decide what every data tool returns. The guest directory and its digest
folder must be ours and closed to others' writes (``_fsio.private_dir``; SandboxError
otherwise), and a guest file is kept only when ``cache.read_own_file`` accepts it (a regular
file of ours, not a symlink, writable by nobody else); any other is rebuilt over.

The command line lives in ``runtime.backends.wasm.build`` (kept out of the package import so
``python -m`` does not import it twice).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from runtime._forksafe import ForkSafeLock
from runtime._fsio import cache_home, private_dir
from runtime._zigcc import zig_cc
from runtime.backends.wasm.cache import read_own_file
from runtime.catalogue._wasm_ref import GUEST_SHARED, builtin_guest_names
from runtime.errors import SandboxError
from runtime.toolkit import guests_source_dir

__all__ = ["build_guests", "default_cache_dir", "guests_source_dir"]

# No libc and no entry point: the modules import nothing. bulk-memory turns memcpy/memset
# into single instructions (and keeps rt.c's own memcpy from calling itself). simd128 lets the
# string scanners test 16 bytes a step (Wasmtime enables SIMD by default); -flto inlines the
# shared runtime's small helpers (buffer appends, the allocator) into each tool: ~10% fewer
# instructions per call, measured with fuel.
CFLAGS = (
    "-target",
    "wasm32-freestanding",
    "-O2",
    "-flto",
    "-mbulk-memory",
    "-msimd128",
    "-nostdlib",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wl,--no-entry",
    "-Wl,--strip-all",
)
_lock = ForkSafeLock()  # a forked child gets it unheld (runtime._forksafe)


def default_cache_dir() -> Path:
    return cache_home() / "wasm"


def _zig_version() -> str:
    from importlib.metadata import version

    return version("ziglang")


def _sources_digest(src: Path) -> str:
    h = hashlib.sha256()
    h.update(f"zig {_zig_version()} {' '.join(CFLAGS)}\n".encode())
    for path in sorted(src.rglob("*")):
        if path.suffix in {".c", ".h"} and path.is_file():
            h.update(str(path.relative_to(src)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def build_guests(out_dir: Path | None = None, *, force: bool = False) -> dict[str, Path]:
    """Build every guest (skipping up-to-date ones unless ``force``); returns name -> path."""
    src = guests_source_dir()
    if not src.is_dir():
        raise SandboxError(f"wasm guest sources not found at {src}")
    root = out_dir if out_dir is not None else default_cache_dir() / "guests"
    out = root / _sources_digest(src)[:16]
    shared = sorted((src / GUEST_SHARED).glob("*.c"))
    built: dict[str, Path] = {}
    with _lock:
        for directory in (root, out):
            try:
                directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:  # a user without a (writable) home: every data tool fails
                raise SandboxError(
                    f"wasm guest cache {root}: cannot create it ({exc.strerror or exc}); set "
                    "XDG_CACHE_HOME to a directory this user can write",
                    path=str(root),
                ) from exc
            # Hazard: the guests decide what every data tool returns; a directory another
            # user owns (or may write) would let them plant one.
            if not private_dir(directory):
                raise SandboxError(
                    f"wasm guest cache {directory} is not private to this user (owned by "
                    "another user, or writable by group or others): remove it, or set "
                    "XDG_CACHE_HOME to a directory of this user's own",
                    path=str(directory),
                )
        for name in sorted(builtin_guest_names()):
            sources = sorted((src / name).glob("*.c"))
            target = out / f"{name}.wasm"
            # Only a file of ours that nobody else may write is kept (cache.read_own_file);
            # anything else there (a symlink, another user's file) is replaced by a build.
            if force or read_own_file(target) is None:
                _compile([*sources, *shared], target)
                if read_own_file(target) is None:
                    raise SandboxError(
                        f"wasm guest {target} is not a private file of this user after building it",
                        path=str(target),
                    )
            built[name] = target
    return built


def _compile(sources: list[Path], target: Path) -> None:
    zig_cc(sources, CFLAGS, target, what=f"wasm guest {target.stem}")
