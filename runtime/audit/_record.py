"""The audit record's stored row, its canonical body and its chain hash.

Each :class:`~runtime.models.AuditRecord` field is one column. JSON-valued fields
(``arguments``, ``decision``, ``sandbox``, ``usage``) are stored as their RFC 8785 text, so the
body that is hashed is rebuilt from the columns byte for byte, without re-serialising data
that an attacker could have made ambiguous::

    body = canonical_json(record without "hash")          # every field, nulls included, seq too
    hash = sha256_hex(prev_hash.encode("ascii") + body)    # prev_hash of record 1: GENESIS_HASH

Because ``seq`` and ``prev_hash`` are inside the body, moving a record (reordering) or dropping
one breaks the hash of the record itself or of the one after it.
"""

from __future__ import annotations

import json
from typing import Any

from runtime.audit._canonical import _encode_str, canonical_json, canonical_scalar, sha256_hex
from runtime.models import AuditRecord

__all__ = ["COLUMNS", "JSON_FIELDS", "body_bytes", "chain_hash", "row_to_record"]

# Column order of the table and of every SELECT; "hash" last.
COLUMNS: tuple[str, ...] = (
    "seq",
    "kind",
    "call_id",
    "time",
    "tool",
    "arguments_digest",
    "arguments",
    "decision",
    "backend",
    "sandbox",
    "outcome",
    "error_type",
    "duration_ms",
    "usage",
    "result_digest",
    "result_size",
    "prev_hash",
    "hash",
)
_SAFE = 2**53 - 1
JSON_FIELDS = frozenset({"arguments", "decision", "sandbox", "usage"})
assert set(COLUMNS) == set(AuditRecord.model_fields), "audit columns drifted from AuditRecord"


def _json_col(value: Any) -> str:
    if value is None:
        return "null"
    return value if type(value) is str else canonical_json(value).decode("utf-8")


def _scalar_col(value: Any) -> str:
    if type(value) is str:
        return _encode_str(value)  # type: ignore[no-any-return]
    return canonical_scalar(value)


# The body with every field in RFC 8785 key order (field names are ASCII: sorted == JCS).
_BODY_KEYS = tuple(sorted(c for c in COLUMNS if c != "hash"))
_BODY_TEMPLATE = "{" + ",".join(f'"{k}":%s' for k in _BODY_KEYS) + "}"
# (column index, is a JSON column) per body key, in body order.
_BODY_PLAN = tuple((COLUMNS.index(k), k in JSON_FIELDS) for k in _BODY_KEYS)


def body_bytes(row: tuple[Any, ...]) -> bytes:
    """Canonical JSON of the record without ``hash``, from a row in :data:`COLUMNS` order.

    Equal to ``rfc8785.dumps`` of the record dict with the JSON columns parsed, provided those
    columns hold canonical text (they do when written by AuditLog; if an attacker rewrote them
    the bytes differ and so does the hash, which is the point).
    """
    # Hot path (once per record written, once per record verified): one %-format over a fixed
    # template; None and str, nearly every column, are handled inline rather than by a call
    # per column (~35 % less per record).
    out = []
    for i, is_json in _BODY_PLAN:
        value = row[i]
        if value is None:
            out.append("null")
        elif type(value) is str:
            out.append(value if is_json else _encode_str(value))
        else:
            out.append(_json_col(value) if is_json else _scalar_col(value))
    text = _BODY_TEMPLATE % tuple(out)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a column
        raise ValueError(f"record holds text that is not UTF-8: {exc}") from exc


def chain_hash(prev_hash: str, body: bytes) -> str:
    return sha256_hex(prev_hash.encode("ascii") + body)


def _parse_int(text: str) -> int | float:
    # The writer never stores an integer beyond 2**53 - 1 (I-JSON: those become strings), so
    # a longer integer literal is a float that RFC 8785 printed without a fraction (2.0**60).
    value = int(text)
    return value if -_SAFE <= value <= _SAFE else float(value)


_DECODER = json.JSONDecoder(parse_int=_parse_int)


def row_to_record(row: tuple[Any, ...]) -> AuditRecord:
    # Always validated: rows read back come from a file an attacker may have edited, and
    # pydantic-core's validation is faster than the pure-Python model_construct anyway.
    data = dict(zip(COLUMNS, row, strict=True))
    for name in JSON_FIELDS:
        if data[name] is not None:
            data[name] = _DECODER.decode(data[name])
    return AuditRecord.model_validate(data)
