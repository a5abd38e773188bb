"""The audit database and its -wal/-shm are the owner's alone, whatever the umask."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.audit import AuditLog

_FILES = ("audit.db", "audit.db-wal", "audit.db-shm")


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(directory: Path) -> dict[str, int]:
    return {n: (directory / n).stat().st_mode & 0o777 for n in _FILES if (directory / n).exists()}


def _write(path: Path, call_id: str) -> None:
    with AuditLog(path) as log:
        log.record_request(
            call_id=call_id, tool="t", arguments={"a": 1}, decision=None, backend=None, sandbox=None
        )
        # Open: the -wal and -shm exist now.
        modes = _modes(path.parent)
        assert set(modes) == set(_FILES), modes
        assert set(modes.values()) == {0o600}, modes


@pytest.mark.usefixtures("umask_022")
def test_new_log_files_are_0600(tmp_path: Path) -> None:
    _write(tmp_path / "audit.db", "c1")


@pytest.mark.usefixtures("umask_022")
def test_loose_files_of_ours_are_tightened(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    _write(path, "c1")
    with AuditLog(path) as log:  # keeps -wal/-shm in place while they are loosened
        for name in _FILES:
            (tmp_path / name).chmod(0o644)
        with AuditLog(path) as again:
            assert set(_modes(tmp_path).values()) == {0o600}
            assert again.verify().ok
        assert log.verify().ok


def test_symlinked_name_still_opens_the_real_file(tmp_path: Path) -> None:
    """The log's path is resolved first (its journals live beside the real file): a symlink
    to a log is followed as before, and the real file is the one made private."""
    real = tmp_path / "real" / "audit.db"
    real.parent.mkdir()
    _write(real, "c1")
    link = tmp_path / "link.db"
    link.symlink_to(real)
    with AuditLog(link) as log:
        assert log.path == real and log.verify().ok


def _posix_locks(path: Path) -> list[str]:
    """This process's POSIX lock lines in /proc/locks on the file at ``path``."""
    ino = os.stat(path).st_ino
    out = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "POSIX" in fields and str(os.getpid()) in fields:
            at = fields.index(str(os.getpid()))
            if int(fields[at + 1].rsplit(":", 1)[1]) == ino:
                out.append(" ".join(fields[at - 1 : at]) + " " + " ".join(fields[at + 2 :]))
    return out


def test_checking_modes_keeps_sqlites_locks(log_path: Path) -> None:
    """SQLite's locks are POSIX record locks, which the kernel drops when the process closes
    any descriptor of the file: the first version opened and closed the -shm (and database)
    to check their modes, which dropped the locks of this process's open connections (a
    concurrent writer process then died of SIGBUS). The check must not open them."""
    if not Path("/proc/locks").exists():
        pytest.skip("no /proc/locks")
    from runtime._fsio import private_file

    with AuditLog(log_path) as log:
        log.record_request(
            call_id="c", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
        shm = log_path.with_name(log_path.name + "-shm")
        held = _posix_locks(shm)
        assert held, "SQLite holds a lock on the -shm of an open WAL database"
        for name in _FILES:
            (log_path.parent / name).chmod(0o644)
            private_file(log_path.parent / name)
        assert _posix_locks(shm) == held
        with AuditLog(log_path) as again:  # a second opener in this process checks them too
            assert again.verify().ok
        assert _posix_locks(shm) == held
        assert set(_modes(log_path.parent).values()) == {0o600}
