"""A custom wasm tool's module is checked when its manifest loads (issue #5: "pins the
module's sha256, checked at load"): a missing, mis-pinned or invalid module was found only
by each call, as internal_error, while `runtime tools --tools-dir` listed the tool."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import wasmtime

from runtime.catalogue.loader import load_manifests
from runtime.errors import ManifestError
from tests._pythonpath import python_path
from tests.wasm.conftest import ECHO_WAT

ROOT = Path(__file__).resolve().parents[2]


def _tool_dir(tmp_path: Path, *, wasm: bytes | None, pin: str | None = None) -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    module = wasmtime.wat2wasm(ECHO_WAT)
    if wasm is not None:
        (folder / "echo.wasm").write_bytes(wasm)
    manifest = {
        "name": "echo_guest",
        "description": "echoes",
        "category": "custom",
        "parameters": {"type": "object"},
        "backend": "wasm",
        "wasm": {
            "module": "echo.wasm",
            "export": "run",
            "sha256": pin or hashlib.sha256(module).hexdigest(),
        },
    }
    (folder / "echo.json").write_text(json.dumps(manifest))
    return folder


def test_a_good_module_loads(tmp_path: Path) -> None:
    folder = _tool_dir(tmp_path, wasm=wasmtime.wat2wasm(ECHO_WAT))
    assert [s.name for s in load_manifests([folder])] == ["echo_guest"]


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("missing", "cannot read wasm module"),
        ("pin", "sha256 pin"),
        ("invalid", "not a valid wasm module"),
    ],
)
def test_a_bad_module_is_a_load_error_naming_the_manifest(
    tmp_path: Path, case: str, said: str
) -> None:
    good = wasmtime.wat2wasm(ECHO_WAT)
    if case == "missing":
        folder = _tool_dir(tmp_path, wasm=None)
    elif case == "pin":
        folder = _tool_dir(tmp_path, wasm=good, pin="0" * 64)
    else:
        junk = b"\x00asm\x01\x00\x00\x00\xff"
        folder = _tool_dir(tmp_path, wasm=junk, pin=hashlib.sha256(junk).hexdigest())
    with pytest.raises(ManifestError, match=said) as exc:
        load_manifests([folder])
    assert exc.value.details["file"] == str(folder / "echo.json")
    assert exc.value.details["field"] == ("wasm.sha256" if case == "pin" else "wasm.module")


def test_runtime_tools_refuses_the_folder(tmp_path: Path) -> None:
    folder = _tool_dir(tmp_path, wasm=wasmtime.wat2wasm(ECHO_WAT), pin="0" * 64)
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "tools", "--tools-dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "sha256 pin" in proc.stderr and "echo.json" in proc.stderr


# A module no call could run was listed by `runtime tools` and failed every call as
# internal_error ("a wasm guest may not import anything"), never naming the manifest: the
# backend's checks ran at the first call only. They run when the manifest loads now.
_ABI = (
    '(memory (export "memory") 1) '
    '(func (export "rt_alloc") (param i32) (result i32) i32.const 1024) '
    '(func (export "run") (param i32 i32) (result i64) i64.const 0)'
)
_UNRUNNABLE = {
    "wasi-import": (
        '(module (import "wasi_snapshot_preview1" "fd_write" '
        f"(func (param i32 i32 i32 i32) (result i32))) {_ABI})",
        "may not import anything",
    ),
    "env-memory-import": (
        '(module (import "env" "memory" (memory 1)) '
        '(func (export "rt_alloc") (param i32) (result i32) i32.const 0) '
        '(func (export "run") (param i32 i32) (result i64) i64.const 0))',
        "may not import anything",
    ),
    "no-rt_alloc": (
        '(module (memory (export "memory") 1) '
        '(func (export "run") (param i32 i32) (result i64) i64.const 0))',
        "does not follow the guest ABI",
    ),
    "no-memory-export": (
        "(module (memory 1) "
        '(func (export "rt_alloc") (param i32) (result i32) i32.const 0) '
        '(func (export "run") (param i32 i32) (result i64) i64.const 0))',
        "does not follow the guest ABI",
    ),
    "export-wrong-signature": (
        '(module (memory (export "memory") 1) '
        '(func (export "rt_alloc") (param i32) (result i32) i32.const 0) '
        '(func (export "run") (param i32) (result i32) i32.const 0))',
        r"exports no function run\(i32, i32\) -> i64",
    ),
    "export-missing": (
        '(module (memory (export "memory") 1) '
        '(func (export "rt_alloc") (param i32) (result i32) i32.const 0) '
        '(func (export "other") (param i32 i32) (result i64) i64.const 0))',
        r"exports no function run\(i32, i32\) -> i64",
    ),
    "huge-table": (f"(module (table 100000000 funcref) {_ABI})", "module table does not fit"),
    "second-memory": (f"(module (memory 1) {_ABI})", "module memory does not fit"),
}


@pytest.mark.parametrize("case", sorted(_UNRUNNABLE))
def test_a_module_no_call_could_run_is_a_load_error(tmp_path: Path, case: str) -> None:
    wat, said = _UNRUNNABLE[case]
    wasm = wasmtime.wat2wasm(wat)
    folder = _tool_dir(tmp_path, wasm=wasm, pin=hashlib.sha256(wasm).hexdigest())
    with pytest.raises(ManifestError, match=said) as exc:
        load_manifests([folder])
    assert exc.value.message.startswith(f"{folder / 'echo.json'}: ")
    assert exc.value.details["file"] == str(folder / "echo.json")
    assert exc.value.details["field"] == "wasm.module"


def test_a_directory_as_module_is_a_load_error(tmp_path: Path) -> None:
    # os.fdopen of a directory raised IsADirectoryError before the regular-file check: a
    # traceback and exit 1 from `runtime tools`, not the typed refusal a FIFO gets.
    folder = _tool_dir(tmp_path, wasm=None)
    (folder / "echo.wasm").mkdir()
    with pytest.raises(ManifestError, match="is not a regular file") as exc:
        load_manifests([folder])
    assert exc.value.details["file"] == str(folder / "echo.json")


def test_an_unpinned_module_is_a_load_error_giving_its_digest(tmp_path: Path) -> None:
    # The pin was optional, so a module replaced on disk ran silently (README: "a wasm
    # module pinned by sha256"). Refused now, with the digest to pin after checking the file.
    wasm = wasmtime.wat2wasm(ECHO_WAT)
    folder = _tool_dir(tmp_path, wasm=wasm)
    manifest = folder / "echo.json"
    data = json.loads(manifest.read_text())
    del data["wasm"]["sha256"]
    manifest.write_text(json.dumps(data))
    digest = hashlib.sha256(wasm).hexdigest()
    with pytest.raises(ManifestError, match="not pinned") as exc:
        load_manifests([folder])
    assert digest in exc.value.message
    assert exc.value.details == {"field": "wasm.sha256", "actual": digest, "file": str(manifest)}


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": python_path(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )


@pytest.mark.parametrize("command", ["tools", "exec"])
def test_the_cli_refuses_a_folder_with_an_importing_module(tmp_path: Path, command: str) -> None:
    wasm = wasmtime.wat2wasm(_UNRUNNABLE["wasi-import"][0])
    folder = _tool_dir(tmp_path, wasm=wasm, pin=hashlib.sha256(wasm).hexdigest())
    args = ["--tools-dir", str(folder)]
    if command == "exec":
        (tmp_path / "call.json").write_text('{"tool": "echo_guest", "arguments": {}}')
        args = ["call.json", "--workspace", "ws", "--audit", "audit.db", *args]
    proc = _cli(tmp_path, command, *args)
    assert proc.returncode == 64, proc.stdout + proc.stderr
    assert "may not import anything" in proc.stderr and str(folder / "echo.json") in proc.stderr


def test_a_module_replaced_under_a_broker_is_a_sandbox_error(tmp_path: Path) -> None:
    # A pinned module replaced on disk while the broker runs: each call was internal_error
    # (the backend's ManifestError); now the call's own sandbox_error naming the manifest.
    from runtime import SyncBroker

    good = wasmtime.wat2wasm(ECHO_WAT)
    folder = _tool_dir(tmp_path, wasm=good)
    manifest = folder / "echo.json"
    data = json.loads(manifest.read_text())
    data["category"] = "data"  # allowed by the default policy
    manifest.write_text(json.dumps(data))
    other = wasmtime.wat2wasm(ECHO_WAT.replace("true", "false"))
    with SyncBroker(
        workspace=tmp_path / "ws", audit=tmp_path / "audit.db", tool_folders=[folder]
    ) as broker:
        assert broker.call({"tool": "echo_guest", "arguments": {}}).result == {"ok": True}
        (folder / "echo.wasm").write_bytes(other)
        result = broker.call({"tool": "echo_guest", "arguments": {}})
    assert result.error is not None
    assert result.error.type == "sandbox_error"
    assert result.error.message.startswith(f"{manifest}: ")
    assert "does not match its sha256 pin" in result.error.message
    assert result.error.details["actual"] == hashlib.sha256(other).hexdigest()
