"""``AuditLog(path, read_only=True)``: the reads of a log its reader cannot write (an auditor
with read access, a copy on read-only media), writing nothing to the file or beside it.

Before, every AuditLog opened the file for writing, so ``runtime audit verify|tail|export``
run by such a reader failed with "attempt to write a readonly database".
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from audit_helpers import attacker, crash_with_deferred, write_calls

from runtime.audit import AuditLog
from runtime.errors import AuditError
from tests._forked import in_a_forked_child


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_reads_and_writes_nothing(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        ids = write_calls(log, 3)
    before = _files(log_path.parent)
    with AuditLog(log_path, read_only=True) as ro:
        assert ro.verify().ok and ro.verify().count == 6
        assert [r.call_id for r in ro.tail(2)] == [ids[-1], ids[-1]]
        assert ro.interrupted() == []
        out = io.StringIO()
        assert ro.export_jsonl(out) == 6
        assert json.loads(out.getvalue().splitlines()[0])["gen_ai.tool.call.id"] == ids[0]
        with pytest.raises(AuditError, match="read-only"):
            ro.record_request(
                call_id="x", tool="t", arguments={}, decision=None, backend=None, sandbox=None
            )
    after = _files(log_path.parent)
    assert after["audit.db"] == before["audit.db"]
    # SQLite's own WAL files may appear for a WAL reader (when the directory allows); no
    # journal of ours, nothing else.
    assert set(after) - set(before) <= {"audit.db-wal", "audit.db-shm"}


def test_a_read_only_reader_still_finds_tampering(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        write_calls(log, 3)
    with attacker(log_path) as db:
        db.execute("UPDATE audit_records SET tool = 'evil' WHERE seq = 3")
    with AuditLog(log_path, read_only=True) as ro:
        report = ro.verify()
    assert not report.ok and report.first_bad == 3


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files anyway")
def test_a_file_and_directory_without_write_access(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        write_calls(log, 2)
    log_path.chmod(0o444)
    log_path.parent.chmod(0o555)
    try:
        with pytest.raises(AuditError):
            AuditLog(log_path)
        with AuditLog(log_path, read_only=True) as ro:
            assert ro.verify().ok and ro.verify().count == 4
    finally:
        log_path.parent.chmod(0o755)


def _read_as_a_reader_without_write_access(copy: Path) -> str:
    """verify() and head() of ``copy`` by a reader that cannot write its directory (as root:
    a forked child that became nobody), and the private copies left in the temp directory."""
    copy.parent.chmod(0o555)
    # The reader's own temporary directory: another test's reader may be running meanwhile.
    scratch = Path(tempfile.mkdtemp(prefix="audit-reader-tmp-"))
    scratch.chmod(0o777)

    def body() -> str:
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)
        tempfile.tempdir = str(scratch)
        with AuditLog(copy, read_only=True) as ro:
            report = ro.verify()
            result = f"{report.ok} {report.count} {ro.head()[0]}"
        return f"{result} {os.listdir(scratch)}"

    try:
        return in_a_forked_child(body)
    finally:
        copy.parent.chmod(0o755)
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture
def evidence() -> Iterator[Path]:
    """An empty directory any user can reach (pytest's tmp_path is its owner's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="audit-evidence-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


def test_records_still_in_the_wal_are_read_without_its_index(
    log_path: Path, evidence: Path
) -> None:
    """A copy of a live log's file and WAL without its -shm (or a killed writer's, the -shm
    removed): a reader who cannot create the index reads the records in the WAL too. Before,
    it read the file alone (immutable=1): a stale prefix of the chain, or 'no such table'."""
    with AuditLog(log_path) as log:
        write_calls(log, 3)
        assert log.verify().count == 6  # inserted, in the WAL (the owner checkpoints later)
        wal = log_path.with_name("audit.db-wal")
        assert wal.stat().st_size > 0
        shutil.copyfile(log_path, evidence / "audit.db")
        shutil.copyfile(wal, evidence / "audit.db-wal")
        head = log.head()
    for p in evidence.iterdir():
        p.chmod(0o444)
    before = _files(evidence)
    assert _read_as_a_reader_without_write_access(evidence / "audit.db") == f"True 6 {head[0]} []"
    assert _files(evidence) == before


def test_records_in_a_dead_brokers_journal_are_counted_as_pending(log_path: Path) -> None:
    """A read-only reader cannot insert a killed broker's journaled records; its verify()
    said 'ok' over the chain without them. It now counts them as pending (not verified)."""
    crash_with_deferred(log_path, 3)
    with AuditLog(log_path, read_only=True) as ro:
        report = ro.verify()
    assert (report.ok, report.count, report.pending) == (True, 0, 3)
    assert "3 record(s) in the journal of a broker" in report.reason
    with AuditLog(log_path) as writer:  # inserts them
        assert writer.verify().pending == 0
    with AuditLog(log_path, read_only=True) as ro:
        report = ro.verify()
    assert (report.ok, report.count, report.pending) == (True, 3, 0)
