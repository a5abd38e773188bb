"""A writer SIGKILLed halfway through write_file leaves the old file and no temp file.

Found by the broker-crash tests: the temp file of an atomic write had a name from the start,
so a sandbox torn down mid-write (its broker killed) left ``.NAME.PID.HEX.tmp`` behind.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.toolkit_fs import Workspace


def _killed_midway() -> Iterator[bytes]:
    yield b"N" * 65536
    os.kill(os.getpid(), signal.SIGKILL)
    yield b"never"


def test_sigkill_mid_write_leaves_old_content_and_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("old\n")
    pid = os.fork()
    if pid == 0:
        try:
            with Workspace(tmp_path) as ws:
                ws.atomic_write(("keep.txt",), _killed_midway())
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert (tmp_path / "keep.txt").read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_atomic_write_still_replaces_and_keeps_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "keep.txt"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    with Workspace(tmp_path) as ws:
        assert ws.atomic_write(("keep.txt",), iter([b"new\n"])) == 4
        assert ws.atomic_write(("new.txt",), iter([b"x"])) == 1
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt", "new.txt"]


def test_sigterm_between_link_and_rename_waits_for_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call ends with SIGTERM when its zygote dies (a pid-1 tool's parent-death signal,
    child.py). One landing after the temporary file got its name left that name behind
    (test_broker_crash found it); now the signal waits for the rename, then ends the
    writer."""
    (tmp_path / "keep.txt").write_text("old\n")
    real_rename = os.rename

    def rename_after_a_term(*args: Any, **kwargs: Any) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        real_rename(*args, **kwargs)

    pid = os.fork()
    if pid == 0:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            monkeypatch.setattr(os, "rename", rename_after_a_term)
            with Workspace(tmp_path) as ws:
                ws.atomic_write(("keep.txt",), iter([b"new\n"]))
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert (tmp_path / "keep.txt").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
