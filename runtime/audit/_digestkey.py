"""The per-log secret that keys the arguments digest of a redacted call.

Why: a request record stores the redacted arguments next to a digest of the real ones.
With a plain sha256 the digest was a guessing oracle: put a dictionary word where
``[REDACTED]`` stands, hash the canonical text, compare (``DB_PASSWORD=[REDACTED]`` gave
back ``winter2024`` in seconds). When redaction changed the arguments, the digest is now
``"hmac-sha256:" + HMAC-SHA256(key, canonical arguments)`` with a key that is never in
any record: whoever holds the log (a copy, an export, another user) cannot test a guess;
whoever also holds the key (the broker's owner) can still match a call it knows to its
record (:meth:`AuditLog.digest_arguments`). Records of calls that redaction left as they
were keep the plain sha256: their arguments are in the record anyway.

The key is 32 random bytes in ``<log>.digest-key`` beside the database, mode 0600, made
once per log: written to a private temporary file and linked into place (``link`` fails if
the name exists), so concurrent openers of one log, in any process, end up with the same
key and nobody ever reads a half-written one. The chain hash covers the digest text like
any column: verify needs no key. Lose the key and old digests can no longer be matched to
calls (the chain still verifies); copy it with the log only to someone who may test
guesses against the redacted values.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from runtime.errors import AuditError

__all__ = ["KEY_BYTES", "digest_key", "key_path"]

KEY_BYTES = 32
_SUFFIX = ".digest-key"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def key_path(db_path: Path) -> Path:
    """Where the key of the log at ``db_path`` (resolved) is kept."""
    return db_path.with_name(db_path.name + _SUFFIX)


def digest_key(db_path: Path, *, create: bool = True) -> bytes:
    """The key of the log at ``db_path``, made first if there is none and ``create``.
    Raises AuditError (naming the file) when it cannot be read or made, or is not a
    key: a regular file of exactly KEY_BYTES bytes, not a symlink."""
    path = key_path(db_path)
    try:
        return _read(path)
    except FileNotFoundError:
        if not create:
            raise AuditError(
                f"audit digest key {path} does not exist: the digests of redacted calls "
                "cannot be matched without it",
                path=str(path),
            ) from None
    except OSError as exc:
        raise _error(path, exc) from exc
    temp = path.with_name(f"{path.name}.tmp-{secrets.token_hex(8)}")
    try:
        fd = os.open(temp, _CREATE, 0o600)
        try:
            data = secrets.token_bytes(KEY_BYTES)
            if os.write(fd, data) != KEY_BYTES:
                raise OSError("short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        # Atomic and exclusive: the first opener's key wins, a later one reads it below.
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
        return _read(path)
    except OSError as exc:
        raise _error(path, exc) from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _read(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != KEY_BYTES:
            raise AuditError(
                f"audit digest key {path} is not a key (a regular file of {KEY_BYTES} bytes); "
                "move it away to start a new one (older digests then no longer match)",
                path=str(path),
            )
        if st.st_uid == os.geteuid() and st.st_mode & 0o077:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o700)
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise AuditError(f"audit digest key {path} changed while read", path=str(path))
    return data


def _error(path: Path, exc: OSError) -> AuditError:
    return AuditError(f"audit digest key {path}: {exc.strerror or exc}", path=str(path))
