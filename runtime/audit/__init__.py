"""The hash-chained audit log (DESIGN §6).

Public surface::

    AuditLog(path, *, redact_keys=(), busy_timeout_s=5.0)
        .record_request(...) / .record_completion(...) -> AuditRecord
            (returning=False: -> None, no AuditRecord built; the broker's hot path)
        .prepare(what, obj) -> PreparedObject   a decision/sandbox/usage serialised once
        .verify(expected_head=None) -> VerifyReport
        .head() -> (seq, hash)          keep it elsewhere as an anchor
        .tail(n) / .interrupted() / .export_jsonl(out) / .close()
        .digest_arguments(args) -> str  the arguments_digest a request of ``args`` holds
    canonical_json(obj) -> bytes       RFC 8785
    redact(obj, keys=()) -> copy       secrets replaced by "[REDACTED]"

Chain: ``hash = sha256_hex(prev_hash.encode("ascii") + canonical_json(record without hash))``;
record 1's ``prev_hash`` is :data:`GENESIS_HASH` (64 zeros). See ``_verify`` for what the chain
can and cannot prove without an external anchor.

A request's ``arguments_digest`` is the sha256 of the canonical arguments, or, when redaction
changed them, ``"hmac-sha256:" + HMAC(key, ...)`` with the log's key in ``<log>.digest-key``
(0600, never in a record): see ``_digestkey``.

The log, redaction and verification load on first use (PEP 562): a process that needs only
the canonical encoder (the sandbox's fork-server, which sizes results by it) does not import
the log's models and their pydantic, which every copy of the fork-server would carry.
"""

from __future__ import annotations

import typing

from runtime._lazy import lazy_attributes as _lazy_attributes
from runtime.audit._canonical import GENESIS_HASH, canonical_json

if typing.TYPE_CHECKING:
    from runtime.audit._log import OUTCOMES, AuditLog, PreparedObject
    from runtime.audit._redact import REDACTED, redact
    from runtime.audit._verify import VerifyReport

#: Public names and the module each is loaded from on first use.
_LAZY = {
    "OUTCOMES": "_log",
    "AuditLog": "_log",
    "PreparedObject": "_log",
    "REDACTED": "_redact",
    "redact": "_redact",
    "VerifyReport": "_verify",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY)


__all__ = [
    "GENESIS_HASH",
    "OUTCOMES",
    "REDACTED",
    "AuditLog",
    "PreparedObject",
    "VerifyReport",
    "canonical_json",
    "redact",
]
