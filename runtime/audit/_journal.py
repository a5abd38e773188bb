"""The write-ahead journal: one ``write()`` per record now, SQLite insertion in batches later.

Why: an autocommit SQLite INSERT of one audit record costs ~90 µs here (statement, WAL frame
of the record's page and of ``sqlite_sequence``, commit), twice per call — several times the
broker's whole per-call budget (DESIGN §10). Appending the record's fields as one JSON line to
an ``O_APPEND`` file costs a few µs and gives the *same durability* as the WAL with
``synchronous=NORMAL``: once ``write()`` returns, the bytes are in the kernel's page cache and
survive the broker being killed (SIGKILL, OOM); like the WAL without fsync they may be lost on
power failure. A writer thread then inserts the pending records into SQLite in one transaction
per batch, chaining them there (seq, prev_hash and hash are only known under SQLite's write
lock, which several processes share).

Crash recovery: each AuditLog owns one journal file, ``<db>.rtj-<token>``, holding an
exclusive ``flock`` on it for its whole life. The table ``audit_journals`` records, in the same
transaction as each batch, how many bytes of the journal are in the database. On open, every
journal whose lock can be taken belongs to a dead owner: its lines past that offset are
inserted (the interrupted call's request record becomes visible, exactly as if the broker had
died after a synchronous insert), then the file is removed. A torn last line (the process died
inside ``write()``) has no newline and is dropped: its ``write()`` never returned, so no caller
was told about that record.

Verification covers both stores: opening an AuditLog (``runtime audit verify`` does) first
inserts the journals of dead owners, and an AuditLog's own reads insert its pending records
first. Records in the journal of a broker that is still running reach the chain within
``_IDLE_S`` or at its next batch, like a transaction not yet committed.

Hazards:

- The journal is plain text an attacker with write access to the directory could edit before
  recovery, as they could edit the WAL; records become tamper-evident when they are chained
  into SQLite. Lines are parsed strictly; a malformed complete line stops recovery with an
  AuditError naming the file (fail closed; the file is kept for inspection).
- The lock is per open file description: a process forked from the broker (not exec'd) keeps
  it, so its journal is recovered only when that child has exited as well. Opened O_CLOEXEC.
- A new journal is created under a temporary name, locked, then renamed into place, so a
  recovering process never sees an unlocked live journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import json.encoder
import os
import secrets
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from runtime.audit import _canonical
from runtime.errors import AuditError

__all__ = ["Journal", "dead_journals", "encode_line", "parse_lines"]

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_SUFFIX = ".rtj-"
_TEMP_SUFFIX = ".rtt-"
# Fields in a line: kind, call_id, time, tool and the 12 columns after it up to session.
_LINE_FIELDS = 16
# A line written before records had a session (schema version 1) ends at result_size. The
# journal of a broker of that version that died is recovered by a newer one: such a line
# is read as a record without a session (its hash is the same, _record's module doc).
_OLD_LINE_FIELDS = 15


def _not_json(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} in an audit journal line")


# The stdlib's C encoder, built once (json.dumps builds one per call): ~2x faster per line.
_encode: Any = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, False
)


def encode_line(fields: tuple[Any, ...]) -> bytes:
    """One journal line. Raises ValueError for text that is not UTF-8 (lone surrogates)."""
    return "".join(_encode(fields, 0)).encode("utf-8") + b"\n"


def parse_lines(data: bytes, name: str) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """``(end offset, fields)`` per complete line of ``data``; a torn last line is dropped."""
    pos = 0
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            return
        try:
            fields = json.loads(data[pos:end].decode("utf-8"))
        except ValueError as exc:
            raise AuditError(
                f"audit journal {name} is damaged at byte {pos}: {exc}", path=name
            ) from exc
        if not isinstance(fields, list) or len(fields) not in (_LINE_FIELDS, _OLD_LINE_FIELDS):
            raise AuditError(f"audit journal {name} is damaged at byte {pos}", path=name)
        if len(fields) == _OLD_LINE_FIELDS:
            fields.append(None)
        pos = end + 1
        yield pos, tuple(fields)


class Journal:
    """This log's own journal file: append, truncate, remove. The owner serialises calls."""

    def __init__(self, db_path: Path) -> None:
        token = secrets.token_hex(8)
        temp = db_path.with_name(db_path.name + _TEMP_SUFFIX + token)
        self.path = db_path.with_name(db_path.name + _SUFFIX + token)
        self.name = self.path.name
        self.size = 0
        self._fd = -1
        self._finalizer: weakref.finalize[Any, Any] | None = None
        try:
            self._fd = os.open(temp, _FLAGS, 0o600)
            # A journal dropped without close() (its AuditLog collected) still lets go of
            # the fd and the lock, so that a later open in this process can recover it.
            # Not at interpreter exit: the exit closes every fd anyway, and the owner's own
            # exit-time close (a SyncBroker never closed) must still find this one open
            # (finalizers run newest first, so this one would come before it).
            self._finalizer = weakref.finalize(self, os.close, self._fd)
            self._finalizer.atexit = False
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(temp, self.path)
        except OSError as exc:
            self.close()
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise AuditError(f"cannot create audit journal {self.path}: {exc}") from exc

    def append_fields(
        self, fields: tuple[Any, ...], *, write_ahead: bool = False
    ) -> tuple[int, tuple[bytes, bytes, bytes]] | None:
        """Encode the record ``fields`` (``_record.journal_record``'s input) and write its line
        with the C accelerator's ``journal_write``: ``(end offset, body parts)``, the same as
        ``append(journal_record(fields)[0])`` and its parts. None, with nothing written, when
        the accelerator is not loaded or the record is outside its shapes: the caller then
        encodes the record in Python and calls :meth:`append`. The checks and errors are
        :meth:`append`'s; the free-space check comes first here (the one check left in
        Python, ``os.fstatvfs``), so a journal both removed and on a full file system is
        reported as full.
        """
        native = _canonical._journal_write
        if native is None:
            return None
        try:
            if write_ahead and os.fstatvfs(self._fd).f_bavail == 0:
                raise AuditError(
                    f"audit journal {self.path}: the file system is full", reason="no_space"
                )
            out = native(self._fd, fields, write_ahead)
        except OSError as exc:
            raise AuditError(f"audit journal {self.path}: write failed: {exc}") from exc
        if out is None:
            return None
        if out[0] != 0:
            raise AuditError(f"audit journal {self.path} was removed while open")
        written = out[1]
        if written != out[2]:
            self._torn()
        self.size += written
        return self.size, out[3:]

    def refuse(self, status: int) -> NoReturn:
        """Raise the error of a ``journal_append`` status (``_log``'s inline write): 1 the
        file was removed while open, 2 a short write (cut off, as :meth:`append` does)."""
        if status == 1:
            raise AuditError(f"audit journal {self.path} was removed while open")
        self._torn()

    def full(self) -> AuditError:
        """The error of a write-ahead record on a full file system (see :meth:`append`)."""
        return AuditError(f"audit journal {self.path}: the file system is full", reason="no_space")

    def failed(self, exc: OSError) -> AuditError:
        return AuditError(f"audit journal {self.path}: write failed: {exc}")

    def _torn(self) -> NoReturn:
        """A short write on a regular file means the disk filled mid-line: cut the torn tail
        off so the next line starts clean (recovery stops at a torn line)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self.size)
        raise AuditError(f"audit journal {self.path}: short write (disk full?)")

    def append(self, line: bytes, *, write_ahead: bool = False) -> int:
        """Write one line; return the journal's size after it (the line's end offset).

        ``write_ahead`` (a record that lets a call run) is refused while the file system is
        full: the journal's last page may still take a few lines there, but the database
        cannot, and records would pile up where they are not yet chained. The completion of
        a call that already ran is written while it fits (it is the call's only record of
        what happened).
        """
        try:
            if write_ahead:
                # Hazard: a journal unlinked while open (its directory removed) takes every
                # later line with it. Checked before each record that lets a call run (~1 µs):
                # no call runs unrecorded, and the completion of a call already running
                # would be lost with its write-ahead record anyway.
                if os.fstat(self._fd).st_nlink == 0:
                    raise AuditError(f"audit journal {self.path} was removed while open")
                if os.fstatvfs(self._fd).f_bavail == 0:
                    raise AuditError(
                        f"audit journal {self.path}: the file system is full", reason="no_space"
                    )
            written = os.write(self._fd, line)
        except OSError as exc:
            raise AuditError(f"audit journal {self.path}: write failed: {exc}") from exc
        if written != len(line):
            self._torn()
        self.size += written
        return self.size

    def truncate(self) -> None:
        """Drop every line (all of them are in the database)."""
        try:
            os.ftruncate(self._fd, 0)
        except OSError as exc:
            raise AuditError(f"audit journal {self.path}: truncate failed: {exc}") from exc
        self.size = 0

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if self._finalizer is not None:
            # A finalizer that already ran closed the fd: closing its number again could
            # close whatever file has it since.
            if self._finalizer.detach() is None:
                fd = -1
            self._finalizer = None
        if fd >= 0:
            os.close(fd)  # releases the flock


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int | None]:
    """The fd of ``path`` with its flock held, or None when its owner is alive (or it is
    gone)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        # Another recoverer may have finished and unlinked it while we waited for the lock.
        yield fd if os.fstat(fd).st_nlink > 0 else None
    finally:
        os.close(fd)


@contextlib.contextmanager
def dead_journals(db_path: Path) -> Iterator[list[tuple[str, Path, bytes]]]:
    """``(name, path, content)`` of every journal next to ``db_path`` whose owner is gone,
    each locked until the block ends (the caller inserts the lines, then removes the file)."""
    with contextlib.ExitStack() as stack:
        found: list[tuple[str, Path, bytes]] = []
        # The name is literal: 'a[1].db' or 'a*.db' is no pattern (the first found no
        # journal of its own, the second took another log's).
        for path in sorted(db_path.parent.glob(glob.escape(db_path.name) + _SUFFIX + "*")):
            fd = stack.enter_context(_locked(path))
            if fd is None:
                continue
            with os.fdopen(os.dup(fd), "rb") as f:
                found.append((path.name, path, f.read()))
        yield found
