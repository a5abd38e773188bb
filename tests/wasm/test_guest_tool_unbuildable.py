"""A folder manifest naming a built-in guest, where the guests cannot be built (a cache that
cannot be created; a missing compiler goes the same way: build_guests' SandboxError).

The check at load of such a manifest (export, pin) built the guest, and its SandboxError
escaped: ``runtime tools``, ``doctor`` and ``policy check`` ended in a traceback (exit 1) and
``runtime exec`` of an unrelated call exited 70, for a folder that loaded before. Now the
checks needing the guest's binary are left to the tool's calls, which report sandbox_error
as every built-in wasm tool's calls there do; the guest's name is still checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.catalogue.loader import load_manifests
from runtime.errors import ManifestError
from tests._cli_run import run_runtime


def _folder(tmp_path: Path, module: str = "json", export: str = "json_parse") -> Path:
    folder = tmp_path / "tools"
    folder.mkdir()
    manifest = {
        "name": "myparse",
        "description": "parses JSON with the built-in guest",
        "category": "custom",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "backend": "wasm",
        "wasm": {"module": module, "export": export},
    }
    (folder / "myparse.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache home that is a plain file: no guest can be built below it."""
    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(afile))


@pytest.mark.usefixtures("no_cache")
def test_the_manifest_loads_when_the_guests_cannot_be_built(tmp_path: Path) -> None:
    [spec] = load_manifests([_folder(tmp_path)])
    assert spec.name == "myparse"


@pytest.mark.usefixtures("no_cache")
def test_the_guest_name_is_still_checked(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="no built-in wasm guest named 'jsn'"):
        load_manifests([_folder(tmp_path, module="jsn")])


@pytest.mark.usefixtures("no_cache")
def test_the_cli_commands_given_the_folder_still_work(tmp_path: Path) -> None:
    folder = str(_folder(tmp_path))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hi\n")
    (tmp_path / "pol.toml").write_text('[categories]\ncustom = "allow"\nfile = "allow"\n')
    (tmp_path / "rf.json").write_text('{"tool": "read_file", "arguments": {"path": "a.txt"}}')
    (tmp_path / "mp.json").write_text('{"tool": "myparse", "arguments": {"text": "[1]"}}')

    tools = run_runtime("tools", "--tools-dir", folder, cwd=tmp_path, timeout=120)
    assert tools.returncode == 0, tools.stderr
    assert "myparse" in {t["name"] for t in json.loads(tools.stdout)}

    doctor = run_runtime("doctor", "--tools-dir", folder, cwd=tmp_path, timeout=120)
    assert doctor.returncode == 0, doctor.stderr

    check = run_runtime(
        "policy", "check", "pol.toml", "mp.json", "--tools-dir", folder, cwd=tmp_path, timeout=120
    )
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["action"] == "allow"

    common = ("--tools-dir", folder, "--workspace", "ws", "--policy", "pol.toml")
    read = run_runtime("exec", "rf.json", *common, cwd=tmp_path, timeout=120)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["result"]["content"] == "hi\n"

    call = run_runtime("exec", "mp.json", *common, cwd=tmp_path, timeout=120)
    result = json.loads(call.stdout)
    assert result["success"] is False
    assert result["error"]["type"] == "sandbox_error"
    assert "XDG_CACHE_HOME" in result["error"]["message"]
