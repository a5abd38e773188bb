"""The built-in guest directory is trusted only when it is ours: another user who pre-creates
``<cache>/guests/<digest>/`` (world-writable) with a planted ``json.wasm`` must not decide what
``json_parse`` returns. A guest file that is not ours (or a symlink) is rebuilt over."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import wasmtime

from runtime.backends.wasm import WasmBackend
from runtime.backends.wasm._build import _sources_digest, guests_source_dir
from runtime.errors import SandboxError

from .conftest import call

pytestmark = pytest.mark.wasm

ROOT = os.geteuid() == 0
OTHER_UID = 65534  # nobody

PLANTED = """(module
  (memory (export "memory") 1)
  (func (export "rt_alloc") (param i32) (result i32) i32.const 1024)
  (data (i32.const 16) "\\00{\\"data\\":\\"PWNED\\"}")
  (func (export "json_parse") (param i32 i32) (result i64) (i64.const 0x0000001100000010)))"""


def _digest_dir(cache: Path) -> Path:
    return cache / "guests" / _sources_digest(guests_source_dir())[:16]


def _plant(path: Path) -> None:
    path.write_bytes(wasmtime.wat2wasm(PLANTED))


def _give_away(path: Path, mode: int) -> None:
    """Another user's (when we can chown, as root in CI), and open to others' writes."""
    if ROOT:
        os.chown(path, OTHER_UID, OTHER_UID)
    os.chmod(path, mode)


@pytest.mark.parametrize("shared", ["guests", "digest"])
def test_a_shared_guest_directory_is_refused(tmp_path: Path, shared: str) -> None:
    cache = tmp_path / "cache"
    digest = _digest_dir(cache)
    digest.mkdir(parents=True)
    _plant(digest / "json.wasm")
    for path in [cache, cache / "guests", digest, digest / "json.wasm"]:
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    _give_away(digest if shared == "digest" else cache / "guests", 0o777)
    backend = WasmBackend(cache_dir=cache)
    try:
        with pytest.raises(SandboxError, match="not private") as info:
            call(backend, "json_parse", {"text": "[1,2]"})
    finally:
        backend.close()
    expected = digest if shared == "digest" else cache / "guests"
    assert info.value.details["path"] == str(expected)


@pytest.mark.parametrize("how", ["not_ours" if ROOT else "group_writable", "symlink"])
def test_a_planted_guest_file_is_rebuilt(tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    digest = _digest_dir(cache)
    digest.mkdir(parents=True)
    target = digest / "json.wasm"
    if how == "symlink":
        elsewhere = tmp_path / "elsewhere.wasm"
        _plant(elsewhere)
        target.symlink_to(elsewhere)
    else:
        _plant(target)
        _give_away(target, 0o666)
    backend = WasmBackend(cache_dir=cache)
    try:
        assert call(backend, "json_parse", {"text": "[1,2]"}) == {"data": [1, 2]}
    finally:
        backend.close()
    assert not target.is_symlink()
    st = target.stat()
    assert st.st_uid == os.geteuid() and not st.st_mode & 0o022


def test_a_guest_swapped_after_the_build_is_refused(tmp_path: Path) -> None:
    """The backend reads a built-in guest with the same checks the build kept it by."""
    backend = WasmBackend(cache_dir=tmp_path)
    built = backend.guests()
    _plant(built["json"])
    _give_away(built["json"], 0o666)
    try:
        with pytest.raises(SandboxError, match="not a private file"):
            call(backend, "json_parse", {"text": "[1]"})
    finally:
        backend.close()
