"""The accelerator's ``journal_request`` / ``journal_completion`` (a call's two journaled
records, each built and written in one call): checked against the Python code on generated
records — the same fields, bytes in the file and body parts, the same redaction gate, the
same errors —, declining (nothing written) wherever the Python path decides otherwise; and
the audit log's records through them equal the pure-Python path's, errors included."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import math
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.audit import AuditLog, _canonical
from runtime.audit._digestkey import KEY_BYTES, key_path
from runtime.audit._log import OUTCOMES
from runtime.audit._record import journal_record
from runtime.audit._redact import Redactor
from runtime.errors import AuditError

_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_NOW = "2026-11-23T00:00:00.000000Z"
# Text with the gate's fragments and escapes besides plain words: hits, misses, non-ASCII.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40) | st.lists(
    st.sampled_from(
        ["a", "x", " ", "\n", '"', "\\", "é", "😀", "tok", "en", "pass", "word", "AKIA", "sk-"]
    ),
    max_size=8,
).map("".join)
ARGUMENTS = st.dictionaries(TEXT, TEXT | st.integers(-(2**60), 2**60) | st.booleans(), max_size=4)
PLAIN = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
USAGE = st.none() | st.dictionaries(TEXT, PLAIN, max_size=5)
# Usage the accelerator declines: the Python path encodes it or raises its own error.
ODD_USAGE = st.sampled_from(
    [{"a": math.nan}, {"a": [1]}, {"a": {"b": 1}}, {1: 2}, {"a": "\ud800"}, {"a": 1.5j}, []]
)
DECISION = '{"action":"allow","reasons":[],"rule":"data"}'
SANDBOX = '{"backend":"wasm","fuel":true}'


def _open(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


@pytest.fixture
def fresh(tmp_path: Path) -> Any:
    count = iter(range(1 << 30))
    return lambda: tmp_path / f"j{next(count)}"


def _run(path: Path, fn: Any, *args: Any) -> Any:
    fd = _open(path)
    try:
        return fn(fd, 0, *args)
    finally:
        os.close(fd)


def _check_written(path: Path, out: Any, kind: str) -> tuple[Any, ...]:
    """The answer is what the Python code keeps for the record it wrote."""
    fields, end, parts = out
    assert fields[0] == kind and len(fields) == 16
    line, py_parts = journal_record(fields)
    assert (end, parts) == (len(line), py_parts)
    assert path.read_bytes() == line
    return tuple(fields)


@_SETTINGS
@given(
    arguments=ARGUMENTS,
    session=st.none() | TEXT,
    call_id=TEXT,
    extra=st.lists(st.sampled_from(["X-Tenant", "api_secret", "-", "zz"]), max_size=2),
)
def test_request_equals_the_python_record(
    c_mod: ModuleType, fresh: Any, arguments: Any, session: Any, call_id: str, extra: list[str]
) -> None:
    redactor = Redactor(extra)
    data = _canonical.canonical_json_ijson(arguments)
    text = data.decode()
    path = fresh()
    gate = redactor.gate_args()
    out = _run(path, c_mod.journal_request, call_id, "json_parse", data, DECISION, "wasm",
               SANDBOX, session, gate)  # fmt: skip
    if gate is None or not text.isascii() or redactor.may_redact(text):
        # The Python path redacts (or its gate decides on text beyond ASCII): declined.
        if gate is not None and text.isascii():
            assert redactor.may_redact(text)
        assert out is None
        assert path.read_bytes() == b""
        return
    fields = _check_written(path, out, "request")
    expected = ("request", call_id, fields[2], "json_parse", hashlib.sha256(data).hexdigest(),
                text, DECISION, "wasm", SANDBOX, *[None] * 6, session)  # fmt: skip
    assert fields == expected
    assert len(fields[2]) == len(_NOW) and fields[2].endswith("Z")


@_SETTINGS
@given(
    usage=USAGE | ODD_USAGE,
    result=st.none() | st.binary(max_size=64),
    outcome=st.sampled_from(sorted(OUTCOMES)),
    error_type=st.none() | TEXT,
    duration=st.floats(allow_nan=False, allow_infinity=False),
    session=st.none() | TEXT,
)
def test_completion_equals_the_python_record(
    c_mod: ModuleType,
    fresh: Any,
    usage: Any,
    result: Any,
    outcome: str,
    error_type: Any,
    duration: float,
    session: Any,
) -> None:
    path = fresh()
    out = _run(path, c_mod.journal_completion, "c1", "json_parse", "wasm", SANDBOX, outcome,
               error_type, duration, usage, result, session)  # fmt: skip
    try:
        usage_text = None if usage is None else _canonical._py_encode(usage, True).decode()
    except Exception:
        usage_text = "error"
    if out is None:
        # Only what the accelerator leaves to the Python code: usage beyond plain scalars.
        assert (
            usage_text == "error"
            or type(usage) is not dict
            or any(type(v) not in (type(None), bool, int, float, str) for v in usage.values())
        )
        assert path.read_bytes() == b""
        return
    assert usage_text != "error"
    fields = _check_written(path, out, "completion")
    digest = None if result is None else hashlib.sha256(result).hexdigest()
    size = None if result is None else len(result)
    expected = ("completion", "c1", fields[2], "json_parse", None, None, None, "wasm", SANDBOX,
                outcome, error_type, duration, usage_text, digest, size, session)  # fmt: skip
    assert fields == expected


def test_outside_the_shapes_nothing_is_written(c_mod: ModuleType, fresh: Any) -> None:
    gate = Redactor().gate_args()
    good = ("c1", "t", b'{"a":1}', DECISION, "wasm", SANDBOX, None, gate)
    for i, bad in [(0, 3), (1, None), (2, bytearray(b"{}")), (2, b"\xff"), (3, "[]"),
                   (4, None), (5, ""), (6, 1), (7, None), (7, ("a",)), (0, "\ud800")]:  # fmt: skip
        path = fresh()
        args = list(good)
        args[i] = bad
        assert _run(path, c_mod.journal_request, *args) is None, (i, bad)
        assert path.read_bytes() == b""
    good_c = ("c1", "t", "wasm", SANDBOX, "success", None, 1.0, {"fuel": 3}, b"{}", None)
    for i, bad in [(0, 3), (2, None), (3, None), (4, None), (5, 1), (6, 1), (6, math.inf),
                   (7, []), (7, {"a": math.nan}), (8, "{}"), (9, 1)]:  # fmt: skip
        path = fresh()
        args = list(good_c)
        args[i] = bad
        assert _run(path, c_mod.journal_completion, *args) is None, (i, bad)
        assert path.read_bytes() == b""


def test_errors_and_statuses(c_mod: ModuleType, tmp_path: Path) -> None:
    gate = Redactor().gate_args()
    req = ("c1", "t", b'{"a":1}', DECISION, "wasm", SANDBOX, None, gate)
    comp = ("c1", "t", "wasm", SANDBOX, "success", None, 1.0, None, None, None)
    with pytest.raises(TypeError):
        c_mod.journal_request(0, 0, *req[:-1])
    with pytest.raises(TypeError):
        c_mod.journal_completion(0, 0, *comp, None)
    with pytest.raises(TypeError):
        c_mod.journal_request("3", 0, *req)
    with pytest.raises(ValueError, match="negative"):
        c_mod.journal_completion(1, -1, *comp)
    with pytest.raises(OSError) as info:
        c_mod.journal_request(1 << 20, 0, *req)
    assert info.value.errno == errno.EBADF
    path = tmp_path / "gone"
    fd = _open(path)
    try:
        path.unlink()
        assert c_mod.journal_request(fd, 0, *req) == 1  # the link is checked: nothing written
        assert os.fstat(fd).st_size == 0
        out = c_mod.journal_completion(fd, 5, *comp)  # not checked: a completion is kept
        assert out[1] == 5 + os.fstat(fd).st_size
    finally:
        os.close(fd)
    big = (*req[:2], b'{"text":"' + b"x" * 6000 + b'"}', *req[3:])
    r, w = os.pipe()
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 4096)
        os.set_blocking(w, False)
        assert c_mod.journal_request(w, 0, *big) == 2  # a short write
    finally:
        os.close(r)
        os.close(w)


# -- through the audit log: the records equal the pure-Python path's -----------------------


def _pure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_canonical, "_journal_request", None)
    monkeypatch.setattr(_canonical, "_journal_completion", None)


def _call(log: AuditLog, call_id: str, arguments: Any, usage: Any, result: Any) -> None:
    decision = log.prepare("decision", {"action": "allow", "rule": "data", "reasons": []})
    sandbox = log.prepare("sandbox", {"backend": "wasm", "fuel": True})
    data = log.canonical_arguments(arguments)
    log.record_request(call_id=call_id, tool="json_parse", arguments=arguments,
                       decision=decision, backend="wasm", sandbox=sandbox, returning=False,
                       defer=True, arguments_bytes=data, session="s1")  # fmt: skip
    result_bytes = None if result is None else log.canonical_result(result)
    log.record_completion(call_id=call_id, tool="json_parse", outcome="success",
                          error_type=None, duration_ms=1.25, usage=usage, result=result,
                          result_bytes=result_bytes, backend="wasm", sandbox=sandbox,
                          returning=False, defer=True, session="s1")  # fmt: skip


def _records(log: AuditLog) -> list[dict[str, Any]]:
    out = []
    for r in log.tail(100):
        d = r.model_dump()
        for volatile in ("seq", "time", "hash", "prev_hash"):
            d.pop(volatile)
        out.append(d)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    calls=st.lists(
        st.tuples(ARGUMENTS, USAGE | ODD_USAGE, st.none() | ARGUMENTS), min_size=1, max_size=4
    )
)
def test_log_records_equal_the_python_paths(
    c_mod: ModuleType, tmp_path_factory: pytest.TempPathFactory, calls: list[Any]
) -> None:
    base = tmp_path_factory.mktemp("diff")
    outcomes: dict[str, Any] = {}
    for mode in ("native", "pure"):
        with pytest.MonkeyPatch.context() as mp:
            if mode == "pure":
                _pure(mp)
            # One digest key for both logs: a redacted call's digest is keyed per log.
            key_path(base / f"{mode}.db").write_bytes(b"k" * KEY_BYTES)
            with AuditLog(base / f"{mode}.db") as log:
                errors = []
                for i, (arguments, usage, result) in enumerate(calls):
                    try:
                        _call(log, f"c{i}", arguments, usage, result)
                    except AuditError as exc:
                        errors.append(str(exc).split(":")[0])
                assert log.verify().ok
                outcomes[mode] = (_records(log), errors)
    assert outcomes["native"] == outcomes["pure"]


def test_the_hot_path_takes_the_accelerator(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker's records go through journal_request/journal_completion (one call each)
    once the journal exists; a redaction hit declines, and the Python path redacts."""
    seen: list[str] = []

    def spy(name: str) -> Any:
        real = getattr(c_mod, name)

        def wrapped(*args: Any) -> Any:
            out = real(*args)
            seen.append(f"{name}:{'declined' if out is None else 'written'}")
            return out

        return wrapped

    monkeypatch.setattr(_canonical, "_journal_request", spy("journal_request"))
    monkeypatch.setattr(_canonical, "_journal_completion", spy("journal_completion"))
    with AuditLog(tmp_path / "a.db") as log:
        _call(log, "first", {"text": "[1]"}, {"fuel": 1}, [1])  # creates the journal
        assert seen == ["journal_completion:written"]
        seen.clear()
        _call(log, "second", {"text": "[2]"}, {"fuel": 2}, [2])
        assert seen == ["journal_request:written", "journal_completion:written"]
        seen.clear()
        _call(log, "secret", {"password": "hunter22"}, None, None)
        assert seen == ["journal_request:declined", "journal_completion:written"]
        records = log.tail(10)
        assert [r.call_id for r in records] == ["first"] * 2 + ["second"] * 2 + ["secret"] * 2
        assert records[4].arguments == {"password": "[REDACTED]"}
        assert records[2].arguments == {"text": "[2]"} and records[3].usage == {"fuel": 2}
        assert log.verify().ok


def test_the_logs_errors_through_the_accelerator(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full file system, removed journal, write failure, closed log: the journal's errors,
    nothing recorded twice, the chain verifies."""
    with AuditLog(tmp_path / "a.db") as log:
        _call(log, "a", {"text": "1"}, None, 1)
        real = os.fstatvfs

        def full(fd: int) -> Any:
            s = real(fd)
            return os.statvfs_result((*s[:4], 0, *s[5:]))  # f_bavail = 0

        monkeypatch.setattr(os, "fstatvfs", full)
        with pytest.raises(AuditError, match="file system is full"):
            _call(log, "b", {"text": "2"}, None, 2)
        monkeypatch.undo()

        def broken(*args: Any) -> Any:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(_canonical, "_journal_request", broken)
        with pytest.raises(AuditError, match="write failed"):
            _call(log, "c", {"text": "3"}, None, 3)
        monkeypatch.undo()
        _call(log, "d", {"text": "4"}, {"fuel": 4}, 4)
        assert [r.call_id for r in log.tail(10)] == ["a", "a", "d", "d"]
        assert log.verify().ok
        journal = log._journal
        assert journal is not None
        journal.path.unlink()
        with pytest.raises(AuditError, match="removed while open"):
            _call(log, "e", {"text": "5"}, None, 5)
    with pytest.raises(AuditError, match="closed"):
        _call(log, "f", {"text": "6"}, None, 6)
    with AuditLog(tmp_path / "a.db") as again:
        assert [r.call_id for r in again.tail(10)] == ["a", "a", "d", "d"]
        assert again.verify().ok


def test_records_of_both_paths_are_one_chain(
    c_mod: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls journaled by the accelerator and by the Python path, alternated in one log
    (and the log reopened by a pure-Python writer), verify as one chain."""
    with AuditLog(tmp_path / "a.db") as log:
        for i in range(6):
            with monkeypatch.context() as m:
                if i % 2:
                    _pure(m)
                _call(log, f"c{i}", {"text": str(i)}, {"fuel": i}, [i])
        assert log.verify().ok
    with monkeypatch.context() as m:
        _pure(m)
        with AuditLog(tmp_path / "a.db") as log:
            _call(log, "pure", {"text": "p"}, None, None)
    with AuditLog(tmp_path / "a.db") as log:
        _call(log, "native", {"text": "n"}, {"fuel": 1}, {"ok": True})
        report = log.verify()
        assert report.ok and report.count == 16
        assert [r.call_id for r in log.tail(4)] == ["pure", "pure", "native", "native"]
