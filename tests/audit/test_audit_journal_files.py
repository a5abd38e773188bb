"""What lies in a journal's place beside the log (``<log>.rtj-<16 hex>``) before it opens.

Every writer opening the log (each broker, ``runtime audit verify``) recovers the journals
of dead owners, and a read-only reader counts their lines. A journal name was opened with a
plain ``O_RDONLY`` and read to its end: a FIFO there (anyone may make one in a shared 1777
directory) hung every broker and verify for ever, a directory was a traceback, a symlink to
/dev/zero read until MemoryError, and another user's file was read as records. Now a journal
must be a regular file of this user's (or of the log's owner) that group and others may not
write, checked on the descriptor opened with ``O_NOFOLLOW | O_NONBLOCK``, and read up to the
size fstat gave; anything else is refused naming the file (AuditFileRefused: ``exec`` exits
64, ``verify`` 70), the log untouched. Names that are not a journal's are left alone.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.audit._journal import Journal
from runtime.errors import AuditError, AuditFileRefused, ConfigError
from tests._cli_run import run_runtime

NAME = ".rtj-0000000000000000"


def _log(log_path: Path) -> Path:
    """A log with one record; the path of a journal name beside it."""
    with AuditLog(log_path) as log:
        log.record_request(
            call_id="c0", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
    return log_path.with_name(log_path.name + NAME)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_runtime(*args, cwd=cwd, timeout=30)


def _other_uid() -> int:
    try:
        return pwd.getpwnam("rtsbx").pw_uid
    except KeyError:
        return 65534


def _fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def _directory(path: Path) -> None:
    path.mkdir()


def _symlink_to_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _group_writable(path: Path) -> None:
    path.write_bytes(b"")
    path.chmod(0o620)


PLANTED: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (_fifo, "is not a regular file (a FIFO)"),
    "directory": (_directory, "is not a regular file (a directory)"),
    "symlink": (_symlink_to_zero, "is a symlink"),
    "group-writable": (_group_writable, "is writable by group or others"),
}


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "group-writable"])
def test_exec_and_verify_refuse_a_planted_journal_without_waiting(
    tmp_path: Path, kind: str, canonical_impl: str
) -> None:
    if canonical_impl != "c":
        pytest.skip("the command line runs with the accelerator it finds; once is enough")
    log_path = tmp_path / "shared" / "audit.db"
    log_path.parent.mkdir()
    journal = _log(log_path)
    make, why = PLANTED[kind]
    make(journal)
    call = tmp_path / "call.json"
    call.write_text('{"tool": "json_parse", "arguments": {"text": "[1]"}}')
    (tmp_path / "ws").mkdir()
    exec_ = _run("exec", str(call), "--workspace", "ws", "--audit", str(log_path), cwd=tmp_path)
    verify = _run("audit", "verify", "--audit", str(log_path), cwd=tmp_path)
    for proc, code in ((exec_, 64), (verify, 70)):
        assert proc.returncode == code, (proc.stdout, proc.stderr)
        assert f"audit journal {journal} {why}" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert os.path.lexists(journal)  # left for the user to look at
    if journal.is_dir() and not journal.is_symlink():
        journal.rmdir()
    else:
        journal.unlink()
    with AuditLog(log_path, read_only=True) as reader:  # nothing was written meanwhile
        assert reader.verify().count == 1


@pytest.mark.parametrize("kind", ["directory", "symlink", "group-writable"])
def test_opening_the_log_refuses_a_planted_journal(log_path: Path, kind: str) -> None:
    journal = _log(log_path)
    make, why = PLANTED[kind]
    make(journal)
    for read_only in (False, True):
        with pytest.raises(AuditFileRefused, match=re.escape(why)) as info:
            log = AuditLog(log_path, read_only=read_only)
            log.verify()  # the read-only reader counts dead journals' lines here
        assert info.value.details["path"] == str(journal)
        # Both: the log is not opened (AuditError), and it is the user's to remove.
        assert isinstance(info.value, AuditError) and isinstance(info.value, ConfigError)


def test_a_symlink_to_another_logs_journal_is_not_read(tmp_path: Path) -> None:
    """The link's target is another log's journal with a record: followed, the record was
    recovered into this log (a record of the other log's, in this chain)."""
    other = tmp_path / "other" / "audit.db"
    other.parent.mkdir()
    AuditLog(other).close()
    theirs = Journal(other)
    theirs.append(
        b'["request","x","t","t",null,null,null,null,null,null,null,null,null,null,null,null]\n'
    )
    theirs.close()
    log_path = tmp_path / "mine" / "audit.db"
    log_path.parent.mkdir()
    _log(log_path).symlink_to(theirs.path)
    with pytest.raises(AuditFileRefused, match="is a symlink"):
        AuditLog(log_path)
    assert theirs.path.stat().st_size > 0
    with AuditLog(log_path, read_only=True) as reader:
        assert reader.interrupted() == ["c0"]


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_another_users_journal_is_refused(log_path: Path) -> None:
    journal = _log(log_path)
    journal.write_bytes(b"")
    os.chown(journal, _other_uid(), -1)
    with pytest.raises(AuditFileRefused, match=f"owned by uid {_other_uid()}"):
        AuditLog(log_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's file needs root")
def test_the_log_owners_journal_is_read_by_another_reader(log_path: Path) -> None:
    """A journal of the log's owner is theirs to keep (the reader here is root, the log
    and its dead broker's journal another user's): recovered, not refused."""
    uid = _other_uid()
    with AuditLog(log_path):
        pass
    journal = Journal(log_path)
    journal.append(
        b'["request","dead","t","t",null,null,null,null,null,null,null,null,null,null,null,null]\n'
    )
    journal.close()
    for path in (log_path, journal.path):
        os.chown(path, uid, -1)
    with AuditLog(log_path) as log:
        assert log.interrupted() == ["dead"]


def test_names_that_are_not_a_journals_are_left_alone(log_path: Path) -> None:
    """Only ``.rtj-`` and 16 lower-case hex digits is a journal's name: odd names (a FIFO
    among them) are not opened, and stay."""
    _log(log_path)
    odd = [
        log_path.with_name(log_path.name + suffix)
        for suffix in (".rtj-", ".rtj-x", ".rtj-00000000000000000", ".rtj-000000000000000G")
    ]
    for path in odd:
        os.mkfifo(path)
    with AuditLog(log_path) as log:
        assert log.verify().count == 1
    assert all(path.exists() for path in odd)


def test_a_journal_is_read_up_to_its_size(log_path: Path) -> None:
    """The dead broker's journal is recovered as before (its size bounds the read)."""
    with AuditLog(log_path):
        pass
    journal = Journal(log_path)
    journal.append(
        b'["request","dead","t","t",null,null,null,null,null,null,null,null,null,null,null,null]\n'
    )
    journal.close()
    with AuditLog(log_path) as log:
        assert log.interrupted() == ["dead"]
        assert log.verify().ok
    assert not journal.path.exists()
