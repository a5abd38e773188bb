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


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A workspace with a 4 KiB file, and a canary directory *outside* it (a sibling).

    Not under pytest's tmp_path: its parents are mode 0700, which would stop the
    unprivileged sandbox uid before the mechanism under test does.
    """
    tmp_path = Path(tempfile.mkdtemp(prefix="rt-sandbox-test-", dir="/tmp"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello\n")
    (ws / "data.bin").write_bytes(b"a" * 4096)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary.txt").write_text("CANARY\n")
    # World-accessible, so that "mechanism off" attempts are stopped by nothing but the
    # mechanism under test (the sandbox runs as an unprivileged uid).
    os.chmod(outside, 0o777)
    os.chmod(outside / "canary.txt", 0o644)
    os.chmod(tmp_path, 0o755)
    yield ws
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.fixture
def canary(workspace: Path) -> Path:
    return workspace.parent / "outside" / "canary.txt"


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the mask walks run 10 s from now: every directory made by the test is past the
    racy window, so its listing may be kept (without this a fresh tree is never kept)."""
    from runtime.backends.sandbox import masks

    real = masks._now_ns
    monkeypatch.setattr(masks, "_now_ns", lambda: real() + 10_000_000_000)
