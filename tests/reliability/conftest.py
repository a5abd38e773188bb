"""Fixtures of the reliability suite: a world-readable workspace, the test-only fault tools,
and snapshots of what a broker may leak (child processes, fds, mounts, temp files, cgroups).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.backends.sandbox import probe_host

_CAPS = probe_host()
if _CAPS.missing_required():
    pytest.skip(f"sandbox mechanisms missing: {_CAPS.missing_required()}", allow_module_level=True)

HERE = Path(__file__).resolve().parent
TOOLS = HERE / "tools"
POLICY = HERE / "policy.toml"


@pytest.fixture
def base() -> Iterator[Path]:
    """A scratch directory under /tmp with mode 0755 parents (pytest's tmp_path is 0700,
    which would stop the unprivileged sandbox uid before anything under test does)."""
    path = Path(tempfile.mkdtemp(prefix="rt-reliability-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def workspace(base: Path) -> Path:
    ws = base / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("x" * 4096)
    (ws / "keep.txt").write_text("old\n")
    return ws


@pytest.fixture
def private_tmp(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The broker process's temporary directory, private to the test so that it can be
    checked empty afterwards (/tmp itself is shared with other processes)."""
    tmp = base / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp
