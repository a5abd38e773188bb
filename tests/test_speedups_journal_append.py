"""The accelerator's ``journal_append`` (AuditLog._journal_write's inline journal write):
``journal_write``'s encoding, link check and write, answered as ``(end, parts)`` — checked
against the Python code (``journal_record`` + ``Journal.append``) on generated records: the
same bytes in the file, the same parts, the same errors, nothing written outside its shapes;
and the audit log's errors through it are the journal's."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.audit import AuditLog, _canonical
from runtime.audit._record import journal_record
from runtime.errors import AuditError
from tests.test_speedups_record import TEXT, odd_rows, rows

_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_ROW = (
    "request",
    "c1",
    "2026-11-23T00:00:00.000000Z",
    "json_parse",
    "ab" * 32,
    '{"text":"x"}',
    '{"action":"allow"}',
    "wasm",
    "{}",
    *[None] * 6,
    "s1",
)


def _open(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


@pytest.fixture
def fresh(tmp_path: Path) -> Any:
    count = iter(range(1 << 30))
    return lambda: tmp_path / f"j{next(count)}"


@_SETTINGS
@given(fields=rows(), session=st.none() | TEXT, size=st.integers(0, 2**40))
def test_answer_and_file_equal_the_python_code(
    c_mod: ModuleType, fresh: Any, fields: tuple[Any, ...], session: Any, size: int
) -> None:
    fields = (*fields, session)
    path = fresh()
    fd = _open(path)
    try:
        out = c_mod.journal_append(fd, fields, True, size)
    finally:
        os.close(fd)
    line, parts = journal_record(fields)
    assert out == (size + len(line), parts)
    assert path.read_bytes() == line


@_SETTINGS
@given(fields=odd_rows())
def test_outside_the_shapes_nothing_is_written(
    c_mod: ModuleType, fresh: Any, fields: tuple[Any, ...]
) -> None:
    path = fresh()
    fd = _open(path)
    try:
        out = c_mod.journal_append(fd, fields, True, 0)
        twin = c_mod.journal_write(fd, fields, False) if out is None else None
    finally:
        os.close(fd)
    if out is None:
        assert twin is None  # journal_write refuses it too
        assert path.read_bytes() == b""
        return
    line, parts = journal_record(fields)  # what it wrote, the Python code encodes alike
    assert out == (len(line), parts)
    assert path.read_bytes() == line


def test_an_unlinked_file_is_refused_only_when_checked(c_mod: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "gone"
    fd = _open(path)
    try:
        path.unlink()
        assert c_mod.journal_append(fd, _ROW, True, 0) == 1
        assert os.fstat(fd).st_size == 0
        end, _ = c_mod.journal_append(fd, _ROW, False, 7)
        assert end == 7 + os.fstat(fd).st_size
    finally:
        os.close(fd)


def test_a_short_write_is_status_2(c_mod: ModuleType) -> None:
    """A pipe of one page, non-blocking, takes a longer line in part: what a file system
    that fills mid-line does."""
    big = (*_ROW[:5], '{"text":"' + "x" * 6000 + '"}', *_ROW[6:])
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        os.set_blocking(w, False)
        assert c_mod.journal_append(w, big, False, 0) == 2
    finally:
        os.close(r)
        os.close(w)


def test_errors(c_mod: ModuleType, tmp_path: Path) -> None:
    fd = _open(tmp_path / "w")
    try:
        for bad in ((fd, list(_ROW), True, 0), ("3", _ROW, True, 0), (fd, _ROW, True)):
            with pytest.raises(TypeError):
                c_mod.journal_append(*bad)
        with pytest.raises(TypeError):
            c_mod.journal_append(fd, _ROW, True, 1.0)
        with pytest.raises(ValueError, match="negative"):
            c_mod.journal_append(fd, _ROW, True, -1)
        assert c_mod.journal_append(fd, _ROW[:5], True, 0) is None  # not a record's length
    finally:
        os.close(fd)
    assert (tmp_path / "w").read_bytes() == b""
    with pytest.raises(OSError) as info:
        c_mod.journal_append(1 << 20, _ROW, True, 0)
    assert info.value.errno == errno.EBADF


def _request(log: AuditLog, call_id: str) -> None:
    log.record_request(
        call_id=call_id,
        tool="json_parse",
        arguments={"text": "[1]"},
        decision={"action": "allow"},
        backend="wasm",
        sandbox={},
        returning=False,
        defer=True,
    )


def test_the_logs_short_write_cuts_the_journal_back(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AuditLog(tmp_path / "a.db") as log:
        _request(log, "a")  # the first record creates the journal (Python path)
        _request(log, "b")  # journal_append
        journal = log._journal
        assert journal is not None
        size = journal.size
        assert size == journal.path.stat().st_size

        def short(fd: int, fields: tuple[Any, ...], check: bool, at: int) -> Any:
            out = c_mod.journal_append(fd, fields, check, at)
            assert type(out) is tuple
            return 2  # as if the disk filled mid-line: the line is in the file

        monkeypatch.setattr(_canonical, "_journal_append", short)
        with pytest.raises(AuditError, match="short write"):
            _request(log, "c")
        assert journal.size == size == journal.path.stat().st_size  # the torn tail is gone
        monkeypatch.undo()
        _request(log, "d")
        assert [r.call_id for r in log.tail(10)] == ["a", "b", "d"]
        assert log.verify().ok


def test_the_logs_write_failure_is_an_audit_error(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with AuditLog(tmp_path / "a.db") as log:
        _request(log, "a")

        def broken(fd: int, fields: tuple[Any, ...], check: bool, at: int) -> Any:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(_canonical, "_journal_append", broken)
        with pytest.raises(AuditError, match="write failed"):
            _request(log, "b")
        monkeypatch.undo()
        assert [r.call_id for r in log.tail(10)] == ["a"]
