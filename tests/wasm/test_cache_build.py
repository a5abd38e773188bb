"""The on-disk module cache (only our own, verified artefacts are deserialised) and the build."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import wasmtime

import runtime.backends.wasm
from runtime.backends.wasm import WasmBackend, build_guests
from runtime.backends.wasm.cache import ModuleCache

from .conftest import ECHO_WAT, call

pytestmark = pytest.mark.wasm

TAG = "fuel+epoch/v1"


def engine() -> wasmtime.Engine:
    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    return wasmtime.Engine(config)


def test_cache_writes_then_reuses(tmp_path: Path) -> None:
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    digest = hashlib.sha256(wasm).hexdigest()
    cache = ModuleCache(engine(), tmp_path / "c", TAG)
    cache.load(wasm, digest)
    key = cache.key(digest)
    blob = tmp_path / "c" / f"{key}.cwasm"
    assert blob.is_file() and (tmp_path / "c" / f"{key}.sha256").is_file()
    assert blob.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "c").stat().st_mode & 0o777 == 0o700
    mtime = blob.stat().st_mtime_ns
    cache.load(wasm, digest)
    assert blob.stat().st_mtime_ns == mtime  # loaded, not rewritten


def test_tampered_artefact_is_not_deserialised(tmp_path: Path) -> None:
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    digest = hashlib.sha256(wasm).hexdigest()
    cache = ModuleCache(engine(), tmp_path / "c", TAG)
    cache.load(wasm, digest)
    blob = tmp_path / "c" / f"{cache.key(digest)}.cwasm"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    module = cache.load(wasm, digest)  # digest mismatch: recompiled from the wasm, rewritten
    assert [e.name for e in module.exports]
    assert (
        hashlib.sha256(blob.read_bytes()).hexdigest().encode()
        == (tmp_path / "c" / f"{cache.key(digest)}.sha256").read_bytes()
    )


def test_symlinked_artefact_is_not_followed(tmp_path: Path) -> None:
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    digest = hashlib.sha256(wasm).hexdigest()
    cache = ModuleCache(engine(), tmp_path / "c", TAG)
    key = cache.key(digest)
    elsewhere = tmp_path / "elsewhere.cwasm"
    elsewhere.write_bytes(b"evil")
    (tmp_path / "c" / f"{key}.cwasm").symlink_to(elsewhere)
    (tmp_path / "c" / f"{key}.sha256").write_bytes(hashlib.sha256(b"evil").hexdigest().encode())
    cache.load(wasm, digest)
    assert not (tmp_path / "c" / f"{key}.cwasm").is_symlink()


def test_shared_writable_cache_dir_is_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    cache = ModuleCache(engine(), shared, TAG)
    assert cache.directory is None
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    cache.load(wasm, hashlib.sha256(wasm).hexdigest())
    assert list(shared.iterdir()) == []


def test_build_is_idempotent_and_complete(tmp_path: Path) -> None:
    first = build_guests(tmp_path)
    assert set(first) == {"base64", "csv", "hash", "json", "regex"}
    mtimes = {name: path.stat().st_mtime_ns for name, path in first.items()}
    again = build_guests(tmp_path)
    assert {name: path.stat().st_mtime_ns for name, path in again.items()} == mtimes
    for path in first.values():
        module = wasmtime.Module(wasmtime.Engine(), path.read_bytes())
        assert module.imports == []


def test_build_command_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-m", "runtime.backends.wasm.build", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(runtime.backends.wasm.__file__).parents[3],
    )
    names = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert names == ["base64", "csv", "hash", "json", "regex"]


def test_fresh_backend_uses_disk_cache(tmp_path: Path) -> None:
    first = WasmBackend(cache_dir=tmp_path)
    assert call(first, "hash", {"text": "a"})["hex"]
    first.close()
    artefacts = sorted((tmp_path / "modules").glob("*.cwasm"))
    assert artefacts
    mtimes = [p.stat().st_mtime_ns for p in artefacts]
    second = WasmBackend(cache_dir=tmp_path)
    assert call(second, "hash", {"text": "a"})["hex"]
    second.close()
    assert [p.stat().st_mtime_ns for p in sorted((tmp_path / "modules").glob("*.cwasm"))] == mtimes
