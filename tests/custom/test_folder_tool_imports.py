"""A folder tool's module imports its folder's other modules: relatively (the folder is a
package of a private name per folder) and by their plain names (the folder is last on the
call's ``sys.path``), without shadowing the standard library or ``runtime``. A module its
sandbox's user may not read is refused before the call, naming the file; ``runtime doctor
--tools-dir`` names it too."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.sandbox import probe_host
from runtime.backends.sandbox._binds import unreadable_code
from runtime.broker import Broker
from runtime.models import ToolResult
from runtime.policy import Policy
from tests._pythonpath import python_path

_MISSING = probe_host().missing_required()
ROOT = Path(__file__).resolve().parents[2]
POLICY = 'default = "deny"\n[categories]\ncustom = "allow"\n'
sandboxed = pytest.mark.skipif(bool(_MISSING), reason=f"sandbox mechanisms missing: {_MISSING}")
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def base() -> Iterator[Path]:
    """Not under pytest's tmp_path (mode 0700 parents would stop the sandbox uid first)."""
    path = Path(tempfile.mkdtemp(prefix="rt-folder-imports-", dir="/tmp"))
    os.chmod(path, 0o755)
    (path / "ws").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def tool(folder: Path, name: str, entry: str, source: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if source is not None:
        module = folder.joinpath(*entry.partition(":")[0].split(".")).with_suffix(".py")
        module.parent.mkdir(parents=True, exist_ok=True)
        module.write_text(source)
    manifest = {
        "name": name,
        "description": f"Test tool {name}.",
        "category": "custom",
        "parameters": {"type": "object", "properties": {}},
        "backend": "subprocess",
        "entry": entry,
        "sandbox": {"workspace": "none"},
    }
    (folder / f"{name}.json").write_text(json.dumps(manifest))


def calls(base: Path, folders: list[Path], *names: str) -> list[ToolResult]:
    async def main() -> list[ToolResult]:
        async with Broker(
            workspace=base / "ws",
            policy=Policy.from_toml(POLICY),
            audit=base / "audit.db",
            tool_folders=folders,
        ) as broker:
            return [await broker.call({"tool": n, "arguments": {}}) for n in names]

    return anyio.run(main)


def _ok(result: ToolResult) -> Any:
    assert result.success, result.error
    return result.result


@sandboxed
def test_siblings_import_relatively_and_by_name(base: Path) -> None:
    folder = base / "tools"
    folder.mkdir()
    (folder / "helpers.py").write_text("def f():\n    return 'helped'\n")
    (folder / "util.py").write_text("def g():\n    return 'util'\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.py").write_text(
        "from ..helpers import f\n\ndef run(args, ctx):\n    return {'v': 'deep ' + f()}\n"
    )
    relative = "from . import helpers\nfrom .util import g\n\n"
    relative += "def run(args, ctx):\n    return {'v': helpers.f() + ' ' + g()}\n"
    tool(folder, "rel", "rel:run", relative)
    absolute = "import helpers\nimport util\n\n"
    absolute += "def run(args, ctx):\n    return {'v': helpers.f() + ' ' + util.g()}\n"
    tool(folder, "absolute", "absolute:run", absolute)
    tool(folder, "deep", "sub.deep:run")
    rel, absolute_, deep = calls(base, [folder], "rel", "absolute", "deep")
    assert _ok(rel) == {"v": "helped util"}
    assert _ok(absolute_) == {"v": "helped util"}
    assert _ok(deep) == {"v": "deep helped"}


@sandboxed
def test_a_folder_module_shadows_neither_stdlib_nor_runtime(base: Path) -> None:
    folder = base / "tools"
    folder.mkdir()
    for name in ("json", "runtime", "base64"):  # base64: not imported before the tool's
        (folder / f"{name}.py").write_text("raise ImportError('the folder shadowed me')\n")
    source = "import base64\nimport json\nimport runtime\n\n"
    source += "def run(args, ctx):\n"
    source += "    return {'mods': [m.__name__ for m in (base64, json, runtime)],\n"
    source += "            'files': [m.__file__ for m in (base64, json, runtime)]}\n"
    tool(folder, "plain", "plain:run", source)
    out = _ok(calls(base, [folder], "plain")[0])
    assert out["mods"] == ["base64", "json", "runtime"]
    assert not [f for f in out["files"] if f.startswith(str(folder))]


@sandboxed
def test_two_folders_keep_their_own_siblings(base: Path) -> None:
    folders = [base / "one", base / "two"]
    for i, folder in enumerate(folders):
        folder.mkdir()
        (folder / "helpers.py").write_text(f"WHO = {i}\n")
        tool(folder, f"t{i}", "impl:run", "from . import helpers\n\ndef run(args, ctx):\n"
             "    return {'who': helpers.WHO}\n")  # fmt: skip
    first, second = calls(base, folders, "t0", "t1")
    assert _ok(first) == {"who": 0} and _ok(second) == {"who": 1}


@sandboxed
@pytest.mark.parametrize("mode", [0o000, 0o600])
def test_a_module_its_sandbox_may_not_read_is_refused_naming_it(base: Path, mode: int) -> None:
    folder = base / "tools"
    tool(folder, "hidden", "hidden:run", "def run(args, ctx):\n    return {'v': 1}\n")
    tool(folder, "visible", "visible:run", "def run(args, ctx):\n    return {'v': 2}\n")
    module = folder / "hidden.py"
    os.chmod(module, mode)
    hidden, visible = calls(base, [folder], "hidden", "visible")
    assert _ok(visible) == {"v": 2}  # the folder's other tools are not refused
    if mode == 0o600 and os.geteuid() != 0:
        # Its own user's file: the sandbox is that user (the broker maps its own uid).
        assert _ok(hidden) == {"v": 1}
        return
    assert hidden.error is not None and str(hidden.error.type) == "sandbox_error", hidden
    assert str(module) in hidden.error.message and "may not read" in hidden.error.message
    assert hidden.error.details["unreadable"] == [str(module)]


def test_unreadable_code_reads_the_mode_bits_for_the_sandbox_user(base: Path) -> None:
    folder = base / "tools"
    (folder / "pkg").mkdir(parents=True)
    module = folder / "pkg" / "mod.py"
    module.write_text("")
    uid = os.geteuid() + 12345  # someone else: "other" bits
    gid = os.getegid() + 12345
    os.chmod(module, 0o640)
    assert unreadable_code(str(folder), "pkg.mod", uid, gid) == [str(module)]
    os.chmod(module, 0o644)
    os.chmod(folder / "pkg", 0o750)
    assert unreadable_code(str(folder), "pkg.mod", uid, gid) == [str(folder / "pkg")]
    os.chmod(folder / "pkg", 0o755)
    assert unreadable_code(str(folder), "pkg.mod", uid, gid) == []
    assert unreadable_code(str(folder), "missing", uid, gid) == []  # the import says so
    st = module.stat()
    os.chmod(module, 0o600)
    assert unreadable_code(str(folder), "pkg.mod", st.st_uid, gid) == []  # its owner
    assert stat.S_IMODE(module.stat().st_mode) == 0o600


def test_doctor_names_the_unreadable_module(base: Path) -> None:
    folder = base / "tools"
    tool(folder, "hidden", "hidden:run", "def run(args, ctx):\n    return {}\n")
    tool(folder, "visible", "visible:run", "def run(args, ctx):\n    return {}\n")
    os.chmod(folder / "hidden.py", 0o000)
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "doctor", "--tools-dir", str(folder)],
        capture_output=True, text=True, timeout=120, cwd=base,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["tool_folders"]
    assert report["unreadable"] == {"hidden": [str(folder / "hidden.py")]}
    assert "python_entry" in report  # the description stays
