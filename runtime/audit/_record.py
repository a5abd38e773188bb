"""The audit record's stored row, its canonical body and its chain hash.

Each :class:`~runtime.models.AuditRecord` field is one column. JSON-valued fields
(``arguments``, ``decision``, ``sandbox``, ``usage``) are stored as their RFC 8785 text, so the
body that is hashed is rebuilt from the columns byte for byte, without re-serialising data
that an attacker could have made ambiguous::

    body = canonical_json(record without "hash")          # every field, nulls included, seq too
    hash = sha256_hex(prev_hash.encode("ascii") + body)    # prev_hash of record 1: GENESIS_HASH

Because ``seq`` and ``prev_hash`` are inside the body, moving a record (reordering) or dropping
one breaks the hash of the record itself or of the one after it.

One exception to "nulls included": ``session`` (added in schema version 2) is in the body only
when it is not null. Records written before it existed have no session and their bodies, and
so their hashes, are unchanged: old and new records verify as one chain. Hazard checked: this
opens no edit. Setting a session on an old record, or clearing one on a new record, changes
the body and so the hash, like any other edit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from runtime.audit import _canonical
from runtime.audit._canonical import _encode_str, canonical_json, canonical_scalar, sha256_hex
from runtime.audit._journal import encode_line
from runtime.models import AuditRecord

__all__ = [
    "COLUMNS",
    "JSON_FIELDS",
    "BodyParts",
    "body_bytes",
    "body_parts",
    "chain_hash",
    "chain_row",
    "chain_rows",
    "journal_record",
    "json_column_problem",
    "py_chain_rows",
    "row_to_record",
]

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
    "session",
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
# The body of a record without a session (module doc): the same template without that key.
_SESSION = COLUMNS.index("session")
# A row of schema version 1 (COLUMNS without session), and the journal fields of one.
_V1_ROW = len(COLUMNS) - 1
_SESSION_AT = _BODY_KEYS.index("session")
_BODY_TEMPLATE_NO_SESSION = "{" + ",".join(f'"{k}":%s' for k in _BODY_KEYS if k != "session") + "}"


def _body_cols(row: tuple[Any, ...]) -> list[str]:
    """The canonical text of each body field of ``row`` (COLUMNS order), in body order."""
    out = []
    for i, is_json in _BODY_PLAN:
        value = row[i]
        if value is None:
            out.append("null")
        elif type(value) is str:
            out.append(value if is_json else _encode_str(value))
        else:
            out.append(_json_col(value) if is_json else _scalar_col(value))
    return out


def _body_text(cols: list[str], no_session: bool) -> str:
    """The body from :func:`_body_cols`; a null session is left out (module doc)."""
    if no_session:
        del cols[_SESSION_AT]
        return _BODY_TEMPLATE_NO_SESSION % tuple(cols)
    return _BODY_TEMPLATE % tuple(cols)


def body_bytes(row: tuple[Any, ...]) -> bytes:
    """Canonical JSON of the record without ``hash``, from a row in :data:`COLUMNS` order.

    A row of schema version 1 (no ``session`` column, one item fewer) is read as a row
    with a null session.

    Equal to ``rfc8785.dumps`` of the record dict (a null session left out) with the JSON
    columns parsed, provided those columns hold canonical text (they do when written by
    AuditLog; if an attacker rewrote them the bytes differ and so does the hash, which is
    the point).
    """
    if len(row) == _V1_ROW:
        row = (*row[:_SESSION], None, *row[_SESSION:])
    # Hot path (once per record verified, and for records not journaled): one %-format over
    # a fixed template; None and str, nearly every column, are handled inline in
    # _body_cols rather than by a call per column (~35 % less per record).
    text = _body_text(_body_cols(row), row[_SESSION] is None)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a column
        raise ValueError(f"record holds text that is not UTF-8: {exc}") from exc


#: A record's body around its two chain-dependent columns: ``body = pre + prev_hash + mid +
#: str(seq) + post`` (UTF-8). Body keys sort as ``..., outcome, prev_hash, result_digest, ...,
#: sandbox, seq, time, ...``, so both slots fall inside the text, at fixed places.
BodyParts = tuple[bytes, bytes, bytes]
_PREV_AT = _BODY_KEYS.index("prev_hash")
_SEQ_AT = _BODY_KEYS.index("seq")


_PRE = (
    '{"arguments":%s,"arguments_digest":%s,"backend":%s,"call_id":%s,"decision":%s,'
    '"duration_ms":%s,"error_type":%s,"kind":%s,"outcome":%s,"prev_hash":"'
)
_MID = '","result_digest":%s,"result_size":%s,"sandbox":%s,"seq":'
_POST = ',"time":%s,"tool":%s,"usage":%s}'
_TEXT = frozenset({str, type(None)})


def _text(value: str | None) -> str:
    return "null" if value is None else _encode_str(value)


def body_parts(row: tuple[Any, ...]) -> BodyParts:
    """The :data:`BodyParts` of a row in :data:`COLUMNS` order whose ``seq``, ``prev_hash``
    and ``hash`` are not known yet (any values there are ignored).

    Why: journaled records are chained in batches, each row inside one transaction under
    SQLite's write lock. With the parts built once per record by this straight-line template
    (the row as AuditLog writes it: text or None in every text and JSON column), chaining is
    two concatenations and one hash, ~3x less than :func:`body_bytes` in its column loop.
    Rows of other types take that loop. ``tests/audit/test_audit_body_parts.py`` checks that
    the joined parts equal :func:`body_bytes` of the finished row. ``(None, *fields)`` of a
    journal line of schema version 1 (ending at ``result_size``) is a record without a
    session.
    """
    if len(row) == _SESSION:
        row = (*row, None)
    (_, kind, call_id, when, tool, a_digest, args, decision, backend, sandbox, outcome,
     error_type, duration, usage, r_digest, r_size, session, *_) = row  # fmt: skip
    if (
        (session is None or type(session) is str)
        and type(kind) is str
        and type(call_id) is str
        and type(when) is str
        and type(tool) is str
        and {
            type(a_digest),
            type(args),
            type(decision),
            type(backend),
            type(sandbox),
            type(outcome),
            type(error_type),
            type(usage),
            type(r_digest),
        }
        <= _TEXT
        and (r_size is None or type(r_size) is int)
        and (duration is None or type(duration) is float)
    ):
        enc = _encode_str
        pre = _PRE % (
            "null" if args is None else args,
            _text(a_digest),
            _text(backend),
            enc(call_id),
            "null" if decision is None else decision,
            "null" if duration is None else _scalar_col(duration),
            _text(error_type),
            enc(kind),
            _text(outcome),
        )
        mid = _MID % (
            _text(r_digest),
            "null" if r_size is None else _scalar_col(r_size),
            "null" if sandbox is None else sandbox,
        )
        post = _POST % (enc(when), enc(tool), "null" if usage is None else usage)
        if session is not None:
            post = ',"session":' + enc(session) + post
    else:
        row = (*row[:17], None, None)
        out = _body_cols(row)
        out[_PREV_AT] = '"\x00"'
        out[_SEQ_AT] = "\x00"
        # NUL never occurs in canonical text (escaped as \u0000); if a JSON column holds a
        # raw one anyway, the split fails with ValueError like any other unwritable text.
        pre, mid, post = _body_text(out, session is None).split("\x00")
    try:
        return pre.encode("utf-8"), mid.encode("utf-8"), post.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate in a column
        raise ValueError(f"record holds text that is not UTF-8: {exc}") from exc


def journal_record(fields: tuple[Any, ...]) -> tuple[bytes, BodyParts]:
    """``(encode_line(fields), body_parts((None, *fields)))`` of a record's journal fields
    (its columns from ``kind`` to ``session``), in one pass of the C accelerator when it is
    loaded and the row has the shape AuditLog writes (else the two Python functions, which
    also raise their errors). ``tests/test_speedups_record.py`` compares the two paths."""
    c = _canonical._record
    if c is not None:
        out = c(fields)
        if out is not None:
            line, pre, mid, post = out
            return line, (pre, mid, post)
    return encode_line(fields), body_parts((None, *fields))


def chain_row(
    fields: tuple[Any, ...], parts: BodyParts, seq: int, prev_hash: str
) -> tuple[Any, ...]:
    """The row of record ``seq`` after ``prev_hash``: ``fields`` are its columns from
    ``kind`` to ``session`` and ``parts`` their :func:`body_parts`."""
    prev = prev_hash.encode("ascii")
    pre, mid, post = parts
    body = pre + prev + mid + str(seq).encode("ascii") + post
    return (seq, *fields, prev_hash, hashlib.sha256(prev + body).hexdigest())


def chain_rows(records: list[Any], head_seq: int, head_hash: str) -> list[tuple[Any, ...]]:
    """The rows of ``records`` chained after ``(head_seq, head_hash)``: each record a tuple
    whose first item is its ``fields`` and whose last is its :data:`BodyParts`, each row
    :func:`chain_row` after the one before. In one call of the C accelerator when it is loaded
    and the records have the shape AuditLog builds (else this loop, which also raises its
    errors). ``tests/test_speedups_chain.py`` compares the two paths."""
    c = _canonical._chain
    if c is not None:
        rows = c(records, head_seq, head_hash)
        if rows is not NotImplemented:
            return rows  # type: ignore[no-any-return]
    return py_chain_rows(records, head_seq, head_hash)


def py_chain_rows(records: list[Any], head_seq: int, head_hash: str) -> list[tuple[Any, ...]]:
    """:func:`chain_rows` without the accelerator (the reference its tests compare with)."""
    out = []
    seq, prev = head_seq, head_hash
    for record in records:
        seq += 1
        row = chain_row(record[0], record[-1], seq, prev)
        prev = row[-1]
        out.append(row)
    return out


_JSON_AT = tuple((COLUMNS.index(k), k) for k in sorted(JSON_FIELDS))


def _strict_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_column_problem(row: tuple[Any, ...]) -> str | None:
    """Why a JSON column of ``row`` (:data:`COLUMNS` layout) is not one JSON value, or
    None. The hashed body holds these columns as they are stored: one that is not a whole
    JSON value could move the bounds between columns without changing the hash."""
    for at, name in _JSON_AT:
        value = row[at]
        if value is None:
            continue
        if not isinstance(value, str):
            return f"its {name} column is not text"
        try:
            json.loads(value, parse_constant=_strict_constant)
        except (ValueError, RecursionError):
            return f"its {name} column is not one JSON value"
    return None


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
