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
died after a synchronous insert), then the file is removed once a complete checkpoint put
the records in the database file (a journal of records only in the WAL is kept: see
``AuditLog._rotate_locked``). A torn last line (the process died
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
- The directory may be shared (1777): a journal's name may hold anything another user put
  there. Only names a Journal gets are opened, with O_NOFOLLOW|O_NONBLOCK, and the
  descriptor must be a regular file of this user's (or the log owner's) that others may not
  write, read no further than its size; else the log is not opened (AuditFileRefused).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import json.encoder
import os
import re
import secrets
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from runtime._fsio import kept_file_problem
from runtime.audit import _canonical
from runtime.errors import AuditError, AuditFileRefused

__all__ = ["Journal", "dead_journals", "encode_line", "journal_names", "parse_lines"]

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


#: How a journal is opened for recovery. O_NOFOLLOW: a symlink in a journal's place (to
#: /dev/zero, to another log's journal) is refused, not read. O_NONBLOCK: a FIFO opens at
#: once instead of waiting for a writer for ever (every broker and verify hung on one); it
#: is then refused by its type. On a regular file O_NONBLOCK changes nothing.
_RECOVER_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
_NAME = re.compile(r"[0-9a-f]{16}")


def _refused(path: Path, why: str) -> AuditFileRefused:
    return AuditFileRefused(
        f"audit journal {path} {why}; the log is not opened: move that file away "
        "(a journal is a regular file of the log's owner, mode 0600)",
        path=str(path),
    )


@contextlib.contextmanager
def _locked(path: Path, owners: frozenset[int]) -> Iterator[tuple[int, int] | None]:
    """``(fd, size)`` of the journal ``path`` with its flock held, or None when its owner is
    alive (or it is gone). Raises AuditFileRefused when the name holds anything but a
    regular file of this user's (or of an uid in ``owners``: the log's owner) that group and
    others may not write (``runtime._fsio.kept_file_problem``, on the descriptor: no name is
    looked at twice)."""
    try:
        fd = os.open(path, _RECOVER_FLAGS)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refused(path, "is a symlink") from exc
        raise AuditError(
            f"audit journal {path} cannot be opened: {exc.strerror or exc}", path=str(path)
        ) from exc
    try:
        why = kept_file_problem(os.fstat(fd), owners=owners, shared_write=False)
        if why is not None:
            raise _refused(path, why)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        # Another recoverer may have finished and unlinked it while we waited for the lock.
        # The size is read under the lock: a dead owner's journal no longer grows.
        st = os.fstat(fd)
        yield (fd, st.st_size) if st.st_nlink > 0 else None
    finally:
        os.close(fd)


def _read(fd: int, size: int, path: Path) -> bytes:
    """The first ``size`` bytes of ``fd`` (fewer if it is shorter): bounded by the size
    fstat gave, never "read until EOF"."""
    chunks: list[bytes] = []
    left = size
    try:
        while left > 0:
            chunk = os.pread(fd, min(left, 1 << 24), size - left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise AuditError(
            f"audit journal {path} cannot be read: {exc.strerror or exc}", path=str(path)
        ) from exc
    return b"".join(chunks)


def journal_names(db_path: Path) -> list[Path]:
    """The journals beside ``db_path``: the names a :class:`Journal` gets (the log's name,
    ``.rtj-`` and 16 lower-case hex digits), sorted. Other names are not ours and are left
    alone (odd names in a shared directory cannot make recovery open them). Read with
    ``os.scandir``, one pass over the directory, names compared as strings (the log's name
    is no pattern: 'a[1].db' or 'a*.db' would have found none of its own or another log's).
    Raises AuditError when the directory cannot be read."""
    prefix = db_path.name + _SUFFIX
    try:
        with os.scandir(db_path.parent) as entries:
            names = [
                e.name
                for e in entries
                if e.name.startswith(prefix) and _NAME.fullmatch(e.name, len(prefix))
            ]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise AuditError(
            f"cannot list the audit log's directory {db_path.parent}: {exc.strerror or exc}",
            path=str(db_path.parent),
        ) from exc
    return [db_path.with_name(name) for name in sorted(names)]


@contextlib.contextmanager
def dead_journals(db_path: Path) -> Iterator[list[tuple[str, Path, bytes]]]:
    """``(name, path, content)`` of every journal next to ``db_path`` whose owner is gone,
    each locked until the block ends (the caller inserts the lines, then removes the file).

    Raises AuditFileRefused for a journal name that holds a symlink, a FIFO, a directory,
    a device, another user's file or a file group or others may write (the log's owner's
    files are accepted too: a reader of someone else's log reads their journals)."""
    owners = {os.geteuid()}
    with contextlib.suppress(OSError):
        owners.add(os.stat(db_path).st_uid)
    frozen = frozenset(owners)
    with contextlib.ExitStack() as stack:
        found: list[tuple[str, Path, bytes]] = []
        for path in journal_names(db_path):
            held = stack.enter_context(_locked(path, frozen))
            if held is None:
                continue
            found.append((path.name, path, _read(*held, path)))
        yield found
