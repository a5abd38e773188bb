"""Precompiled modules on disk, keyed by module sha256, wasmtime version and engine config.

Hazard: ``Module.deserialize`` trusts its input completely (it is native code). So a cache file
is only loaded when (1) the cache directory is ours and writable by nobody else, (2) the file
is ours, opened without following symlinks, and (3) its sha256 matches the digest we wrote
next to it. The bytes that were checked are the bytes deserialised (no re-read, no TOCTOU).
When the directory fails (1), the cache is not used at all: modules are compiled in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import threading
from importlib.metadata import version
from pathlib import Path

import wasmtime

from runtime._fsio import private_dir

__all__ = ["ModuleCache", "read_own_file"]

_MAX_CACHE_FILE = 256 * 1024 * 1024


def read_own_file(path: Path) -> bytes | None:
    """The bytes of ``path`` when it is a regular file of ours, opened without following a
    symlink and writable by nobody else (checked on the open descriptor); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (
            not stat.S_ISREG(st.st_mode)
            or st.st_uid != os.geteuid()
            or st.st_mode & 0o022
            or st.st_size > _MAX_CACHE_FILE
        ):
            return None
        return f.read()


def _write_atomic(path: Path, data: bytes) -> None:
    # Per thread too: two modules of the same bytes may compile at once (WasmBackend locks
    # per file, not per digest).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


class ModuleCache:
    """Compile-or-load for one Engine. ``config_tag`` names the engine settings that change
    generated code (fuel, epochs), so two configs never share an artefact."""

    def __init__(self, engine: wasmtime.Engine, directory: Path | None, config_tag: str) -> None:
        self._engine = engine
        self._tag = f"wasmtime {version('wasmtime')} {config_tag}"
        self.directory = directory if directory is not None and private_dir(directory) else None

    def key(self, module_sha256: str) -> str:
        return hashlib.sha256(f"{module_sha256}\0{self._tag}".encode()).hexdigest()

    def load(self, wasm: bytes, module_sha256: str) -> wasmtime.Module:
        """The compiled module; raises wasmtime.WasmtimeError for an invalid one."""
        if self.directory is None:
            return wasmtime.Module(self._engine, wasm)
        key = self.key(module_sha256)
        blob_path = self.directory / f"{key}.cwasm"
        digest_path = self.directory / f"{key}.sha256"
        blob, digest = read_own_file(blob_path), read_own_file(digest_path)
        if (
            blob is not None
            and digest is not None
            and hashlib.sha256(blob).hexdigest().encode() == digest.strip()
        ):
            try:
                return wasmtime.Module.deserialize(self._engine, blob)
            except wasmtime.WasmtimeError:
                pass  # an artefact of another build; recompile and overwrite below
        module = wasmtime.Module(self._engine, wasm)
        compiled = bytes(module.serialize())
        try:
            # Digest last: a crash in between leaves a blob that fails verification.
            _write_atomic(blob_path, compiled)
            _write_atomic(digest_path, hashlib.sha256(compiled).hexdigest().encode())
        except OSError:
            pass  # a read-only or full cache only costs speed
        return module
