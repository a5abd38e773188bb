"""``--audit`` naming a FIFO, a device or a directory: SQLite opened it and failed with
"disk I/O error", and ``runtime exec`` exited 70 (an I/O failure) where the name was the
user's to change; ``audit verify`` already refused it (64). Now the log refuses to open
anything but a regular file (or an absent name it creates), before SQLite sees it:
AuditFileRefused, exit 64, the name and its kind in the message, nothing run or written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.errors import AuditFileRefused
from tests._cli_run import run_runtime

CALL = '{"tool": "write_file", "arguments": {"path": "a.txt", "content": "x"}}'


def _fifo(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "audit.db"
    os.mkfifo(path, 0o600)
    return path, "a FIFO"


def _directory(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "audit.db"
    path.mkdir()
    return path, "a directory"


def _device(tmp_path: Path) -> tuple[Path, str]:
    return Path("/dev/null"), "a device"


def _link_to_fifo(tmp_path: Path) -> tuple[Path, str]:
    fifo, kind = _fifo(tmp_path)
    link = tmp_path / "link.db"
    link.symlink_to(fifo)
    return link, kind


MAKERS = {"fifo": _fifo, "directory": _directory, "device": _device, "link": _link_to_fifo}


@pytest.mark.parametrize("kind", sorted(MAKERS))
@pytest.mark.parametrize("read_only", [False, True])
def test_the_log_refuses_a_name_that_is_not_a_file(
    tmp_path: Path, kind: str, read_only: bool
) -> None:
    path, what = MAKERS[kind](tmp_path)
    with pytest.raises(AuditFileRefused, match=f"is not a regular file \\({what}\\)"):
        AuditLog(path, read_only=read_only)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_exec_exits_64_naming_it(tmp_path: Path, kind: str) -> None:
    path, what = MAKERS[kind](tmp_path)
    call = tmp_path / "call.json"
    call.write_text(CALL)
    ws = tmp_path / "ws"
    proc = run_runtime(
        "exec", str(call), "--audit", str(path), "--workspace", str(ws), cwd=tmp_path
    )
    assert proc.returncode == 64, proc.stderr
    # (the CLI names the file a link leads to)
    assert f"{path.resolve()} is not a regular file ({what})" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (ws / "a.txt").exists()  # nothing ran


def test_a_symlink_to_a_regular_log_still_opens(tmp_path: Path) -> None:
    # A name the user gave: a link to a log elsewhere is theirs to make (the default path
    # inside a workspace refuses links on its own, runtime._fsio.state_file_problem).
    real = tmp_path / "real.db"
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with AuditLog(link) as log:
        log.record_request(
            call_id="c0", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
    with AuditLog(real, read_only=True) as log:
        assert log.verify().ok and len(log.tail(5)) == 1
