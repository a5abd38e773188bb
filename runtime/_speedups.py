"""The C accelerator (``_speedups.c``): RFC 8785 canonical JSON, built for this interpreter.

Why: the audit log serialises every call's arguments and result canonically; the Python walk
in :mod:`runtime.audit._canonical` costs ~100 µs on a 1 KiB document, twice the broker's whole
per-call budget (DESIGN §10). The C walk produces the same bytes and raises the same errors;
the Python walk stays as the fallback and as the reference the differential tests compare with.

The extension is compiled on first use with the pinned ``ziglang`` (already needed for the
wasm guests) against the running interpreter's headers, into the user's cache, keyed by a
digest of its source, the interpreter's version and ABI, the compiler version and the flags.

Hazards:

- Loading an extension runs its code in this process, so it is only loaded from a directory
  that is ours and writable by nobody else, from a file that is ours and not group- or
  world-writable, checked on the open descriptor that is then loaded (``/proc/<pid>/fd``), so
  nothing can be swapped in between (the rule of the wasm native helper, ``_native.py``).
- Any failure (no headers, no compiler, a cache that is not private, no /proc) leaves the
  pure-Python code in use, which has the same behaviour; :func:`status` says why, and
  ``runtime doctor`` prints it. ``RUNTIME_PURE_PYTHON=1`` forces the pure path.
- Every process imports the audit package (``import runtime`` does), sandbox children
  included: nothing is built or loaded at import, only at the first canonical encoding.
- A process the broker starts decides nothing of its own: its environment (HOME, no
  ``XDG_CACHE_HOME``) would name another cache than the one the broker judged
  (``broker/_hostpaths.py``), perhaps one in the workspace that every call may write. The
  broker sends the file it loaded, by its real path (:func:`loaded_path`, none when it runs
  pure; the cache's path as written may hold a ``..`` or a symlink to resolve again) and that
  process loads exactly it (:func:`adopt`): the sandbox's fork-server (``zygote.py``).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

from runtime._forksafe import ForkSafeLock
from runtime._fsio import cache_home, own_library, private_cache_dir, private_dir
from runtime._zigcc import zig_cc
from runtime.errors import SandboxError

__all__ = ["PURE_ENV", "adopt", "build_and_load", "loaded_path", "module", "status"]

#: Set to a non-empty value other than ``0``, the pure-Python code is used.
PURE_ENV = "RUNTIME_PURE_PYTHON"
_SOURCE = Path(__file__).with_name("_speedups.c")
_NAME = "_rt_speedups"
CFLAGS = (
    "-O2",
    "-shared",
    "-fPIC",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",  # CPython's own headers and the METH_FASTCALL signature
    "-fno-strict-aliasing",  # as CPython itself is built: PyObject casts
    # No libc of zig's own to link: the few libc functions used (memcpy, qsort, snprintf...)
    # bind at load time to the interpreter's, like its Python symbols. Cuts a cold first
    # build (zig would first build its glibc stubs) from ~10 s to ~1 s: the first encoding
    # of a process waits for it.
    "-nostdlib",
)
_lock = ForkSafeLock()  # a forked child gets it unheld (runtime._forksafe)
# The one loaded module (or None) and why not, and the file it was loaded from, once
# decided; guarded by _lock.
_state: dict[str, Any] = {"decided": False, "module": None, "error": None, "path": None}


def _forced_pure() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def _cache_root() -> Path:
    """``$XDG_CACHE_HOME/runtime/speedups`` or ``~/.cache/…``; else a private dir in /tmp
    (a system user may have no home). Raises OSError when neither is private."""
    found = private_cache_dir("speedups")
    if found is None:
        tried = cache_home() / "speedups"
        raise OSError(f"no private cache directory for the C accelerator (tried {tried})")
    return found


def _ext_suffix() -> str:
    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def _digest() -> str:
    h = hashlib.sha256()
    h.update(
        f"zig {version('ziglang')} {' '.join(CFLAGS)} {platform.machine()}\n"
        f"python {sys.version} {sys.implementation.cache_tag} {sys.abiflags} {_ext_suffix()}\n"
        f"{sysconfig.get_paths()['include']}\n".encode()
    )
    h.update(_SOURCE.read_bytes())
    return h.hexdigest()[:16]


def _compile(target: Path, include: Path, zig_cache: Path) -> None:
    if not (include / "Python.h").is_file():
        raise OSError(f"the interpreter's headers are not installed ({include}/Python.h)")
    cache = str(zig_cache)
    env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": cache, "ZIG_LOCAL_CACHE_DIR": cache}
    try:
        zig_cc(
            [_SOURCE], (*CFLAGS, "-I", str(include)), target,
            what="the C accelerator", env=env, mode=0o700,
        )  # fmt: skip
    except SandboxError as exc:
        stderr = exc.details.get("stderr")
        raise OSError(f"{exc.message}: {stderr[-2000:]}" if stderr else exc.message) from exc


def _load_own(path: Path) -> tuple[ModuleType, Path]:
    """Import exactly the file that was checked (:func:`runtime._fsio.own_library`), and its
    real path, read from the descriptor it was loaded through: what a process this one starts
    is sent (:func:`loaded_path`). Not ``path`` itself: it may hold a ``..`` or a symlink
    (``XDG_CACHE_HOME`` as the user wrote it), whose meaning could change before that
    process opens it; the real path, judged when the broker opened, has neither."""
    real: list[str] = []

    def load(fd_path: str) -> ModuleType:
        real.append(os.readlink(fd_path))  # the open file's path, as the kernel names it
        return _import(fd_path)

    return own_library(path, "the C accelerator", load), Path(real[0])


def _import(fd_path: str) -> ModuleType:
    name = f"runtime.{_NAME}"
    loader = importlib.machinery.ExtensionFileLoader(name, fd_path)
    spec = importlib.util.spec_from_file_location(name, fd_path, loader=loader)
    if spec is None:  # pragma: no cover - only for paths without a known loader
        raise ImportError(f"no import spec for {fd_path}")
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def build_and_load(cache_dir: Path | None = None, *, include: Path | None = None) -> ModuleType:
    """Build (once per digest) and load the extension from ``cache_dir/<digest>/``.

    Raises OSError (no headers or compiler, a cache that is not private, a file that is not
    ours) or ImportError (a file that is not a loadable extension)."""
    return _build_and_load(cache_dir, include)[0]


def _build_and_load(cache_dir: Path | None, include: Path | None) -> tuple[ModuleType, Path]:
    """:func:`build_and_load`, and the real path of the file it loaded."""
    root = cache_dir if cache_dir is not None else _cache_root()
    target = root / _digest() / f"{_NAME}{_ext_suffix()}"
    _check_dirs(target)
    if not target.exists():
        headers = include if include is not None else Path(sysconfig.get_paths()["include"])
        _compile(target, headers, root / "zig-cache")
    return _load_own(target)


def _check_dirs(target: Path) -> None:
    """Raise OSError unless ``target``'s directory and the cache root above it are private."""
    out = target.parent
    if not (private_dir(out.parent) and private_dir(out)):
        raise OSError(f"{out} is not a private directory; the C accelerator is not loaded")


def module() -> ModuleType | None:
    """The loaded extension, built on the first call; None when forced pure or when it cannot
    be built or loaded (:func:`status` says why). Decided once per process."""
    if _state["decided"]:
        return _state["module"]  # type: ignore[no-any-return]
    with _lock:
        if not _state["decided"]:
            if _forced_pure():
                _state["error"] = f"disabled by {PURE_ENV}"
            else:
                try:
                    _state["module"], _state["path"] = _build_and_load(None, None)
                except (OSError, ImportError) as exc:
                    _state["error"] = f"{type(exc).__name__}: {exc}"
            _state["decided"] = True
    return _state["module"]  # type: ignore[no-any-return]


def loaded_path() -> Path | None:
    """The real path (no symlink, no ``..``) of the file this process's extension was loaded
    from (deciding first, as :func:`module`); None when it runs the pure-Python code. What a
    process it starts is told to :func:`adopt`."""
    module()
    return _state["path"]  # type: ignore[no-any-return]


def adopt(path: str) -> ModuleType | None:
    """Decide this process's extension as its starter decided its own: the file ``path``
    (its :func:`loaded_path`) or, for ``""``, none. Never builds, never looks in this
    process's own cache, whatever this process's environment says (``PURE_ENV``
    included: the starter's decision already holds its own). Returns what :func:`module`
    will; a file that does not pass the checks leaves the pure-Python code in use."""
    with _lock:
        _state.update(decided=True, module=None, error=None, path=None)
        if not path:
            _state["error"] = "not loaded by the process that started this one"
        else:
            try:
                target = Path(path)
                _check_dirs(target)
                _state["module"], _state["path"] = _load_own(target)
            except (OSError, ImportError) as exc:
                _state["error"] = f"{type(exc).__name__}: {exc}"
    return _state["module"]  # type: ignore[no-any-return]


def status() -> dict[str, Any]:
    """``{"loaded": bool, "error": str | None}`` for ``runtime doctor`` (builds if needed)."""
    mod = module()
    return {"loaded": mod is not None, "error": _state["error"]}
