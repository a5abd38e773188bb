"""AuditLog: the broker's write-ahead, hash-chained record of every call.

The broker writes a *request* record before anything runs and a *completion* record after; a
call with the first and not the second was interrupted (broker killed in between), which
:meth:`AuditLog.interrupted` reports on the next start. Every failure to write or read raises
:class:`~runtime.errors.AuditError`: the broker fails closed and runs nothing it cannot record.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TextIO, TypeVar, overload

from runtime.audit._canonical import (
    GENESIS_HASH,
    CanonicalizationError,
    canonical_json_ijson,
    sha256_hex,
)
from runtime.audit._export import otel_record
from runtime.audit._record import COLUMNS, JSON_FIELDS, body_bytes, chain_hash, row_to_record
from runtime.audit._redact import Redactor
from runtime.audit._store import Database
from runtime.audit._verify import VerifyReport, verify_rows
from runtime.errors import AuditError
from runtime.models import AuditRecord

__all__ = ["OUTCOMES", "AuditLog"]

_T = TypeVar("_T")

# Position of each column in the ``fields`` tuple: COLUMNS without seq, time, prev_hash and
# hash, which are filled in when the record is built.
_AT = {name: i for i, name in enumerate(c for c in COLUMNS[1:-2] if c != "time")}

OUTCOMES = frozenset({"success", "error", "denied", "cancelled"})


def _parse_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class _Clock:
    """RFC 3339 UTC timestamps with microseconds (``2026-01-02T03:04:05.678901Z``).

    The date-time part is formatted once per second and reused: a record's time is taken
    under the write lock on every append, and ``datetime.isoformat`` was a visible share of
    the per-record cost.
    """

    __slots__ = ("_cached", "_ns")

    def __init__(self, ns: Callable[[], int] = time.time_ns) -> None:
        self._ns = ns
        self._cached: tuple[int, str] = (-1, "")

    def __call__(self) -> str:
        second, micro = divmod(self._ns() // 1000, 1_000_000)
        # One attribute read and one write: threads (several logs share this clock) never
        # see a second paired with another second's prefix.
        cached = self._cached
        if cached[0] != second:
            stamp = _dt.datetime.fromtimestamp(second, _dt.UTC)
            cached = (second, stamp.strftime("%Y-%m-%dT%H:%M:%S."))
            self._cached = cached
        return f"{cached[1]}{micro:06d}Z"


_now = _Clock()


class AuditLog:
    """A hash-chained, append-only audit log in one SQLite file.

    ``redact_keys`` are extra secret key names (the policy's) redacted on top of the built-in
    rules. ``busy_timeout_s`` is how long an append waits for another writer's lock before it
    fails closed (seconds, default 5). Thread-safe; several instances and processes may share a
    file and still extend one chain.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        redact_keys: Iterable[str] = (),
        busy_timeout_s: float = 5.0,
    ) -> None:
        # Absolute: the file identity check must not follow a later chdir.
        self._path = Path(path).absolute()
        self._timeout = busy_timeout_s
        self._redact = Redactor(redact_keys)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._writer: Database | None = Database(
            self._path, busy_timeout_s=busy_timeout_s, create=True
        )
        # Reads use their own connection: a long verify/export snapshot never blocks appends.
        self._reader: Database | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"AuditLog({str(self._path)!r})"

    # -- writes -----------------------------------------------------------------------------

    @overload
    def record_request(
        self,
        *,
        call_id: str,
        tool: str,
        arguments: Any,
        decision: dict[str, Any] | None,
        backend: str | None,
        sandbox: dict[str, Any] | None,
        returning: Literal[True] = True,
    ) -> AuditRecord: ...

    @overload
    def record_request(
        self,
        *,
        call_id: str,
        tool: str,
        arguments: Any,
        decision: dict[str, Any] | None,
        backend: str | None,
        sandbox: dict[str, Any] | None,
        returning: Literal[False],
    ) -> None: ...

    def record_request(
        self,
        *,
        call_id: str,
        tool: str,
        arguments: Any,
        decision: dict[str, Any] | None,
        backend: str | None,
        sandbox: dict[str, Any] | None,
        returning: bool = True,
    ) -> AuditRecord | None:
        """The write-ahead record, committed before the call runs.

        Stores the redacted arguments and the sha256 of the canonical *unredacted* arguments.
        ``returning=False`` (the broker's hot path) skips building the AuditRecord model.
        """
        data = self._canonical("arguments", arguments)
        shown = {"arguments": self._redacted(arguments), "decision": self._redacted(decision)}
        if arguments is None:
            arguments_text = None
        elif shown["arguments"] == arguments:
            # Nothing was redacted (the common case): redaction only ever puts strings where
            # something else was, so equal values have equal canonical bytes. Saves a walk.
            arguments_text = data.decode("utf-8")
        else:
            arguments_text = self._json_text("arguments", shown["arguments"])
        fields = (
            "request",
            call_id,
            tool,
            sha256_hex(data),
            arguments_text,
            self._json_text("decision", shown["decision"]),
            backend,
            self._json_text("sandbox", sandbox),
            None,
            None,
            None,
            None,
            None,
            None,
        )
        return self._append(fields, shown, returning)

    @overload
    def record_completion(
        self,
        *,
        call_id: str,
        tool: str,
        outcome: str,
        error_type: str | None,
        duration_ms: float,
        usage: dict[str, Any] | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | None = None,
        decision: dict[str, Any] | None = None,
        returning: Literal[True] = True,
        result_bytes: bytes | None = None,
    ) -> AuditRecord: ...

    @overload
    def record_completion(
        self,
        *,
        call_id: str,
        tool: str,
        outcome: str,
        error_type: str | None,
        duration_ms: float,
        usage: dict[str, Any] | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | None = None,
        decision: dict[str, Any] | None = None,
        returning: Literal[False],
        result_bytes: bytes | None = None,
    ) -> None: ...

    def record_completion(
        self,
        *,
        call_id: str,
        tool: str,
        outcome: str,
        error_type: str | None,
        duration_ms: float,
        usage: dict[str, Any] | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | None = None,
        decision: dict[str, Any] | None = None,
        returning: bool = True,
        result_bytes: bytes | None = None,
    ) -> AuditRecord | None:
        """The completion record: outcome, error type, resource use, result digest and size.

        The result itself is not stored; a ``None`` result has no digest. ``returning=False``
        skips building the AuditRecord model. ``result_bytes`` is :meth:`canonical_result`
        of ``result`` when the caller already has it (the broker sizes results with it), so
        the result is serialised once per call.
        """
        if outcome not in OUTCOMES:
            raise AuditError(
                f"audit outcome {outcome!r} is not one of {sorted(OUTCOMES)}", outcome=outcome
            )
        result_digest: str | None = None
        result_size: int | None = None
        if result is not None:
            data = result_bytes if result_bytes is not None else self._canonical("result", result)
            result_digest, result_size = sha256_hex(data), len(data)
        try:
            duration = float(duration_ms)
        except (TypeError, ValueError) as exc:
            raise AuditError(f"audit duration_ms {duration_ms!r} is not a number") from exc
        shown = {"decision": self._redacted(decision)}
        fields = (
            "completion",
            call_id,
            tool,
            None,
            None,
            self._json_text("decision", shown["decision"]),
            backend,
            self._json_text("sandbox", sandbox),
            outcome,
            error_type,
            duration,
            self._json_text("usage", usage),
            result_digest,
            result_size,
        )
        return self._append(fields, shown, returning)

    def canonical_result(self, result: Any) -> bytes:
        """The bytes a completion record's ``result_digest``/``result_size`` are taken over
        (RFC 8785, integers beyond 2**53 as strings). Raises AuditError for non-JSON data."""
        return self._canonical("result", result)

    def _canonical(self, what: str, value: Any) -> bytes:
        try:
            return canonical_json_ijson(value)
        except CanonicalizationError as exc:
            raise AuditError(f"audit: {what} are not JSON data: {exc}", field=what) from exc
        except RecursionError as exc:  # nesting deeper than the interpreter's stack
            raise AuditError(f"audit: {what} are nested too deeply", field=what) from exc

    def _redacted(self, value: Any) -> Any:
        try:
            return self._redact(value)
        except RecursionError as exc:
            raise AuditError("audit: data nested too deeply to redact") from exc

    def _json_text(self, what: str, value: Any) -> str | None:
        return None if value is None else self._canonical(what, value).decode("utf-8")

    def _append(
        self, fields: tuple[Any, ...], shown: dict[str, Any], returning: bool
    ) -> AuditRecord | None:
        """Append a record; return it with ``shown`` (the redacted objects) as its JSON fields.

        Returning the objects in hand instead of re-parsing the stored text saves a JSON decode
        per field; the one difference from :meth:`tail` is that integers beyond 2**53 are
        strings in the file (I-JSON) and still integers in the returned record.
        """
        kind, call_id, tool, *rest = fields
        # SQLite would store an int call_id as TEXT and the hash (taken over the int) would
        # never verify again: refuse anything but text up front.
        for name in ("call_id", "tool", "backend", "error_type"):
            value = fields[_AT[name]]
            if not isinstance(value, str) and (value is not None or name in ("call_id", "tool")):
                raise AuditError(f"audit {name} must be a string, not {type(value).__name__}")
        for name in ("decision", "sandbox", "usage"):
            text = fields[_AT[name]]
            if text is not None and not text.startswith("{"):
                raise AuditError(f"audit {name} must be an object (a dict) or None")

        def build(head_seq: int, head_hash: str | None) -> tuple[Any, ...]:
            # Runs under the write lock, and again if another writer took this seq first;
            # the time is taken here, when the record is built.
            seq, prev = head_seq + 1, head_hash or GENESIS_HASH
            row = (seq, kind, call_id, _now(), tool, *rest, prev)
            return (*row, chain_hash(prev, body_bytes((*row, None))))

        with self._write_lock:
            try:
                row = self._db(write=True).append(build)
            except ValueError as exc:  # text that is not UTF-8 (lone surrogates) in a field
                raise AuditError(f"audit record for {call_id!r} is not valid text: {exc}") from exc
        if not returning:
            return None
        data = dict(zip(COLUMNS, row, strict=True))
        for name in JSON_FIELDS:
            data[name] = shown[name] if name in shown else _parse_json(data[name])
        return AuditRecord.model_validate(data)

    # -- reads ------------------------------------------------------------------------------

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the last record, ``(0, GENESIS_HASH)`` when empty.

        Keep it outside this file (another log, a remote store) and pass it back to
        :meth:`verify` to detect truncation or a rewritten chain, which the file alone cannot.
        """
        head = self._read("head", lambda db, conn: db.head(conn))
        return head or (0, GENESIS_HASH)

    def verify(self, expected_head: tuple[int, str] | None = None) -> VerifyReport:
        """Walk the whole chain; report the first record that is altered, missing or moved."""

        def run(db: Database, conn: Any) -> VerifyReport:
            high = db.high_water(conn)
            return verify_rows(db.rows(conn), high_water=high, expected_head=expected_head)

        return self._read("verify", run)

    def tail(self, n: int = 20) -> list[AuditRecord]:
        """The last ``n`` records, oldest first."""
        if n <= 0:
            return []
        return self._read(
            "tail", lambda db, conn: [row_to_record(r) for r in db.last_rows(conn, n)]
        )

    def interrupted(self) -> list[str]:
        """call_ids whose last request record has no completion after it, in log order.

        Meant for start-up: while other brokers write to the same file, their in-flight
        calls are listed too.
        """

        def run(db: Database, conn: Any) -> list[str]:
            pending: dict[str, None] = {}
            for call_id, kind in conn.execute(
                "SELECT call_id, kind FROM audit_records ORDER BY seq"
            ):
                pending.pop(call_id, None)
                if kind == "request":
                    pending[call_id] = None
            return list(pending)

        return self._read("interrupted", run)

    def export_jsonl(self, out: TextIO) -> int:
        """Write every record as one JSON line with OpenTelemetry GenAI keys; return the count."""

        def run(db: Database, conn: Any) -> int:
            count = 0
            for row in db.rows(conn):
                out.write(json.dumps(otel_record(row_to_record(row)), ensure_ascii=False) + "\n")
                count += 1
            return count

        return self._read("export", run)

    def _read(self, action: str, fn: Callable[[Database, Any], _T]) -> _T:
        with self._read_lock:
            db = self._db(write=False)
            try:
                with db.snapshot(action) as conn:
                    return fn(db, conn)
            except (ValueError, RecursionError) as exc:  # a row someone edited into nonsense
                raise AuditError(
                    f"audit log {self._path}: {action} found a malformed record "
                    f"(run verify): {exc}",
                    path=str(self._path),
                ) from exc

    def _db(self, *, write: bool) -> Database:
        if self._closed:
            raise AuditError(f"audit log {self._path} is closed", path=str(self._path))
        if write:
            assert self._writer is not None
            return self._writer
        if self._reader is None:
            self._reader = Database(self._path, busy_timeout_s=self._timeout, create=False)
        return self._reader

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._write_lock, self._read_lock:
            self._closed = True
            for db in (self._writer, self._reader):
                if db is not None:
                    db.close()
            self._writer = self._reader = None

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
