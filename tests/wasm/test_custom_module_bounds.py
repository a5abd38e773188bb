"""A custom module file is read with bounds: a FIFO or a device named by a manifest is a
ManifestError at once (it hung the backend, or read /dev/zero until MemoryError), a module
over MAX_MODULE_BYTES is refused at manifest load, and compiling one tool's module does not
hold up another tool's first call."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest
import wasmtime

from runtime.backends.wasm import WasmBackend, load_custom_module
from runtime.backends.wasm.backend import MAX_MODULE_BYTES
from runtime.errors import ManifestError, SandboxError
from runtime.models import ToolSpec

from .conftest import ECHO_WAT, request, wat_tool

pytestmark = pytest.mark.wasm


def _in_thread(fn: object, within_s: float = 5.0) -> BaseException | None:
    """Run ``fn`` in a daemon thread; the exception it raised. Fails if it is still running
    after ``within_s`` (the bug this guards against is a hang)."""
    box: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as exc:  # returned to the test
            box.append(exc)
        else:
            box.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(within_s)
    assert not thread.is_alive(), f"still running after {within_s} s"
    return box[0]


def _spec_at(module: str, tmp_path: Path, sha256: str = "0" * 64) -> ToolSpec:
    return ToolSpec(
        name="odd",
        description="test guest",
        category="custom",
        parameters={"type": "object"},
        backend="wasm",  # type: ignore[arg-type]
        wasm={"module": module, "export": "run", "sha256": sha256},
        source=tmp_path / "odd.json",
    )


def test_a_fifo_module_is_a_manifest_error_at_once(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.wasm")
    exc = _in_thread(lambda: load_custom_module(_spec_at("fifo.wasm", tmp_path)))
    assert isinstance(exc, ManifestError) and "not a regular file" in exc.message


def test_a_device_module_is_a_manifest_error_at_once(tmp_path: Path) -> None:
    (tmp_path / "zero.wasm").symlink_to("/dev/zero")
    for module in ["/dev/zero", "zero.wasm"]:
        exc = _in_thread(lambda m=module: load_custom_module(_spec_at(m, tmp_path)))  # type: ignore[misc]
        assert isinstance(exc, ManifestError) and "not a regular file" in exc.message


def test_a_module_swapped_for_a_fifo_fails_the_call_not_the_backend(
    native_backend: WasmBackend, tmp_path: Path
) -> None:
    spec = wat_tool(tmp_path, "echo", ECHO_WAT)
    assert native_backend.run_sync(request(spec, {})).result == {"ok": True}
    path = tmp_path / "echo.wasm"
    path.unlink()
    os.mkfifo(path)
    exc = _in_thread(lambda: native_backend.run_sync(request(spec, {}, timeout_s=1)))
    # The call's error (sandbox_error, naming the manifest), no longer a bare ManifestError
    # that the broker reported as internal_error.
    assert isinstance(exc, SandboxError) and "not a regular file" in exc.message
    assert exc.details["file"] == str(spec.source)


def _with_custom_section(wasm: bytes, size: int) -> bytes:
    """``wasm`` plus a custom section of ``size`` payload bytes: still a valid module."""
    name = b"pad"
    body = bytes([len(name)]) + name + b"\0" * size
    n, leb = len(body), bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        leb.append(byte | (0x80 if n else 0))
        if not n:
            break
    return wasm + b"\0" + bytes(leb) + body


def test_an_oversized_module_is_refused_at_manifest_load(tmp_path: Path) -> None:
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    (tmp_path / "big.wasm").write_bytes(_with_custom_section(wasm, MAX_MODULE_BYTES))
    wasmtime.Module.validate(wasmtime.Engine(), (tmp_path / "big.wasm").read_bytes())
    with pytest.raises(ManifestError, match="over the") as info:
        load_custom_module(_spec_at("big.wasm", tmp_path))
    assert info.value.details["limit"] == MAX_MODULE_BYTES
    # Just under the cap is fine.
    ok = _with_custom_section(wasm, MAX_MODULE_BYTES - 4096)
    (tmp_path / "ok.wasm").write_bytes(ok)
    load_custom_module(_spec_at("ok.wasm", tmp_path, hashlib.sha256(ok).hexdigest()))


def test_a_slow_compile_does_not_block_another_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 12 MB module took 23 s to compile on its first call, under the backend-wide lock:
    # every other tool's first call waited for it.
    backend = WasmBackend(cache_dir=tmp_path / "cache")
    slow = wat_tool(tmp_path, "slow", ECHO_WAT)
    fast = wat_tool(tmp_path, "fast", ECHO_WAT.replace("true", "1234"))
    started, release = threading.Event(), threading.Event()
    compile_module = backend._compile

    def slow_compile(spec: ToolSpec, path: Path, builtin: bool) -> object:
        if spec.name == "slow":
            started.set()
            assert release.wait(30)
        return compile_module(spec, path, builtin)

    monkeypatch.setattr(backend, "_compile", slow_compile)
    try:
        slow_call = threading.Thread(target=lambda: backend.run_sync(request(slow, {})))
        slow_call.start()
        assert started.wait(10)
        t0 = time.monotonic()
        fast_result = _in_thread(lambda: backend.run_sync(request(fast, {})), within_s=10)
        assert fast_result is None
        assert time.monotonic() - t0 < 5
        assert slow_call.is_alive()  # still compiling: the fast tool did not wait for it
        assert not backend._lock.locked()
        # A second call of the slow tool waits for that compilation (one compile a module).
        again = threading.Thread(target=lambda: backend.run_sync(request(slow, {})))
        again.start()
        release.set()
        slow_call.join(10)
        again.join(10)
        assert not slow_call.is_alive() and not again.is_alive()
        assert len([k for k in backend._loaded if k[0].endswith("slow.wasm")]) == 1
        assert backend.run_sync(request(slow, {})).result == {"ok": True}
    finally:
        release.set()
        backend.close()
