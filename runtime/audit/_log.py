"""AuditLog: the broker's write-ahead, hash-chained record of every call.

The broker writes a *request* record before anything runs and a *completion* record after; a
call with the first and not the second was interrupted (broker killed in between), which
:meth:`AuditLog.interrupted` reports on the next start. Every failure to write or read raises
:class:`~runtime.errors.AuditError`: the broker fails closed and runs nothing it cannot record.

Two ways to append, one chain:

- synchronous (the default): the record is committed to SQLite before the method returns;
- ``defer=True``: the record is written to this log's journal with one ``write()`` (as durable
  against a process crash as a WAL commit with ``synchronous=NORMAL``; see ``_journal``) and
  a writer thread inserts it into SQLite with the other pending ones in one transaction.

The broker journals both records of every call that runs (any backend) and commits only
the records of calls refused before running. Readers in other processes (``runtime audit
tail/verify/export``, an MCP client checking the log) read SQLite: they see a live broker's
journaled records once they are inserted — at its next batch, within ``_IDLE_S`` of the
oldest pending record (the idle thread), or at its :meth:`flush`/close —, and every record of
a broker that died, because opening a log first recovers dead owners' journals (``_journal``).

Order is kept: every synchronous append, and every read (verify, tail, interrupted, head,
export) of this instance, first inserts the pending records. A record that cannot be written
to the journal raises AuditError at once (fail closed); while the writer thread is failing,
each deferred append first retries the insertion itself and raises if it still fails, so a
broken database refuses calls instead of piling them up in the journal.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as _dt
import hashlib
import hmac
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TextIO, TypeVar, overload

from runtime import _forksafe, _speedups
from runtime.audit import _canonical
from runtime.audit._canonical import (
    GENESIS_HASH,
    canonical_json_ijson,
    canonical_json_ijson_bulk,
    sha256_hex,
)
from runtime.audit._digestkey import digest_key
from runtime.audit._export import json_line, otel_record
from runtime.audit._journal import Journal, dead_journals, parse_lines
from runtime.audit._record import (
    COLUMNS,
    JSON_FIELDS,
    BodyParts,
    body_bytes,
    body_parts,
    chain_hash,
    chain_rows,
    journal_record,
    row_to_record,
)
from runtime.audit._redact import Redactor
from runtime.audit._store import Database, WriterBusy
from runtime.audit._verify import VerifyReport, verify_rows
from runtime.errors import AuditError
from runtime.models import AuditRecord

__all__ = ["KEYED_DIGEST_PREFIX", "OUTCOMES", "AuditLog", "PreparedObject"]

#: How the arguments digest of a call redaction changed begins (see ``_digestkey``).
KEYED_DIGEST_PREFIX = "hmac-sha256:"

_T = TypeVar("_T")

log = logging.getLogger("runtime.audit")

# Journaled records are inserted into SQLite by the appender that brings the pending count to
# _BATCH (one transaction for all), by any read or synchronous append of this log, or — when
# calls stop coming — by a background thread once the oldest waited _IDLE_S seconds. SQLite's
# CPU per inserted row falls with the batch (measured ~14 µs at 64 rows, ~10 µs at 256).
_BATCH = 256
_IDLE_S = 0.1
# While another writer (another broker process on the same file) holds SQLite's write lock,
# the appender that filled a batch does not wait for it: SQLite's busy handler sleeps 1, 2,
# 5, 10 ms... between tries, in the calling thread, for as long as the other batch takes
# (measured ~2 ms a batch of two processes' contention, ~1 % of their calls' wall time). It
# keeps journaling and tries again _RETRY_EVERY records later; from _BATCH_MAX pending
# records on it waits, as before (the bound on records only in the journal). The idle thread
# does not wait either, until the oldest pending record is _IDLE_WAIT_S old.
_BATCH_MAX = 4 * _BATCH
_RETRY_EVERY = 32
_IDLE_WAIT_S = 1.0
# A journal whose records are all in the database is replaced by a fresh file beyond this size.
_ROTATE_BYTES = 1 << 20
# The writer connection does not checkpoint the WAL itself (SQLite's automatic checkpoint at
# 1000 pages fsyncs twice inside the COMMIT that crosses it: a ~20 ms stall of the calling
# thread every few batches). The idle thread checkpoints, on the reader connection, once this
# many records were inserted since the last one (~800 WAL pages of broker records); logs with
# only synchronous appends checkpoint inline at the same count, as SQLite did.
_CHECKPOINT_ROWS = 4096

# hashlib.sha256 (sha256_hex without its frame, on the hot path).
_sha256 = hashlib.sha256

_SMALL_CACHE = 512
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _flat_key(value: Any) -> tuple[Any, ...] | None:
    """A hashable key equal only for objects with the same canonical JSON: a small dict of
    plain scalars and lists of strings, or None (not memoised). Each value's type is in the
    key, because ``1 == 1.0 == True`` hash alike and print differently."""
    if type(value) is not dict or len(value) > 16:
        return None
    key: list[Any] = []
    for k, v in value.items():
        t = type(v)
        if type(k) is not str:
            return None
        if t is list:
            if len(v) > 16 or not all(type(x) is str for x in v):
                return None
            key.append((k, t, tuple(v)))
        elif t in _PLAIN:
            key.append((k, t, v))
        else:
            return None
    return tuple(key)


class PreparedObject:
    """A decision/sandbox/usage object made ready for one log's records: redacted (if asked)
    and serialised once, by :meth:`AuditLog.prepare`. Pass it to the ``decision``,
    ``sandbox`` or ``usage`` argument of that log's ``record_*`` as often as it applies; treat
    it and its attributes as read-only (``prepare`` copied the value it was given).

    Why: the broker sends the same few objects with every call (one fingerprint per backend,
    one decision per rule); building the memo key of a fresh dict on every call cost about
    as much as serialising it. A log handed another log's PreparedObject (other redaction
    keys) prepares the original value again.
    """

    __slots__ = ("_owner", "shown", "source", "text")

    def __init__(self, owner: AuditLog, source: dict[str, Any], shown: Any, text: str) -> None:
        self._owner = weakref.ref(owner)
        #: The value as given, the value as recorded (redacted), and its canonical text.
        self.source = source
        self.shown = shown
        self.text = text

    def __repr__(self) -> str:
        return f"PreparedObject({self.text})"


#: In a forked child: the parent's SQLite connections of the logs open at the fork, never
#: used or closed here (AuditLog._forked_child).
_INHERITED: list[Database] = []


def _idle_loop(ref: weakref.ref[AuditLog], wake: threading.Event) -> None:
    """The idle flusher thread. It holds the log only by a weak reference between ticks, so
    a log its owner dropped without close() is still collected (and the thread ends)."""
    while True:
        wake.wait(_IDLE_S)  # set by close()
        audit_log = ref()
        if audit_log is None or not audit_log._idle_flush():
            return
        audit_log._idle_checkpoint()
        del audit_log


#: A pending record: the fields of a journal line, the line's end offset in the journal and
#: the record's body parts (everything of its hashed body but seq and prev_hash).
_Pending = tuple[tuple[Any, ...], int, BodyParts]


def _chain(records: list[Any]) -> Callable[[int, str | None], list[tuple[Any, ...]]]:
    """The ``build`` for Database.append_batch: rows for ``records`` (tuples of a record's
    fields first and its body parts last) chained after the head."""

    def build(head_seq: int, head_hash: str | None) -> list[tuple[Any, ...]]:
        return chain_rows(records, head_seq, head_hash or GENESIS_HASH)

    return build


# Position of each column in the ``fields`` tuple: COLUMNS without seq, time, prev_hash and
# hash, which are filled in when the record is built.
_AT = {name: i for i, name in enumerate(c for c in COLUMNS[1:-2] if c != "time")}
# What _append checks in ``fields``: (name, position, may be None) of the text columns and
# (name, position) of the JSON object columns.
_TEXT_CHECKS = tuple(
    (name, _AT[name], name not in ("call_id", "tool"))
    for name in ("call_id", "tool", "backend", "error_type", "session")
)
_OBJECT_CHECKS = tuple((name, _AT[name]) for name in ("decision", "sandbox", "usage"))

OUTCOMES = frozenset({"success", "error", "denied", "cancelled"})
# A request record's columns from outcome to result_size.
_NO_OUTCOME = (None,) * 6


def _check_fields(fields: tuple[Any, ...]) -> None:
    """Raise AuditError naming the first text column that is not text or JSON object
    column that is not an object (subclasses of str pass, as they always did)."""
    for name, i, optional in _TEXT_CHECKS:
        value = fields[i]
        if not isinstance(value, str) and (value is not None or not optional):
            raise AuditError(f"audit {name} must be a string, not {type(value).__name__}")
    for name, i in _OBJECT_CHECKS:
        text = fields[i]
        if text is not None and not text.startswith("{"):
            raise AuditError(f"audit {name} must be an object (a dict) or None")


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


def _first_now() -> str:
    # Deferred to the first record: only processes that write records build or load the
    # accelerator.
    global _now  # noqa: PLW0603 - the one switch, read on every record
    mod = _speedups.module()
    _now = _Clock() if mod is None else mod.utc_now
    return _now()


#: The time of a record being written: the accelerator's ``utc_now`` (the same text for the
#: same clock, ~30 Python opcodes less a record), else a _Clock on time.time_ns.
_now: Callable[[], str] = _first_now


#: The real os.fstatvfs: a test that replaces it is asked instead of the accelerator.
_FSTATVFS = os.fstatvfs


def _no_space(fd: int) -> bool:
    """The journal's file system has no block left for this user (a write-ahead record is
    refused). ``os.fstatvfs`` is the seam the tests replace; while it is the real one the
    accelerator's ``free_blocks`` reads the same count with the GIL held (os.fstatvfs
    released it: a GIL hand-off per record between two threads sharing a broker)."""
    native = _canonical._free_blocks
    if native is not None and os.fstatvfs is _FSTATVFS:
        return native(fd) == 0
    return os.fstatvfs(fd).f_bavail == 0


#: Sleeps between tries for the write lock while another thread holds it (seconds): ~1.9 ms
#: in all, then a blocking acquire (a batch insertion holds the lock about that long).
_TAKE_POLL_S = (2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3)


def _take(lock: threading.Lock) -> None:
    """Take the write lock ``lock``, which another thread holds, without queueing on it
    first (the journal's hot path; every record takes the lock once).

    Why: a thread blocked in ``acquire()`` is handed the lock by the release while it still
    waits for the GIL; the releasing thread, which has the GIL, then finds the lock taken at
    its next record and blocks in turn — the two threads of one SyncBroker passed the lock
    and the GIL back and forth through the kernel at every record from then on (a lock
    convoy: ~1 contended acquire and ~2.6 context switches a call, calls/s halved with two
    threads on a quiet machine; benchmarks/BROKER-CPU.md, round five). Sleeping between
    non-blocking tries drops the GIL, so the holder can finish, and a lock taken here is
    only ever taken by a thread that has the GIL."""
    for delay in _TAKE_POLL_S:
        time.sleep(delay)
        if lock.acquire(False):
            return
    lock.acquire()


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
        read_only: bool = False,
    ) -> None:
        # Absolute: the file identity check must not follow a later chdir. Resolved: the
        # journals live beside the real file, whichever name (a symlink) opened it, so a
        # crashed broker's records are found by every opener.
        self._path = Path(path).resolve()
        self._timeout = busy_timeout_s
        self._read_only = read_only
        self._redact = Redactor(redact_keys)
        # The redaction gate's fragments for the accelerator's journal_request (None: no
        # fragment rules redaction out, every record takes the Python path).
        self._gate = self._redact.gate_args()
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        # read_only: for readers without write access (an auditor, a copy on read-only
        # media). Nothing is written, so dead brokers' journals are not recovered into it;
        # verify() counts their records as pending.
        self._writer: Database | None = (
            None
            if read_only
            else Database(
                self._path, busy_timeout_s=busy_timeout_s, create=True, autocheckpoint=False
            )
        )
        # Records inserted since the last checkpoint (_CHECKPOINT_ROWS); guarded by _db_lock.
        self._wal_rows = 0
        # Rotated journals whose records are inserted but maybe only in the WAL: removed
        # after a complete checkpoint (_rotate_locked). Guarded by _db_lock.
        self._retired: list[Journal] = []
        # Reads use their own connection: a long verify/export snapshot never blocks appends.
        self._reader: Database | None = None
        self._closed = False
        # In a child forked while this log was open (see _forked_child).
        self._forked = False
        # Deferred appends. Lock order: _write_lock, then _db_lock (held while the writer
        # connection inserts). _pending is guarded by _write_lock, _failed (a batch whose
        # insertion failed; it goes first next time) by _db_lock.
        self._db_lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._failed: list[_Pending] = []
        self._journal: Journal | None = None
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._oldest = 0.0  # time.monotonic() of the first pending record
        # While another writer holds the lock: the pending count at which the next journaled
        # append tries the batch again (0: at _BATCH); guarded by _write_lock.
        self._retry_at = 0
        self._small: dict[tuple[str, tuple[Any, ...]], tuple[Any, Any]] = {}
        # Tool names as the records show them (redacted), by name (_tool_name).
        self._tools: dict[str, str] = {}
        # The digest key, read (or made) at the first call redaction changes (_digestkey).
        self._digest_key: bytes | None = None
        _forksafe.on_fork_in_child(self)
        if self._writer is None:
            self._reader = Database(
                self._path, busy_timeout_s=busy_timeout_s, create=False, read_only=True
            )
            return
        try:
            self._recover()
        except BaseException:
            self._writer.close()
            raise

    def _forked_child(self) -> None:
        """In a child of ``os.fork()``: this log is the parent's. Its journal, its pending
        records and its connections go on in the parent, whose close inserts the records
        it tracks and removes the journal: a record the child journaled there was in no
        record once the parent closed. So the child's copy is closed without closing
        anything the parent uses: every write or read raises AuditError (see _db), the
        journal's descriptor is closed (this process's only: the file, its lock and its
        records stay the parent's), and the SQLite connections are never used or closed
        here (SQLite forbids using a connection across fork(); closing one may checkpoint
        and delete the parent's WAL) but kept for the process's life. The locks are new:
        another thread of the parent may have held one at the fork."""
        self._forked = self._closed = True
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._db_lock = threading.Lock()
        self._thread = None  # the parent's idle thread is not in this process
        self._pending, self._failed = [], []
        journal, self._journal = self._journal, None
        if journal is not None:
            journal.close()
        _INHERITED.extend(db for db in (self._writer, self._reader) if db is not None)
        self._writer = self._reader = None

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran: nothing more can be written or read."""
        return self._closed

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
        decision: dict[str, Any] | PreparedObject | None,
        backend: str | None,
        sandbox: dict[str, Any] | PreparedObject | None,
        returning: Literal[True] = True,
        arguments_bytes: bytes | None = None,
        session: str | None = None,
    ) -> AuditRecord: ...

    @overload
    def record_request(
        self,
        *,
        call_id: str,
        tool: str,
        arguments: Any,
        decision: dict[str, Any] | PreparedObject | None,
        backend: str | None,
        sandbox: dict[str, Any] | PreparedObject | None,
        returning: Literal[False],
        defer: bool = False,
        arguments_bytes: bytes | None = None,
        session: str | None = None,
    ) -> None: ...

    def record_request(
        self,
        *,
        call_id: str,
        tool: str,
        arguments: Any,
        decision: dict[str, Any] | PreparedObject | None,
        backend: str | None,
        sandbox: dict[str, Any] | PreparedObject | None,
        returning: bool = True,
        defer: bool = False,
        arguments_bytes: bytes | None = None,
        session: str | None = None,
    ) -> AuditRecord | None:
        """The write-ahead record, committed (or with ``defer``, journaled) before the call
        runs.

        Stores the redacted arguments and a digest of the canonical *unredacted* arguments:
        their sha256, or, when redaction changed them, their HMAC under the log's digest key
        (:meth:`digest_arguments`; ``_digestkey``), which no record holds.
        ``returning=False`` (the broker's hot path) skips building the AuditRecord model;
        ``defer=True`` (only with ``returning=False``) journals the record (module doc).
        ``arguments_bytes`` is :meth:`canonical_arguments` of ``arguments`` when the caller
        already has it (the broker hands it to the backend too): serialised once per call.
        ``session`` is the broker session the call runs in (None: not recorded).
        """
        if isinstance(tool, str):
            tool = self._tools.get(tool) or self._tool_name(tool)
        data = (
            arguments_bytes
            if arguments_bytes is not None and arguments is not None
            else self._canonical("arguments", arguments)
        )
        if (
            defer
            and type(decision) is PreparedObject
            and type(sandbox) is PreparedObject
            and arguments is not None
            and not returning
            and decision._owner() is self
            and sandbox._owner() is self
        ):
            # The broker's hot path in one accelerator call (journal_request): the
            # arguments' text and digest, the redaction gate, the time, the record, its
            # journal write. It declines, writing nothing, whatever the code below decides
            # otherwise (a gate hit, text beyond ASCII, a column outside its shapes).
            native = _canonical._journal_request
            if native is not None and self._journal_native(
                native,
                True,
                (call_id, tool, data, decision.text, backend, sandbox.text, session, self._gate),
            ):
                return None
        arguments_text = None if arguments is None else data.decode("utf-8")
        if (
            defer
            and type(decision) is PreparedObject
            and type(sandbox) is PreparedObject
            and type(call_id) is str
            and type(tool) is str
            and type(backend) is str
            and (session is None or type(session) is str)
            and decision._owner() is self
            and sandbox._owner() is self
            and not returning
            and (arguments_text is None or not self._redact.may_redact(arguments_text))
        ):
            # The broker's hot path: a decision and sandbox this log prepared, text names,
            # nothing to redact. Straight to the journal with the same columns the general
            # path below builds; its layers (_small_json twice, _append's checks, the
            # fields tuple rebuilt with the time) were ~200 Python opcodes a call.
            sandbox_text = sandbox.text
            self._journal_write(
                "request",
                call_id,
                (
                    tool,
                    _sha256(data).hexdigest(),
                    arguments_text,
                    decision.text,
                    backend,
                    sandbox_text,
                    *_NO_OUTCOME,
                    session,
                ),
            )
            return None
        decision_shown, decision_text = self._small_json("decision", decision, redact=True)
        digest = sha256_hex(data)
        if arguments_text is None or not (returning or self._redact.may_redact(arguments_text)):
            # No secret key name or value fragment anywhere in the text (the common case):
            # redaction would return an equal copy. Saves the walk. (A returned record gets
            # its own copy, so that it does not share the caller's arguments.)
            shown = {"arguments": arguments, "decision": decision_shown}
        else:
            shown = {"arguments": self._redacted(arguments), "decision": decision_shown}
            if shown["arguments"] != arguments:
                # Redaction only ever puts strings where something else was, so equal values
                # have equal canonical bytes: only a changed value is serialised again.
                arguments_text = self._json_text("arguments", shown["arguments"])
                # Keyed: a plain digest would let anyone holding the record test guesses
                # at what was redacted (_digestkey).
                digest = self._keyed_digest(data)
        fields = (
            "request",
            call_id,
            tool,
            digest,
            arguments_text,
            decision_text,
            backend,
            self._small_json("sandbox", sandbox)[1],
            None,
            None,
            None,
            None,
            None,
            None,
            session,
        )
        return self._append(fields, shown, returning, defer)

    @overload
    def record_completion(
        self,
        *,
        call_id: str,
        tool: str,
        outcome: str,
        error_type: str | None,
        duration_ms: float,
        usage: dict[str, Any] | PreparedObject | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | PreparedObject | None = None,
        decision: dict[str, Any] | PreparedObject | None = None,
        returning: Literal[True] = True,
        result_bytes: bytes | None = None,
        session: str | None = None,
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
        usage: dict[str, Any] | PreparedObject | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | PreparedObject | None = None,
        decision: dict[str, Any] | PreparedObject | None = None,
        returning: Literal[False],
        result_bytes: bytes | None = None,
        defer: bool = False,
        session: str | None = None,
    ) -> None: ...

    def record_completion(
        self,
        *,
        call_id: str,
        tool: str,
        outcome: str,
        error_type: str | None,
        duration_ms: float,
        usage: dict[str, Any] | PreparedObject | None,
        result: Any,
        backend: str | None = None,
        sandbox: dict[str, Any] | PreparedObject | None = None,
        decision: dict[str, Any] | PreparedObject | None = None,
        returning: bool = True,
        result_bytes: bytes | None = None,
        defer: bool = False,
        session: str | None = None,
    ) -> AuditRecord | None:
        """The completion record: outcome, error type, resource use, result digest and size.

        The result itself is not stored; a ``None`` result has no digest. ``returning=False``
        skips building the AuditRecord model; ``defer=True`` journals it (module doc).
        ``result_bytes`` is :meth:`canonical_result` of ``result`` when the caller already
        has it (the broker sizes results with it), so the result is serialised once per call.
        """
        if isinstance(tool, str):
            tool = self._tools.get(tool) or self._tool_name(tool)
        if (
            defer
            and type(sandbox) is PreparedObject
            and type(call_id) is str
            and type(tool) is str
            and type(backend) is str
            and type(duration_ms) is float
            and (error_type is None or type(error_type) is str)
            and (session is None or type(session) is str)
            and decision is None
            and outcome in OUTCOMES
            and (result is None or result_bytes is not None)
            and sandbox._owner() is self
            and not returning
        ):
            # The broker's hot path (see record_request): the same columns as below, in one
            # accelerator call (journal_completion) when it takes them.
            native = _canonical._journal_completion
            if native is not None and self._journal_native(
                native,
                False,
                (
                    call_id,
                    tool,
                    backend,
                    sandbox.text,
                    outcome,
                    error_type,
                    duration_ms,
                    usage,
                    None if result is None else result_bytes,
                    session,
                ),
            ):
                return None
            if type(usage) is dict:
                # _small_json's text of a usage dict, without its four frames: the encoder
                # it ends in, called directly; any error takes the full path, which raises.
                try:
                    usage_text: str | None = _canonical._encode(usage, True).decode("utf-8")
                except (ValueError, RecursionError):  # CanonicalizationError is one
                    usage_text = self._small_json("usage", usage)[1]
            else:
                usage_text = None if usage is None else self._small_json("usage", usage)[1]
            if usage_text is not None and usage_text[:1] != "{":
                raise AuditError("audit usage must be an object (a dict) or None")
            if result is None or result_bytes is None:
                digest: str | None = None
                size: int | None = None
            else:
                digest, size = _sha256(result_bytes).hexdigest(), len(result_bytes)
            self._journal_write(
                "completion",
                call_id,
                (
                    tool,
                    None,
                    None,
                    None,
                    backend,
                    sandbox.text,
                    outcome,
                    error_type,
                    duration_ms,
                    usage_text,
                    digest,
                    size,
                    session,
                ),
            )
            return None
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
        decision_shown, decision_text = self._small_json("decision", decision, redact=True)
        shown = {"decision": decision_shown}
        fields = (
            "completion",
            call_id,
            tool,
            None,
            None,
            decision_text,
            backend,
            self._small_json("sandbox", sandbox)[1],
            outcome,
            error_type,
            duration,
            self._small_json("usage", usage)[1],
            result_digest,
            result_size,
            session,
        )
        return self._append(fields, shown, returning, defer)

    def _tool_name(self, tool: str) -> str:
        """The tool column for the name ``tool``: redacted like any string, since a refused
        call's name is whatever the caller sent (a token pasted as a tool name was stored
        raw). Memoised (bounded: names come from callers)."""
        shown = self._redact.redact_str(tool)
        if len(self._tools) >= _SMALL_CACHE:
            self._tools.clear()
        self._tools[tool] = shown
        return shown

    def _keyed_digest(self, data: bytes) -> str:
        """The digest of the canonical arguments ``data`` of a call redaction changed."""
        key = self._digest_key
        if key is None:  # racing threads read (or make) the same key: no lock needed
            key = self._digest_key = digest_key(self._path, create=not self._read_only)
        return KEYED_DIGEST_PREFIX + hmac.new(key, data, "sha256").hexdigest()

    def digest_arguments(self, arguments: Any) -> str:
        """The ``arguments_digest`` a request record of this log holds for ``arguments``:
        compare it with a record's to match a call you know to its record. The sha256 of the
        canonical arguments, or, when redaction changes them, ``"hmac-sha256:"`` and their
        HMAC under this log's digest key (``<log>.digest-key``; AuditError without it), so
        that the record cannot be used to test guesses at what was redacted."""
        data = self._canonical("arguments", arguments)
        if self._redacted(arguments) != arguments:
            return self._keyed_digest(data)
        return sha256_hex(data)

    def canonical_arguments(self, arguments: Any) -> bytes:
        """The bytes a request record's ``arguments_digest`` is taken over (RFC 8785, integers
        beyond 2**53 as strings). Raises AuditError for non-JSON data."""
        try:
            # canonical_json_ijson's encoder called directly (two frames fewer per call);
            # an error or a nesting past the accelerator's depth takes the full path.
            return _canonical._encode(arguments, True)
        except (ValueError, RecursionError):  # CanonicalizationError is one
            return self._canonical("arguments", arguments)

    def canonical_result(self, result: Any) -> bytes:
        """The bytes a completion record's ``result_digest``/``result_size`` are taken over
        (RFC 8785, integers beyond 2**53 as strings). Raises AuditError for non-JSON data."""
        encode = _canonical._encode
        if encode is not _canonical._py_encode and encode is not _canonical._first_encode:
            # The accelerator: canonical_json_ijson and its _bulk variant are this one call.
            try:
                return encode(result, True)
            except (ValueError, RecursionError):  # CanonicalizationError is one
                pass  # the path below raises the error (or walks a deep value in Python)
        try:
            if type(result) is dict and len(result) <= 16:
                for value in result.values():
                    if type(value) not in _PLAIN:
                        return canonical_json_ijson_bulk(result)
                # A small flat object ({"ok": true}): the exact walk is ~4x cheaper than the
                # bulk path's encode, check and parse-back.
                return canonical_json_ijson(result)
            return canonical_json_ijson_bulk(result)
        except ValueError as exc:  # CanonicalizationError, or int text past 4300 digits
            raise AuditError(f"audit: result are not JSON data: {exc}", field="result") from exc
        except RecursionError as exc:
            raise AuditError("audit: result are nested too deeply", field="result") from exc

    def _canonical(self, what: str, value: Any) -> bytes:
        try:
            return canonical_json_ijson(value)
        except ValueError as exc:  # CanonicalizationError, or int text past 4300 digits
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

    def prepare(self, what: str, value: dict[str, Any]) -> PreparedObject:
        """``value`` ready to pass as the ``decision``, ``sandbox`` or ``usage`` (``what``) of
        this log's records, redacted and serialised once (see :class:`PreparedObject`). The
        value is copied: later changes to it do not reach the records."""
        if what not in ("decision", "sandbox", "usage"):
            raise ValueError(f"cannot prepare {what!r}: not a decision, sandbox or usage")
        source = copy.deepcopy(value)
        shown, text = self._small_json(what, source, redact=what == "decision")
        if text is None or not text.startswith("{"):
            raise AuditError(f"audit {what} must be an object (a dict)")
        return PreparedObject(self, source, shown, text)

    def _small_json(self, what: str, value: Any, *, redact: bool = False) -> tuple[Any, Any]:
        """``(shown, text)`` of a decision/sandbox/usage object: redacted (if ``redact``) and
        canonical. The broker sends the same few small objects over and over (one sandbox
        fingerprint per backend, one decision per rule), so the pair is memoised by value,
        or comes prepared (:meth:`prepare`). Usage is not memoised: real backends report
        times and counters that differ on every call, so its memo only ever missed (and
        pushed the repeating entries out)."""
        if value is None:
            return None, None
        if type(value) is PreparedObject:
            if value._owner() is self:
                return value.shown, value.text
            value = value.source
        if what == "usage" and not redact:
            return value, self._json_text(what, value)
        key = _flat_key(value)
        if key is not None:
            hit = self._small.get((what, key))
            if hit is not None:
                return hit
        shown = self._redacted(value) if redact else value
        pair = (shown, self._json_text(what, shown))
        if key is not None:
            if len(self._small) >= _SMALL_CACHE:  # keys are caller data: bound the memo
                self._small.clear()
            self._small[(what, key)] = pair
        return pair

    def _append(
        self, fields: tuple[Any, ...], shown: dict[str, Any], returning: bool, defer: bool
    ) -> AuditRecord | None:
        """Append a record; return it with ``shown`` (the redacted objects) as its JSON fields.

        Returning the objects in hand instead of re-parsing the stored text saves a JSON decode
        per field; the one difference from :meth:`tail` is that integers beyond 2**53 are
        strings in the file (I-JSON) and still integers in the returned record.
        """
        # SQLite would store an int call_id as TEXT and the hash (taken over the int) would
        # never verify again: refuse anything but text up front. The common case (exact
        # str, JSON objects as "{...}" text) is one expression; _check_fields names the
        # culprit otherwise.
        kind, call_id, tool, _, _, decision, backend, sandbox, _, error_type, _, usage, *_ = fields
        session = fields[-1]
        if not (
            type(call_id) is str
            and (session is None or type(session) is str)
            and type(tool) is str
            and (backend is None or type(backend) is str)
            and (error_type is None or type(error_type) is str)
            and (decision is None or decision[:1] == "{")
            and (sandbox is None or sandbox[:1] == "{")
            and (usage is None or usage[:1] == "{")
        ):
            _check_fields(fields)

        if defer:
            if returning:
                raise ValueError("defer=True needs returning=False: the seq is not known yet")
            self._journal_append(fields)
            return None

        def build(head_seq: int, head_hash: str | None) -> tuple[Any, ...]:
            # Runs under the write lock, and again if another writer took this seq first;
            # the time is taken here, when the record is built.
            seq, prev = head_seq + 1, head_hash or GENESIS_HASH
            row = (seq, kind, call_id, _now(), *fields[2:], prev)
            return (*row, chain_hash(prev, body_bytes((*row, None))))

        with self._write_lock:
            db = self._db(write=True)
            with self._db_lock:
                self._insert_pending_locked()
                try:
                    row = db.append(build)
                except ValueError as exc:  # text that is not UTF-8 (lone surrogates)
                    raise AuditError(
                        f"audit record for {call_id!r} is not valid text: {exc}"
                    ) from exc
                self._wal_rows += 1
                if self._wal_rows >= _CHECKPOINT_ROWS and self._thread is None:
                    # No idle thread (nothing journaled yet): checkpoint here, as SQLite's
                    # automatic checkpoint did. The record is committed: a failure is logged.
                    self._wal_rows = 0
                    try:
                        db.checkpoint()
                    except AuditError as exc:
                        log.warning("audit: %s", exc)
        if not returning:
            return None
        data = dict(zip(COLUMNS, row, strict=True))
        for name in JSON_FIELDS:
            data[name] = shown[name] if name in shown else _parse_json(data[name])
        return AuditRecord.model_validate(data)

    # -- the journal ------------------------------------------------------------------------

    def _journal_append(self, fields: tuple[Any, ...]) -> None:
        """Journal the record whose columns from ``kind`` to ``session`` but ``time`` are
        ``fields`` (checked by _append)."""
        self._journal_write(fields[0], fields[1], fields[2:])

    def _journal_native(
        self, native: Callable[..., Any], write_ahead: bool, args: tuple[Any, ...]
    ) -> bool:
        """Journal a record with the accelerator's ``journal_request`` or
        ``journal_completion`` (``native``) called on ``args``; False when it declined or the
        log needs :meth:`_journal_write`'s general path (no journal yet, closed, a failed
        batch to retry): nothing was written, the caller takes its Python path. The checks
        and errors are _journal_write's (free space first, for write-ahead records)."""
        lock = self._write_lock
        if not lock.acquire(False):
            _take(lock)
        try:
            journal = self._journal
            if journal is None or self._closed or self._failed:
                return False
            fd = journal._fd
            try:
                if write_ahead and _no_space(fd):
                    raise journal.full()
                out = native(fd, journal.size, *args)
            except OSError as exc:
                raise journal.failed(exc) from exc
            if out is None:
                return False
            if type(out) is int:
                journal.refuse(out)
            journal.size = out[1]
            self._pend(out)
        finally:
            lock.release()
        return True

    def _journal_write(self, kind: str, call_id: str, rest: tuple[Any, ...]) -> None:
        """Journal the record of ``kind`` whose columns after ``time`` (from ``tool`` to
        ``session``) are ``rest``; the time is taken here, under the write lock, so that
        journal order is time order."""
        lock = self._write_lock
        if not lock.acquire(False):
            _take(lock)
        try:
            if self._closed:
                self._db(write=True)  # raises
            if self._failed:
                # The last insertion failed: retry it now, and refuse this record (fail
                # closed) while the database still cannot take them.
                with self._db_lock:
                    self._insert_pending_locked()
            line_fields = (kind, call_id, _now(), *rest)
            write_ahead = kind == "request"
            journal = self._journal
            native = _canonical._journal_append
            # The accelerator encodes and writes the record in one call and answers (the
            # journal's size after the line, the body parts): Journal.append_fields inline,
            # one frame and ~40 opcodes less a record; its checks and errors are the
            # journal's (refuse, full, failed). None: not loaded, no journal yet, or a
            # record outside its shapes, nothing written: the Python path below, which
            # creates the journal once the record encodes.
            out: Any = None
            if journal is not None and native is not None:
                fd = journal._fd
                try:
                    # The free-space check first (os.fstatvfs is the tests' seam).
                    if write_ahead and _no_space(fd):
                        raise journal.full()
                    out = native(fd, line_fields, write_ahead, journal.size)
                except OSError as exc:
                    raise journal.failed(exc) from exc
                if type(out) is int:
                    journal.refuse(out)
                elif out is not None:
                    journal.size = out[0]
            if out is None:
                try:
                    line, parts = journal_record(line_fields)
                except ValueError as exc:  # lone surrogates: the database would refuse it too
                    raise AuditError(
                        f"audit record for {call_id!r} is not valid text: {exc}"
                    ) from exc
                if journal is None:
                    journal = self._journal = Journal(self._path)
                end = journal.append(line, write_ahead=write_ahead)
            else:
                end, parts = out
            self._pend((line_fields, end, parts))
        finally:
            lock.release()

    def _pend(self, entry: _Pending) -> None:
        """Keep a journaled record for the batch insertion (holds _write_lock): start the
        idle thread at the first, insert the batch in this thread when it is full."""
        self._pending.append(entry)
        if len(self._pending) == 1:
            self._oldest = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_idle_loop,
                    args=(weakref.ref(self), self._wake),
                    name=f"audit-idle:{self._path.name}",
                    daemon=True,
                )
                self._thread.start()
        elif len(self._pending) >= _BATCH and len(self._pending) >= self._retry_at:
            # Group commit in the appending thread: no second thread competes for the
            # GIL on the hot path. This record is in the journal already; if the
            # insertion fails it is kept, and the next append retries and refuses.
            with self._db_lock:
                try:
                    wait = len(self._pending) >= _BATCH_MAX
                    if self._insert_pending_locked(wait=wait):
                        self._rotate_locked()
                    else:  # another writer holds the lock: try again a little later
                        self._retry_at = len(self._pending) + _RETRY_EVERY
                except AuditError as exc:
                    log.error("audit: %s (records kept in the journal)", exc)

    def _insert_pending_locked(self, *, wait: bool = True) -> bool:
        """Insert the failed and pending records, in order. Holds _write_lock and _db_lock.
        With ``wait=False``, returns False (records kept pending) when another writer holds
        SQLite's write lock."""
        batch, self._pending = self._pending, []
        try:
            self._insert_locked(batch, wait=wait)
        except WriterBusy:
            self._pending = batch
            return False
        self._retry_at = 0
        return True

    def _insert_locked(self, batch: list[_Pending], *, wait: bool = True) -> None:
        """Insert ``batch`` after any earlier failed one. Holds _db_lock; on failure the
        records are kept for the next attempt (they are in the journal anyway). Raises
        WriterBusy (``wait=False``), with nothing changed, when another writer holds the
        lock."""
        failed = self._failed
        if failed:
            batch = failed + batch
        self._failed = []
        if not batch:
            return
        assert self._journal is not None
        try:
            self._db(write=True).append_batch(
                _chain(batch),  # (fields, end, parts): chain_rows reads first and last
                (self._journal.name, batch[-1][1]),
                wait=wait,
            )
        except WriterBusy:
            self._failed = failed
            raise
        except BaseException:
            self._failed = batch
            raise
        self._wal_rows += len(batch)

    def flush(self) -> None:
        """Insert every journaled record of this log into the database now."""
        with self._write_lock:
            self._db(write=True)
            with self._db_lock:
                self._insert_pending_locked()

    def _idle_flush(self) -> bool:
        """One tick of the idle flusher: insert records that waited longer than _IDLE_S (no
        batch filled up, no read flushed them), so other processes see them soon. False
        once the log is closing."""
        with self._write_lock:
            if self._stopping or self._closed:
                return False
            if not (self._pending or self._failed):
                return True
            waited = time.monotonic() - self._oldest
            if self._pending and waited < _IDLE_S:
                return True
            with self._db_lock:
                try:
                    if self._insert_pending_locked(wait=waited >= _IDLE_WAIT_S):
                        self._rotate_locked()
                except AuditError as exc:
                    log.error("audit: %s (records kept in the journal)", exc)
                except Exception:
                    log.exception("audit: inserting journaled records failed")
        return True

    def _idle_checkpoint(self) -> None:
        """The idle thread's checkpoint, once _CHECKPOINT_ROWS records were inserted since
        the last, or while rotated journals wait for one (_rotate_locked): on the reader
        connection, holding neither the write nor the database lock, so appends and batch
        insertions go on while it copies and fsyncs. A complete one removes those journals."""
        with self._db_lock:
            # Rotated before the checkpoint begins: their records are in the WAL it copies.
            retired = list(self._retired)
            if self._wal_rows < _CHECKPOINT_ROWS and not retired:
                return
            self._wal_rows = 0
        with self._read_lock:
            try:
                complete = self._db(write=False).checkpoint()
            except AuditError as exc:  # closed meanwhile, or the file is busy: next time
                log.warning("audit: %s", exc)
                return
        if complete and retired:  # else a reader held frames back: next tick
            with self._db_lock:
                if not self._closed:
                    self._drop_retired(retired)

    def _drop_retired(self, retired: list[Journal]) -> None:
        """Remove the rotated journals ``retired``, whose records a complete checkpoint put
        in the database file, and forget them. Holds _db_lock."""
        for journal in retired:
            journal.remove()
            journal.close()
            self._retired.remove(journal)
            # Fails harmlessly: a row for a removed journal is dropped at the next open.
            with contextlib.suppress(AuditError):
                self._db(write=True).set_journal(journal.name, None)

    def _rotate_locked(self) -> None:
        """Swap a large, fully inserted journal for a fresh file (bounds its size). Holds
        _write_lock and _db_lock.

        Hazard: inserted is not enough. Its records are in the WAL until a checkpoint copies
        them into the database file, and a ``-wal`` removed meanwhile (then the broker
        killed) took them along with the journal, for good, while verify passed what was
        left. So the old journal is kept (open and locked, its inserted offset recorded)
        until a complete checkpoint covered it: the idle thread's next one (at its next
        tick), or the next opener's (after a crash). A reader holding every checkpoint back
        keeps them all (one file per _ROTATE_BYTES)."""
        journal = self._journal
        if journal is None or journal.size < _ROTATE_BYTES or self._pending or self._failed:
            return
        self._journal = Journal(self._path)
        self._retired.append(journal)

    def _recover(self) -> None:
        """Insert the records of journals whose owner died (crash recovery), then drop them
        once a checkpoint put them in the database file (kept otherwise, with their inserted
        offsets, for the next opener: see _rotate_locked)."""
        db = self._db(write=True)
        with dead_journals(self._path) as found:
            for name, path, content in found:
                applied = db.journal_applied(name)
                lines = list(parse_lines(content[applied:], str(path)))
                if lines:
                    try:
                        records = [(fields, body_parts((None, *fields))) for _, fields in lines]
                    except ValueError as exc:  # a line whose text cannot be stored
                        raise AuditError(
                            f"audit journal {path} holds a record that is not valid text: {exc}",
                            path=str(path),
                        ) from exc
                    db.append_batch(_chain(records), (name, applied + lines[-1][0]))
                    log.warning(
                        "audit: recovered %d record(s) from the journal of a broker that "
                        "stopped without closing its log (%s)",
                        len(lines),
                        path.name,
                    )
            if found and db.checkpoint():
                for name, path, _ in found:
                    with contextlib.suppress(OSError):
                        path.unlink()
                    db.set_journal(name, None)
        # Bookkeeping rows whose journal is gone (removed, then the owner died before it
        # forgot the row).
        try:
            names = [r[0] for r in db.conn.execute("SELECT name FROM audit_journals")]
        except sqlite3.Error as exc:
            raise db.fail("journal bookkeeping", exc) from exc
        for name in names:
            if not (self._path.parent / name).exists():
                db.set_journal(name, None)

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
            # A text column edited into bytes that are not UTF-8 is a verdict (that record
            # does not hold canonical data), not an error that stops the walk.
            factory, conn.text_factory = conn.text_factory, _text_or_bytes
            try:
                report = verify_rows(db.rows(conn), high_water=high, expected_head=expected_head)
            finally:
                conn.text_factory = factory
            pending = self._unrecovered(conn) if self._read_only else 0
            if not pending:
                return report
            return dataclasses.replace(
                report,
                pending=pending,
                reason=f"{report.reason}; {pending} record(s) in the journal of a broker that "
                "stopped without closing the log are not in the chain yet (not verified): "
                "the next writer to open the log inserts them",
            )

        return self._read("verify", run)

    def _unrecovered(self, conn: Any) -> int:
        """Complete lines past the inserted offset in the journals of dead owners (a read-only
        reader cannot insert them). A line is counted, not parsed: a damaged one is the next
        writer's to refuse. Hazard: each journal is locked while it is read, so a writer
        opening the log in that instant takes the reader for its owner and leaves it for the
        next opener (records stay pending, none is lost)."""
        try:
            applied = dict(conn.execute("SELECT name, applied FROM audit_journals").fetchall())
        except sqlite3.OperationalError:  # a log written before the journal existed
            applied = {}
        with dead_journals(self._path) as found:
            return sum(
                content[int(applied.get(name, 0)) :].count(b"\n") for name, _, content in found
            )

    def tail(self, n: int = 20) -> list[AuditRecord]:
        """The last ``n`` records, oldest first."""
        if n <= 0:
            return []
        return self._read(
            "tail", lambda db, conn: [row_to_record(r) for r in db.last_rows(conn, n)]
        )

    def interrupted(self) -> list[str]:
        """The call_id of every request record without a completion, in log order (an id
        once per such request).

        Meant for start-up: while other brokers write to the same file, their in-flight
        calls are listed too.

        A call_id is the caller's (a provider's ``toolu_…``, reused across runs): requests
        and completions are paired per id as a stack, each completion closing the latest
        open request of its id. The pairing was "an id's last record": a request killed
        mid-call, then a second call under the same id that completed, read as no
        interrupted call at all. Hazard left: of two open requests under one id, which one
        a completion closed is not in the records (the count is): the completion names no
        request of its own (that needs a broker-minted column, a schema change).
        """

        def run(db: Database, conn: Any) -> list[str]:
            open_requests: dict[str, list[int]] = {}
            for seq, call_id, kind in conn.execute(
                "SELECT seq, call_id, kind FROM audit_records ORDER BY seq"
            ):
                if kind == "request":
                    open_requests.setdefault(call_id, []).append(seq)
                elif kind == "completion":
                    seqs = open_requests.get(call_id)
                    if seqs:
                        seqs.pop()
            pending = sorted(
                (seq, call_id) for call_id, seqs in open_requests.items() for seq in seqs
            )
            return [call_id for _, call_id in pending]

        return self._read("interrupted", run)

    def export_jsonl(self, out: TextIO) -> int:
        """Write every record as one JSON line with OpenTelemetry GenAI keys; return the count."""

        def run(db: Database, conn: Any) -> int:
            count = 0
            for row in db.rows(conn):
                out.write(json_line(otel_record(row_to_record(row))))
                count += 1
            return count

        return self._read("export", run)

    def _read(self, action: str, fn: Callable[[Database, Any], _T]) -> _T:
        if self._pending or self._failed:
            self.flush()  # this log's journaled records are part of what it reads
        with self._read_lock:
            db = self._db(write=False)
            try:
                with db.snapshot(action) as conn:
                    return fn(db, conn)
            # A row someone edited into nonsense: bad JSON, a BLOB where text belongs, text
            # that is not UTF-8 (sqlite3 says it could not decode the column).
            except (ValueError, RecursionError, TypeError) as exc:
                raise self._malformed(action, exc) from exc
            except sqlite3.OperationalError as exc:
                if "decode" not in str(exc):
                    raise
                raise self._malformed(action, exc) from exc

    def _malformed(self, action: str, exc: Exception) -> AuditError:
        return AuditError(
            f"audit log {self._path}: {action} found a malformed record (run verify): {exc}",
            path=str(self._path),
        )

    def _db(self, *, write: bool) -> Database:
        if self._closed:
            if self._forked:
                raise AuditError(
                    f"audit log {self._path} was opened before fork(): it is the parent "
                    "process's; open a new AuditLog (or broker) in the child",
                    path=str(self._path),
                    reason="forked",
                )
            raise AuditError(f"audit log {self._path} is closed", path=str(self._path))
        if write:
            if self._writer is None:
                raise AuditError(f"audit log {self._path} is open read-only", path=str(self._path))
            return self._writer
        if self._reader is None:
            self._reader = Database(self._path, busy_timeout_s=self._timeout, create=False)
        return self._reader

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Insert the journaled records, remove the journal, close the database.

        If the records cannot be inserted now, the journal is kept: the next AuditLog opened
        on this file inserts them (as after a crash).
        """
        thread = self._thread
        if thread is not None:
            with self._write_lock:
                self._stopping = True
                self._wake.set()
            thread.join()
            self._thread = None
        with self._write_lock, self._read_lock:
            if self._closed:
                return
            journal = self._journal
            if journal is not None:
                with self._db_lock:
                    try:
                        self._insert_pending_locked()
                    except AuditError as exc:
                        log.error("audit: %s; journal %s kept for recovery", exc, journal.path)
                        journal.close()
                    else:
                        self._retired.append(journal)
                self._journal = None
            with self._db_lock:
                retired, self._retired = self._retired, []
                # Removed only once their records are in the database file, not just in the
                # WAL (see _rotate_locked); else kept for the next opener, which removes them.
                try:
                    durable = bool(retired) and self._db(write=True).checkpoint()
                except AuditError as exc:
                    log.warning("audit: %s; journals kept for the next opener", exc)
                    durable = False
                for old in retired:
                    if durable:
                        old.remove()
                        with contextlib.suppress(AuditError):
                            self._db(write=True).set_journal(old.name, None)
                    old.close()
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


def _text_or_bytes(raw: bytes) -> str | bytes:
    """A TEXT column as str, or its bytes when they are not UTF-8 (verify reports that
    record instead of failing: sqlite3's default factory raises mid-walk)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw
