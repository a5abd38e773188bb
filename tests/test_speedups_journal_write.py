"""The accelerator's ``journal_write``: ``record``'s encoding written to the journal in one
call, checked against the Python code it replaces (``journal_record`` + ``Journal.append``):
the same bytes in the file, the same body parts, the same errors, and nothing written when the
record is outside its shapes."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from runtime.audit import _canonical
from runtime.audit._journal import Journal
from runtime.audit._record import journal_record
from runtime.errors import AuditError
from tests.test_speedups_record import odd_rows, rows

# Hypothesis reuses the function-scoped tmp_path across examples: each example gets its own
# file below it.
_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_FIELDS = ("request", "c1", "2026-11-23T00:00:00.000000Z", "json_parse", "ab" * 32)
_ROW = (*_FIELDS, '{"text":"x"}', '{"action":"allow"}', "wasm", "{}", *[None] * 6)


def _open(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _python(fields: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", journal_record(fields)
    except Exception as exc:  # the type is what is compared
        return "error", type(exc)


@pytest.fixture
def fresh(tmp_path: Path) -> Any:
    count = iter(range(1 << 30))
    return lambda: tmp_path / f"j{next(count)}"


@_SETTINGS
@given(fields=rows())
def test_written_line_and_parts_equal_the_python_code(
    c_mod: ModuleType, fresh: Any, fields: tuple[Any, ...]
) -> None:
    path = fresh()
    fd = _open(path)
    try:
        out = c_mod.journal_write(fd, fields, True)
    finally:
        os.close(fd)
    line, *parts = journal_record(fields)
    assert out == (0, len(line), len(line), *parts[0])
    assert path.read_bytes() == line


@_SETTINGS
@given(fields=odd_rows())
def test_odd_rows_write_nothing_and_leave_it_to_the_python_code(
    c_mod: ModuleType, fresh: Any, fields: tuple[Any, ...]
) -> None:
    path = fresh()
    fd = _open(path)
    try:
        out = c_mod.journal_write(fd, fields, False)
    finally:
        os.close(fd)
    expected = _python(fields)
    if out is None:
        assert path.read_bytes() == b""
        assert c_mod.record(fields) is None  # the same shapes as record()
    else:
        line, parts = expected[1]
        assert expected[0] == "ok"
        assert out == (0, len(line), len(line), *parts)
        assert path.read_bytes() == line


def test_a_bad_descriptor_raises_what_os_write_raises(c_mod: ModuleType, tmp_path: Path) -> None:
    read_only = os.open(tmp_path / "r", os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        for fd in (read_only, 1 << 20, -1):
            with pytest.raises(OSError) as native:
                c_mod.journal_write(fd, _ROW, False)
            with pytest.raises(OSError) as python:
                os.write(fd, b"x\n")
            assert native.value.errno == python.value.errno == errno.EBADF
        # The link check's fstat fails the same way before anything is written.
        with pytest.raises(OSError) as checked:
            c_mod.journal_write(1 << 20, _ROW, True)
        assert checked.value.errno == errno.EBADF
    finally:
        os.close(read_only)
    assert (tmp_path / "r").read_bytes() == b""


def test_an_unlinked_file_is_refused_only_when_checked(c_mod: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "gone"
    fd = _open(path)
    try:
        path.unlink()
        assert c_mod.journal_write(fd, _ROW, True)[:3] == (1, 0, len(journal_record(_ROW)[0]))
        assert os.fstat(fd).st_size == 0  # nothing written
        out = c_mod.journal_write(fd, _ROW, False)  # a completion is still written
        assert out[0] == 0 and out[1] == out[2] == os.fstat(fd).st_size
    finally:
        os.close(fd)


def test_wrong_arguments(c_mod: ModuleType, tmp_path: Path) -> None:
    fd = _open(tmp_path / "w")
    try:
        with pytest.raises(TypeError):
            c_mod.journal_write(fd, list(_ROW), True)
        with pytest.raises(TypeError):
            c_mod.journal_write("3", _ROW, True)
        with pytest.raises(TypeError):
            c_mod.journal_write(fd, _ROW)
        assert c_mod.journal_write(fd, _ROW[:5], True) is None  # not 15 fields
    finally:
        os.close(fd)
    assert (tmp_path / "w").read_bytes() == b""


def test_journal_append_fields_equals_append(c_mod: ModuleType, tmp_path: Path) -> None:
    native = Journal(tmp_path / "a.db")
    python = Journal(tmp_path / "b.db")
    try:
        for write_ahead in (True, False, True):
            line, parts = journal_record(_ROW)
            assert native.append_fields(_ROW, write_ahead=write_ahead) == (
                python.append(line, write_ahead=write_ahead),
                parts,
            )
        assert native.path.read_bytes() == python.path.read_bytes()
        # Outside the shapes: nothing written, the caller takes the Python code.
        assert native.append_fields((*_ROW[:3], None, *_ROW[4:])) is None
        assert native.size == python.size == native.path.stat().st_size
    finally:
        native.close()
        python.close()


def test_journal_append_fields_errors_are_appends(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "a.db")
    try:
        journal.path.unlink()
        with pytest.raises(AuditError, match="removed while open"):
            journal.append_fields(_ROW, write_ahead=True)
        real = os.fstatvfs

        def full(fd: int) -> Any:
            st = real(fd)
            return os.statvfs_result((*st[:4], 0, *st[5:]))  # f_bavail = 0

        monkeypatch.setattr(os, "fstatvfs", full)
        with pytest.raises(AuditError, match="file system is full") as info:
            journal.append_fields(_ROW, write_ahead=True)
        assert info.value.details["reason"] == "no_space"
        assert journal.append_fields(_ROW, write_ahead=False) is not None  # a completion
    finally:
        journal.close()
    with pytest.raises(AuditError, match="write failed"):
        journal.append_fields(_ROW)  # a closed journal: EBADF


def test_a_short_write_is_cut_off(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal(tmp_path / "a.db")
    try:
        assert journal.append_fields(_ROW) is not None
        size = journal.size

        def short(fd: int, fields: tuple[Any, ...], check: bool) -> Any:
            out = c_mod.journal_write(fd, fields, check)
            return (out[0], out[1] - 5, *out[2:])  # as if the disk filled mid-line

        monkeypatch.setattr(_canonical, "_journal_write", short)
        with pytest.raises(AuditError, match="short write"):
            journal.append_fields(_ROW)
        assert journal.size == size == journal.path.stat().st_size  # the torn tail is gone
    finally:
        journal.close()


def test_pure_switch_writes_through_the_python_code(c_mod: ModuleType, tmp_path: Path) -> None:
    journal = Journal(tmp_path / "a.db")
    _canonical._select(None)
    try:
        assert _canonical._journal_write is None
        assert journal.append_fields(_ROW) is None
        assert journal.size == 0
    finally:
        _canonical._select(c_mod)
        journal.close()
    assert _canonical._journal_write is c_mod.journal_write
