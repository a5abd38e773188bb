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
        "wasm": {"module": "echo.wasm", "sha256": pin or hashlib.sha256(module).hexdigest()},
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
    assert exc.value.details["field"] == "wasm.module"


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


def test_a_directory_as_module_is_a_load_error(tmp_path: Path) -> None:
    # os.fdopen of a directory raised IsADirectoryError before the regular-file check: a
    # traceback and exit 1 from `runtime tools`, not the typed refusal a FIFO gets.
    folder = _tool_dir(tmp_path, wasm=None)
    (folder / "echo.wasm").mkdir()
    with pytest.raises(ManifestError, match="is not a regular file") as exc:
        load_manifests([folder])
    assert exc.value.details["file"] == str(folder / "echo.json")
