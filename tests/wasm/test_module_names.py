"""What ``wasm.module`` names, and that a manifest's module is checked at load either way.

Before, a name that neither ended in lowercase ``.wasm`` nor held a ``/`` was taken for a
built-in guest's and skipped every check at load: ``echo.WASM`` or ``echo`` (a file there,
pinned) loaded and then failed every call ("no built-in wasm guest named"), and a manifest
naming the built-in ``json`` guest with an export it lacks, or a wrong pin, loaded and then
failed every call. Now a built-in guest is named exactly; anything else is a file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import wasmtime

from runtime.backends.wasm import WasmBackend
from runtime.catalogue._wasm_ref import builtin_guest_names
from runtime.catalogue.loader import load_manifests
from runtime.errors import ManifestError
from runtime.models import ToolSpec
from tests._cli_run import run_runtime

from .conftest import ECHO_WAT, request


def _folder(tmp_path: Path, module: str, *, file: str | None = None, **wasm: Any) -> Path:
    """A tool folder whose one manifest names ``module``; ``file``: write the echo module
    there, and pin it unless ``sha256`` is given."""
    folder = tmp_path / "tools"
    folder.mkdir()
    if file is not None:
        data = wasmtime.wat2wasm(ECHO_WAT)
        (folder / file).write_bytes(data)
        wasm.setdefault("sha256", hashlib.sha256(data).hexdigest())
    manifest = {
        "name": "named",
        "description": "t",
        "category": "custom",
        "parameters": {"type": "object"},
        "backend": "wasm",
        "wasm": {"module": module, "export": "run", **wasm},
    }
    (folder / "named.json").write_text(json.dumps(manifest))
    return folder


def _load_one(folder: Path) -> ToolSpec:
    [spec] = load_manifests([folder])
    return spec


def test_the_builtin_guests_are_the_source_folders() -> None:
    assert builtin_guest_names() == {"base64", "csv", "hash", "json", "regex"}


@pytest.mark.parametrize("module", ["echo.WASM", "echo", "Echo.Wasm"])
def test_a_file_of_any_name_is_a_module_file(
    tmp_path: Path, backend: WasmBackend, module: str
) -> None:
    spec = _load_one(_folder(tmp_path, module, file=module))
    assert backend.run_sync(request(spec, {})).result == {"ok": True}


@pytest.mark.parametrize("module", ["echo.WASM", "echo"])
def test_a_file_of_any_name_is_checked_at_load(tmp_path: Path, module: str) -> None:
    with pytest.raises(ManifestError, match="sha256 pin") as exc:
        load_manifests([_folder(tmp_path, module, file=module, sha256="0" * 64)])
    assert exc.value.details["field"] == "wasm.sha256"


def test_a_bare_name_of_no_guest_and_no_file_is_refused_naming_the_guests(
    tmp_path: Path,
) -> None:
    with pytest.raises(ManifestError, match="no built-in wasm guest named 'jsn'") as exc:
        load_manifests([_folder(tmp_path, "jsn", sha256="0" * 64)])
    assert "json" in str(exc.value) and "no module file" in str(exc.value)
    assert exc.value.details["field"] == "wasm.module"


def test_a_builtin_guest_without_the_export_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="exports no function nope") as exc:
        load_manifests([_folder(tmp_path, "json", export="nope")])
    assert exc.value.details["file"] == str(tmp_path / "tools" / "named.json")


def test_a_builtin_guest_with_a_wrong_pin_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "json", export="json_parse", sha256="0" * 64)
    with pytest.raises(ManifestError, match="does not match its sha256 pin") as exc:
        load_manifests([folder])
    assert exc.value.details["field"] == "wasm.sha256"


def test_a_builtin_guest_with_its_export_and_pin_loads_and_runs(
    tmp_path: Path, backend: WasmBackend
) -> None:
    digest = hashlib.sha256(backend.guests()["json"].read_bytes()).hexdigest()
    folder = _folder(tmp_path, "json", export="json_parse", sha256=digest.upper())
    spec = _load_one(folder)
    assert backend.run_sync(request(spec, {"text": "[1]"})).result == {"data": [1]}


def test_runtime_tools_refuses_a_builtin_guest_without_the_export(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "json", export="nope")
    proc = run_runtime("tools", "--tools-dir", str(folder), cwd=tmp_path, timeout=120)
    assert proc.returncode == 64, proc.stderr
    assert "exports no function nope" in proc.stderr
