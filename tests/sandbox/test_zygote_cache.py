"""The fork-server loads the C accelerator the broker loaded, from the cache the broker judged
(``broker/_hostpaths.py``), never from one its own environment would name.

The hole this closes: the zygote's environment has no XDG_CACHE_HOME, so its own idea of the
cache was the passwd home's ``~/.cache/runtime``. With XDG_CACHE_HOME set elsewhere (what the
workspace check advises) and the workspace = the home, the broker was accepted, its zygote
built and loaded ``~/.cache/runtime/speedups/…/_rt_speedups*.so`` inside the workspace, and a
call that overwrote that file ran its code in the next broker's zygote, outside every wall.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import _speedups
from tests._pythonpath import ROOT, python_path

pytestmark = pytest.mark.sandbox

# A broker in a fresh interpreter (its accelerator decided by its own environment), one
# sandboxed call, then every file its zygote has mapped.
_DRIVER = """
import json, sys
from runtime.broker import SyncBroker
home, audit, prespawn = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
with SyncBroker(workspace=home, audit=audit, prespawn_sandbox=prespawn) as sync:
    result = sync.call({"tool": "shell_exec", "arguments": {"command": "echo hi"}})
    assert result.success, result.error
    backend = sync.broker._backends["subprocess"]
    with open(f"/proc/{backend.zygote_pid}/maps") as f:
        mapped = sorted({line.split()[-1] for line in f if line.split()[-1].startswith("/")})
    print(json.dumps({"mapped": mapped, "errors": backend.load_errors}))
"""


@pytest.fixture(scope="module")
def xdg(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """XDG_CACHE_HOME for every broker here: built into once (pid1, the accelerator)."""
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture
def home() -> Iterator[Path]:
    """The broker's HOME, and its workspace (reachable by the sandbox's uid, as in
    ``conftest.workspace``)."""
    base = Path(tempfile.mkdtemp(prefix="rt-zygote-cache-", dir="/tmp"))
    os.chmod(base, 0o755)
    (base / "home").mkdir(mode=0o755)
    yield base / "home"
    shutil.rmtree(base, ignore_errors=True)


def _run(home: Path, xdg: Path, *, prespawn: bool, pure: bool) -> dict[str, Any]:
    env = {
        "PYTHONPATH": python_path(ROOT),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(xdg),
        # The workspace is this HOME: a Python reading a user site-packages (the system's,
        # as the unprivileged run uses) would have the broker refuse it for ~/.local, a
        # different check (tests/broker/test_hostpaths.py).
        "PYTHONNOUSERSITE": "1",
        **({_speedups.PURE_ENV: "1"} if pure else {}),
    }
    audit = home.parent / "audit.db"  # outside the workspace, as the check wants
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(home), str(audit), "1" if prespawn else "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def _accelerators(mapped: list[str]) -> list[str]:
    return [path for path in mapped if Path(path).name.startswith("_rt_speedups")]


@pytest.mark.parametrize("prespawn", [False, True], ids=["spawned", "prespawned"])
def test_the_zygote_loads_the_accelerator_from_the_judged_cache(
    home: Path, xdg: Path, prespawn: bool
) -> None:
    report = _run(home, xdg, prespawn=prespawn, pure=False)
    loaded = _accelerators(report["mapped"])
    assert loaded, report  # the broker's accelerator, adopted
    assert all(Path(path).is_relative_to(xdg / "runtime" / "speedups") for path in loaded), loaded
    assert not [path for path in report["mapped"] if Path(path).is_relative_to(home)]
    assert not (home / ".cache").exists()  # nothing built in the workspace
    assert "speedups" not in report["errors"]


def test_a_pure_broker_has_a_pure_zygote(home: Path, xdg: Path) -> None:
    report = _run(home, xdg, prespawn=False, pure=True)
    assert _accelerators(report["mapped"]) == [], report
    assert not (home / ".cache").exists()


@pytest.mark.anyio
async def test_a_file_the_zygote_refuses_is_named_in_the_load_errors(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The zygote checks the broker's file as a build does (a private directory, a file of
    ours alone), and says why it runs pure instead."""
    from runtime.backends.sandbox import SandboxBackend

    shared = tmp_path / "shared" / "digest"
    shared.mkdir(parents=True)
    os.chmod(shared, 0o777)  # anyone could have swapped it: not loaded
    planted = shared / "_rt_speedups.so"
    planted.write_bytes(b"not an extension")
    monkeypatch.setattr(_speedups, "loaded_path", lambda: planted)
    backend = SandboxBackend(mode="best_effort", pool=0)
    try:
        await backend.start()
        assert "not a private directory" in backend.load_errors["speedups"]
        assert backend.zygote_pid is not None
        maps = await anyio.Path(f"/proc/{backend.zygote_pid}/maps").read_text()
        assert str(planted) not in maps
    finally:
        await backend.aclose()
