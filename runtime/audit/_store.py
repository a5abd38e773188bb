"""The SQLite file under the audit log: connections, schema, and sqlite errors → AuditError.

Why these settings:

- WAL + ``synchronous=NORMAL``: a commit is a ``write()`` to the WAL, no fsync. Committed
  records survive the broker being killed (SIGKILL, OOM); the last commits may be lost on power
  failure or a kernel crash, and WAL recovery still leaves a valid prefix of the chain.
- Appends are optimistic: the head ``(seq, hash)`` is cached per connection and each record is
  one autocommit INSERT with ``seq = head + 1``. The PRIMARY KEY on ``seq`` is the
  compare-and-swap: if any other connection (thread, process) appended since, that seq exists,
  the INSERT fails with SQLITE_CONSTRAINT_PRIMARYKEY, and the head is re-read and the record
  rebuilt. So several writers still extend one chain, with one statement per record instead
  of BEGIN IMMEDIATE / read head / INSERT / COMMIT (measured: ~25 % less CPU per record;
  ``PRAGMA data_version`` to validate a cached head would cost a statement as well).
  ``busy_timeout`` bounds lock waits, after which the append fails closed.
- ``STRICT`` table: a column cannot silently change type, which would change the hashed body.
- ``AUTOINCREMENT``: SQLite keeps the highest seq ever inserted in ``sqlite_sequence``. It is the
  in-file high-water mark that lets verify() notice records deleted from the tail.
- Triggers refuse UPDATE and DELETE. They stop mistakes and casual edits, not an attacker with
  write access to the file (who can drop them); the hash chain and an external anchor do that.
- Owner-only files: the database is created 0600 before SQLite opens it (SQLite would use
  the umask, 0644 by default: every local user could read every call's arguments), which
  gives its -wal and -shm the same mode; an existing database, -wal or -shm of ours that is
  group or world readable is tightened to the owner's bits when a writer opens it. The
  journals (``_journal``) and the digest key (``_digestkey``) are 0600 as well.
- Schema version 2 added the ``session`` column. A version 1 log is migrated in place when a
  writer opens it (``ALTER TABLE ... ADD COLUMN``: no row is rewritten, the old records keep
  a null session and their hashes, see ``_record``); a read-only opener reads it as is, with
  a null session in every row.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import shutil
import sqlite3
import stat
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runtime._fsio import describe_kind, private_file
from runtime.audit._journal import journal_names
from runtime.audit._record import COLUMNS
from runtime.errors import AuditError, AuditFileRefused

__all__ = ["SCHEMA_VERSION", "Database", "WriterBusy", "refuse_foreign_database"]

log = logging.getLogger("runtime.audit")

SCHEMA_VERSION = 2
# Versions this runtime opens: 1 is migrated to 2 by a writer (module doc).
_READABLE_VERSIONS = (0, 1, SCHEMA_VERSION)

_SCHEMA: tuple[str, ...] = (
    """
CREATE TABLE IF NOT EXISTS audit_records (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    time             TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments_digest TEXT,
    arguments        TEXT,
    decision         TEXT,
    backend          TEXT,
    sandbox          TEXT,
    outcome          TEXT,
    error_type       TEXT,
    duration_ms      REAL,
    usage            TEXT,
    result_digest    TEXT,
    result_size      INTEGER,
    session          TEXT,
    prev_hash        TEXT NOT NULL,
    hash             TEXT NOT NULL
) STRICT
""",
    """
CREATE TRIGGER IF NOT EXISTS audit_records_no_update BEFORE UPDATE ON audit_records
BEGIN SELECT RAISE(ABORT, 'audit log is append-only: UPDATE refused'); END
""",
    """
CREATE TRIGGER IF NOT EXISTS audit_records_no_delete BEFORE DELETE ON audit_records
BEGIN SELECT RAISE(ABORT, 'audit log is append-only: DELETE refused'); END
""",
    # How many bytes of each live write-ahead journal (see _journal) are in audit_records,
    # updated in the same transaction as the records. Not part of the chain: bookkeeping.
    """
CREATE TABLE IF NOT EXISTS audit_journals (
    name    TEXT PRIMARY KEY,
    applied INTEGER NOT NULL
) STRICT
""",
)

_SELECT = f"SELECT {', '.join(COLUMNS)} FROM audit_records"  # noqa: S608 - constant names
_ADD_SESSION = "ALTER TABLE audit_records ADD COLUMN session TEXT"


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {str(r[1]) for r in conn.execute("PRAGMA table_info(audit_records)")}


def _select_for(present: set[str]) -> str:
    """The SELECT of :data:`COLUMNS` from a table that has the columns ``present``: a
    column a version 1 log lacks (``session``) reads as null."""
    if not present or present >= set(COLUMNS):
        return _SELECT
    names = (c if c in present else f"NULL AS {c}" for c in COLUMNS)
    return f"SELECT {', '.join(names)} FROM audit_records"  # noqa: S608 - constant names


_INSERT = (
    f"INSERT INTO audit_records ({', '.join(COLUMNS)}) "  # noqa: S608 - constant names
    f"VALUES ({', '.join('?' for _ in COLUMNS)})"
)
# Rows per multi-row INSERT (19 x 256 parameters, far below SQLite's 32766). One statement
# per batch instead of one execution per row: with AUTOINCREMENT, SQLite updates
# sqlite_sequence at the end of every INSERT statement, once per row under executemany.
_ROWS_PER_INSERT = 256


@functools.lru_cache(maxsize=16)
def _insert_rows(n: int) -> str:
    """An INSERT of ``n`` rows (a few sizes recur: full batches and their remainders)."""
    one = "(" + ", ".join("?" for _ in COLUMNS) + ")"
    return _INSERT.split(" VALUES ", maxsplit=1)[0] + " VALUES " + ", ".join([one] * n)


_HEAD = "SELECT seq, hash FROM audit_records ORDER BY seq DESC LIMIT 1"
_HAS_RECORDS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'audit_records'"
_SET_APPLIED = (
    "INSERT INTO audit_journals (name, applied) VALUES (?, ?) "
    "ON CONFLICT (name) DO UPDATE SET applied = excluded.applied"
)


class WriterBusy(Exception):
    """``append_batch(..., wait=False)`` found SQLite's write lock held by another connection
    (another broker process inserting its batch); nothing was written or changed."""


#: SQLite primary result codes of "this file cannot be written here" (read-only file or file
#: system, or a directory where the WAL index -shm cannot be made).
SQLITE_READONLY = 8
SQLITE_CANTOPEN = 14


def _connect(target: Path | str, busy_timeout_s: float) -> sqlite3.Connection:
    """The audit log's connection settings, one place: autocommit (the owner begins its own
    transactions), shared across the owner's threads (the owner holds a lock). A ``str``
    target is an SQLite URI."""
    return sqlite3.connect(
        target,
        uri=isinstance(target, str),
        timeout=busy_timeout_s,
        isolation_level=None,
        check_same_thread=False,
    )


def _connect_read_only(path: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, Path | None]:
    """A connection that never writes the file, and the private directory it reads from (or
    None), which the caller removes when done.

    ``mode=ro`` still needs the WAL index (-shm) of a WAL database, which a reader without
    write access to the directory cannot create. Then, if the WAL holds frames, the file and
    its WAL are copied into a private directory and the copy is opened (SQLite replays the WAL
    into the copy): ``immutable=1`` would read the database file alone, without the records
    not yet checkpointed (a log whose writer was killed, a copy taken without its -shm), and
    verify() would walk a stale prefix, or fail on a file whose schema is still in the WAL.
    With no WAL frames the file alone is the whole log: ``immutable=1`` reads it in place."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    conn = _connect(uri, busy_timeout_s)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        conn.close()
        if exc.sqlite_errorcode & 0xFF not in (SQLITE_READONLY, SQLITE_CANTOPEN):
            raise
        wal = path.with_name(path.name + "-wal")
        try:
            has_frames = wal.stat().st_size > 0
        except FileNotFoundError:
            has_frames = False
        if has_frames:
            return _copy_with_wal(path, wal, busy_timeout_s)
        conn = _connect(f"{uri}&immutable=1", busy_timeout_s)
    return conn, None


_COPY_TRIES = 5


def _copy_with_wal(path: Path, wal: Path, busy_timeout_s: float) -> tuple[sqlite3.Connection, Path]:
    """Open a private copy of ``path`` and ``wal``. A writer may checkpoint or append while
    the two are copied: the copy is kept only if neither file changed (size, mtime, inode)
    across it, else taken again; SQLite ignores a torn last WAL frame (checksums)."""

    def state(p: Path) -> tuple[int, int, int, int]:
        st = p.stat()
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    for _ in range(_COPY_TRIES):
        scratch = Path(tempfile.mkdtemp(prefix="runtime-audit-ro-"))
        try:
            before = (state(path), state(wal))
            copy = scratch / "audit.db"
            shutil.copyfile(path, copy)
            shutil.copyfile(wal, scratch / "audit.db-wal")
            if (state(path), state(wal)) == before:
                conn = _connect(copy, busy_timeout_s)
                try:
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                except BaseException:
                    conn.close()
                    raise
                return conn, scratch
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        shutil.rmtree(scratch, ignore_errors=True)
    raise sqlite3.OperationalError(
        f"the log and its WAL kept changing while they were copied for reading "
        f"({_COPY_TRIES} tries)"
    )


def _private(path: Path, *, create: bool) -> None:
    """:func:`~runtime._fsio.private_file` for the log's files: the database (created 0600
    before SQLite opens it, so its -wal and -shm are 0600 too) and its -wal/-shm. The owner's
    files that are group or world readable (made by an earlier runtime) are tightened.
    Errors are left to SQLite's open, which reports them as before (a read-only directory
    or file system, someone else's file)."""
    try:
        private_file(path, create=create)
    except OSError as exc:
        log.debug("audit: cannot check the mode of %s: %s", path, exc)


def _check_regular(path: Path) -> None:
    """AuditFileRefused unless ``path`` (a symlink followed: a name the user gave) is absent
    or a regular file. SQLite opened a FIFO or a device (``--audit /dev/null`` meant as "no
    log") and then failed with "disk I/O error": exit 70, as if the disk had failed, where
    the name was the user's to change (``audit verify`` already refused it, exit 64)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError:
        return  # SQLite's open reports it (a directory it cannot search, a link loop)
    if not stat.S_ISREG(st.st_mode):
        raise AuditFileRefused(
            f"audit log {path} is not a regular file ({describe_kind(st.st_mode)}); the "
            "log is not opened: name a file for it (--audit PATH)",
            path=str(path),
        )


#: The first 16 bytes of every SQLite database file (its header string).
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The columns an audit log's ``audit_records`` has in every schema version this runtime
#: opens: version 1 lacked ``session`` (migrated in place by a writer, module doc).
_LOG_COLUMNS = frozenset(COLUMNS) - {"session"}


def _not_sqlite(path: Path) -> bool:
    """True when ``path`` is a non-empty file that does not begin with SQLite's header (a
    text file named by mistake). False when it does, is empty, or cannot be read (left to
    the caller's open, whose error says why)."""
    try:
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError:
        return False
    return bool(head) and head != _SQLITE_MAGIC


def _foreign_shape(path: Path) -> tuple[list[str], list[str]] | None:
    """``(tables, columns)`` of the SQLite database at ``path`` when it is not an audit log:
    its tables, and the columns of its ``audit_records`` (none when it has no such table).
    None when it is a log (or a database with no tables yet), or when SQLite cannot read it
    this way (absent, not readable: left to the caller's open, whose error says why). Looked
    at read-only (``mode=ro``: nothing is written, no journal mode changed).

    Why the columns and not the table's name: another program's database may have a table
    of its own called ``audit_records`` (an application's audit trail); taken for a log, it
    was switched to WAL, given our columns, tables and triggers, and its own UPDATEs
    refused. Any table with every column a log has had is a log: a version 1 log (no
    ``session``) still opens, a newer runtime's (more columns) gets the version error."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except (sqlite3.Error, OSError, ValueError):
        return None
    try:
        tables = [str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master")]
        columns = (
            [str(r[1]) for r in conn.execute("PRAGMA table_info(audit_records)")]
            if "audit_records" in tables
            else []
        )
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return None if set(columns) >= _LOG_COLUMNS else (tables, columns)


def _refused(path: Path, what: str) -> AuditFileRefused:
    return AuditFileRefused(f"{path} {what}; left untouched", path=str(path))


def refuse_foreign_database(path: Path, *, allow_no_tables: bool) -> None:
    """Raise AuditFileRefused when ``path`` is a file but not an audit log: not a SQLite
    database at all (a text file), or a database without an audit log in it (another
    program's, or a log path mistyped into a neighbouring database). One check for the
    readers (``audit verify|tail|export``) and the writer (``Database(create=True)``), made
    before anything changes the file: a reader would call its zero records a fine log; a
    writer would tighten its mode to 0600, switch it to WAL and add the audit tables to the
    other program's data (or tighten a text file's mode, then fail to open it).

    ``allow_no_tables``: a database with no tables of its own (only ``sqlite_`` ones, or an
    empty file) is a log to start, for a writer; a reader has nothing to read in it."""
    if not path.is_file() or path.stat().st_size == 0:
        return  # absent, empty (a log to create) or not a file (_check_regular's)
    if _not_sqlite(path):
        raise _refused(path, "is not a SQLite database (it does not begin with SQLite's header)")
    shape = _foreign_shape(path)
    if shape is None:
        return
    tables, columns = shape
    own = sorted(t for t in tables if not t.startswith("sqlite_"))
    if allow_no_tables and not own:
        return
    found = f"its tables: {', '.join(own) or 'none'}"
    if columns:
        # Named: a table of the log's name that is not the log's is the surprise here.
        missing = [c for c in COLUMNS if c in _LOG_COLUMNS and c not in columns]
        found += (
            f"; its audit_records has the columns {', '.join(columns)}, without the log's "
            f"{', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}"
        )
    raise _refused(path, f"is a SQLite database but not an audit log ({found})")


def _missing_parent(path: Path) -> AuditFileRefused | None:
    """The error for a log whose directory does not exist, else None. Not created: a
    mistyped ``--audit`` (``/var/lgo/a.db``) made a directory tree wherever it said, and
    the log nobody would look for in it."""
    parent = path.parent
    if parent.is_dir():
        return None
    what = "is not a directory" if parent.exists() else "does not exist"
    return AuditFileRefused(
        f"audit log {path}: its directory {parent} {what}; create it first, or name a log "
        "in an existing directory (--audit PATH)",
        path=str(path),
    )


def _ident(path: Path) -> tuple[int, int]:
    """``(st_dev, st_ino)`` of ``path``. Raises OSError."""
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _wal_mode(conn: sqlite3.Connection, timeout_s: float) -> str:
    """``PRAGMA journal_mode=WAL``'s answer, the switch retried for up to ``timeout_s`` while
    another connection holds the file. Hazard: where waiting could deadlock (two processes
    creating the same new log at the same moment, each with a shared lock, one needing the
    exclusive lock the switch takes) SQLite answers SQLITE_BUSY at once, without calling the
    busy handler; the log then failed to open ("database is locked", about one start in 30
    with four openers). The retry backs off from 1 ms to 50 ms; the other opener's switch or
    schema transaction is over within a few ms."""
    deadline = time.monotonic() + timeout_s
    delay = 0.001
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


class Database:
    """One SQLite connection on the audit file. Not thread-safe: the owner holds a lock.

    ``close()`` is idempotent; any use after it raises AuditError.
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_s: float,
        create: bool,
        autocheckpoint: bool = True,
        read_only: bool = False,
    ) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        # The private copy a read-only reader opened instead (_connect_read_only), or None.
        self._scratch: Path | None = None
        self._ident: tuple[int, int] | None = None
        # The writer's -wal (dev, ino), checked with the database's (_check_file).
        self._wal = path.with_name(path.name + "-wal")
        self._wal_ident: tuple[int, int] | None = None
        self._timeout = busy_timeout_s
        # (seq, hash) of the last record this connection knows of; None = read it.
        self._head: tuple[int, str | None] | None = None
        self._select = _SELECT
        try:
            _check_regular(path)
            if create:
                # Before anything changes the file (its mode, WAL, the schema).
                refuse_foreign_database(path, allow_no_tables=True)
                missing = _missing_parent(path)
                if missing is not None:
                    raise missing
                _private(path, create=True)
            if read_only:
                self._conn, self._scratch = _connect_read_only(path, busy_timeout_s)
            else:
                self._conn = _connect(path, busy_timeout_s)
            if create:
                self._init_schema()
                # Made by an earlier runtime (or SQLite) with the umask's mode: closed now.
                for suffix in ("-wal", "-shm"):
                    _private(path.with_name(path.name + suffix), create=False)
            else:
                self._select = _select_for(_columns(self._conn))
            if not autocheckpoint:
                # The owner checkpoints (checkpoint()), off its hot path: SQLite's automatic
                # checkpoint runs inside the COMMIT that crosses 1000 WAL pages, fsyncs
                # included (~20 ms here), in the thread that committed.
                self._conn.execute("PRAGMA wal_autocheckpoint=0")
            st = os.stat(path)
            self._ident = (st.st_dev, st.st_ino)
            if create:
                with contextlib.suppress(FileNotFoundError):  # then it is not checked
                    self._wal_ident = _ident(self._wal)
        except AuditError:
            self.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            self.close()
            raise AuditError(f"cannot open audit log {path}: {exc}", path=str(path)) from exc

    def _init_schema(self) -> None:
        conn = self.conn
        mode = _wal_mode(conn, self._timeout)
        if mode != "wal":
            raise sqlite3.OperationalError(f"journal_mode is {mode!r}, WAL is required")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version not in _READABLE_VERSIONS:
                raise sqlite3.DatabaseError(
                    f"schema version {version}, this runtime reads {SCHEMA_VERSION}"
                )
            if not conn.execute(_HAS_RECORDS).fetchone():
                self._refuse_new_chain()
            # Not executescript(): it COMMITs the open transaction first.
            for statement in _SCHEMA:
                conn.execute(statement)
            if "session" not in _columns(conn):
                # A version 1 log (CREATE TABLE IF NOT EXISTS left its table as it was).
                # In the same transaction as the version bump: two openers migrating at
                # once take turns under BEGIN IMMEDIATE, and the second finds the column.
                conn.execute(_ADD_SESSION)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _refuse_new_chain(self) -> None:
        """Raise AuditError when journals lie beside a database without its records table.

        Why: a journal exists only once a log's schema was committed (the first writer
        creates it before any record is journaled), so a table-less database with journals
        beside it lost its schema and records since: its ``-wal`` removed (the schema and
        every record not yet checkpointed were only there), the file replaced. Writing the
        schema again would start a new chain at seq 1 and recover the journals into it, and
        verify would then call the remains a whole log. Refused under the write lock (no
        other opener can create the schema meanwhile), nothing written."""
        names = journal_names(self.path)
        if not names:
            return
        shown = ", ".join(p.name for p in names[:3]) + (", ..." if len(names) > 3 else "")
        raise AuditError(
            f"audit log {self.path} has no records table, but journals of an earlier log are "
            f"beside it ({shown}): its records were lost (its -wal removed, the file "
            "replaced?); not starting a new chain in it. Keep the journals to inspect them; "
            "move them away (and the database) to start a new log",
            path=str(self.path),
        )

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise AuditError(f"audit log {self.path} is closed", path=str(self.path))
        return self._conn

    def fail(self, action: str, exc: BaseException) -> AuditError:
        """The AuditError for a failed ``action``; the caller raises it ``from exc``."""
        return AuditError(f"audit log {self.path}: {action} failed: {exc}", path=str(self.path))

    # -- writes -----------------------------------------------------------------------------

    def append(self, build: Any) -> tuple[Any, ...]:
        """Insert the row ``build(head_seq, head_hash)`` returns, as the record after the head.

        ``build`` may run more than once (when another writer got there first); the row must
        carry ``seq = head_seq + 1`` first and its hash last. Returns the inserted row.
        """
        conn = self.conn
        deadline = time.monotonic() + self._timeout
        while True:
            self._check_file()
            try:
                if self._head is None:
                    self._head = self.head(conn) or (0, None)
                row: tuple[Any, ...] = build(*self._head)
                conn.execute(_INSERT, row)
            except sqlite3.IntegrityError as exc:
                self._head = None
                if exc.sqlite_errorcode != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
                    raise self.fail("append", exc) from exc
                if time.monotonic() > deadline:
                    raise self.fail("append (other writers kept winning)", exc) from exc
                continue  # another writer appended this seq: rebuild on the new head
            except sqlite3.Error as exc:
                self._head = None
                raise self.fail("append", exc) from exc
            self._head = (row[0], row[-1])
            return row

    def append_batch(
        self, build: Any, journal: tuple[str, int] | None = None, *, wait: bool = True
    ) -> tuple[Any, ...] | None:
        """Insert the rows ``build(head_seq, head_hash)`` returns, in one transaction.

        ``journal = (name, applied)`` records, in the same transaction, that the journal
        ``name`` is in the database up to byte ``applied``. Returns the last row inserted.
        The write lock is taken up front (BEGIN IMMEDIATE), so the head read inside cannot
        be overtaken by another writer; nothing is retried. ``wait=False`` does not wait for
        a write lock another connection holds: it raises :class:`WriterBusy` at once.
        """
        conn = self.conn
        self._check_file()
        try:
            if wait:
                conn.execute("BEGIN IMMEDIATE")
            else:
                self._begin_now(conn)
            try:
                head = self.head(conn) or (0, None)
                rows: list[tuple[Any, ...]] = build(*head)
                for i in range(0, len(rows), _ROWS_PER_INSERT):
                    chunk = rows[i : i + _ROWS_PER_INSERT]
                    conn.execute(_insert_rows(len(chunk)), list(itertools.chain(*chunk)))
                if journal is not None:
                    conn.execute(_SET_APPLIED, journal)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            self._head = None
            raise self.fail("append", exc) from exc
        last = rows[-1] if rows else None
        self._head = (last[0], last[-1]) if last is not None else None
        return last

    def _begin_now(self, conn: sqlite3.Connection) -> None:
        """BEGIN IMMEDIATE without SQLite's busy handler, which sleeps 1, 2, 5, 10 ms...
        between tries while another process holds the write lock (for as long as its batch
        takes): :class:`WriterBusy` instead. The timeout is restored whatever happens."""
        conn.execute("PRAGMA busy_timeout=0")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                raise WriterBusy(str(exc)) from exc
            raise
        finally:
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout * 1000)}")

    def checkpoint(self) -> bool:
        """Copy the WAL's committed pages into the database file (PASSIVE: never waits for
        readers or writers; what they hold back is copied next time). True when every frame
        the WAL held when it began is now in the database file (the pragma's row: not busy,
        as many frames checkpointed as in the log): then whatever was committed before it
        no longer depends on the ``-wal`` file (see ``AuditLog``'s journal removal)."""
        try:
            row = self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            raise self.fail("checkpoint", exc) from exc
        if row is None:
            return False
        busy, frames, done = row
        return bool(busy == 0 and frames >= 0 and done == frames)

    def journal_applied(self, name: str) -> int:
        """Bytes of journal ``name`` already in the database (0 if none)."""
        try:
            row = self.conn.execute(
                "SELECT applied FROM audit_journals WHERE name = ?", (name,)
            ).fetchone()
        except sqlite3.Error as exc:
            raise self.fail("journal lookup", exc) from exc
        return int(row[0]) if row else 0

    def set_journal(self, name: str, applied: int | None) -> None:
        """Record ``applied`` for journal ``name``; None forgets the journal."""
        try:
            if applied is None:
                self.conn.execute("DELETE FROM audit_journals WHERE name = ?", (name,))
            else:
                self.conn.execute(_SET_APPLIED, (name, applied))
        except sqlite3.Error as exc:
            raise self.fail("journal bookkeeping", exc) from exc

    def _check_file(self) -> None:
        # Hazard: SQLite in WAL mode keeps writing to a database file that was unlinked or
        # renamed away (its directory removed, a log rotation gone wrong), so records would
        # vanish with the inode. Checked under the write lock, before each append.
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise AuditError(
                f"audit log {self.path} was removed while open: {exc}", path=str(self.path)
            ) from exc
        if (st.st_dev, st.st_ino) != self._ident:
            raise AuditError(
                f"audit log {self.path} was replaced by another file while open",
                path=str(self.path),
            )
        # Hazard: the same for the -wal. SQLite keeps writing the commits to the -wal it has
        # open, unlinked or not, and a later opener finds a WAL without them (a new, empty
        # one): every record since the last checkpoint would be lost once this process
        # dies, while verify still passes. SQLite itself removes the -wal only when the
        # last connection closes, and this one is open: a -wal gone or replaced under it is
        # someone else's doing. One stat, under the write lock, per batch (per record of a
        # synchronous append). Fail closed: the journal keeps the records not yet
        # checkpointed (the log removes a journal only once a checkpoint covered it).
        if self._wal_ident is None:
            return
        try:
            wal = _ident(self._wal)
        except OSError as exc:
            wal = None
            why = f"{exc.strerror or exc}"
        else:
            why = "another file has its name"
        if wal != self._wal_ident:
            raise AuditError(
                f"audit log {self.path}: its write-ahead file {self._wal.name} was removed or "
                f"replaced while open ({why}); records are refused, and those not yet in "
                "the database file stay in this broker's journal for the next opener",
                path=str(self.path),
            )

    # -- reads ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def snapshot(self, action: str) -> Iterator[sqlite3.Connection]:
        """A read transaction: one consistent view of the file (WAL readers do not block)."""
        conn = self.conn
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self.fail(action, exc) from exc

    def head(self, conn: sqlite3.Connection) -> tuple[int, str] | None:
        row = conn.execute(_HEAD).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def high_water(self, conn: sqlite3.Connection) -> int:
        row = conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'audit_records'"
        ).fetchone()
        return int(row[0]) if row else 0

    def _select_now(self, conn: sqlite3.Connection) -> str:
        # A reader of a version 1 log looks again each time: a writer may have migrated
        # it since, and its new rows' sessions are in their hashes.
        if self._select is not _SELECT:
            self._select = _select_for(_columns(conn))
        return self._select

    def rows(self, conn: sqlite3.Connection, *, after: int = 0) -> Iterator[tuple[Any, ...]]:
        yield from conn.execute(f"{self._select_now(conn)} WHERE seq > ? ORDER BY seq", (after,))

    def last_rows(self, conn: sqlite3.Connection, n: int) -> list[tuple[Any, ...]]:
        select = self._select_now(conn)
        rows = conn.execute(f"{select} ORDER BY seq DESC LIMIT ?", (n,)).fetchall()
        rows.reverse()
        return rows

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        scratch, self._scratch = self._scratch, None
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
