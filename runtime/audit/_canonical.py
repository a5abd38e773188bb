"""RFC 8785 (JCS) canonical JSON, and the digests the audit chain is built from.

``rfc8785.dumps`` is the reference, but it costs ~75 µs for one audit record on the project's
machines, more than the broker's whole per-call budget. :func:`canonical_json` produces the same
bytes with the project's C accelerator (:mod:`runtime._speedups`, built on first use) or, where
it cannot be built, with the C string escaper of the stdlib ``json`` module and a Python walk
(:func:`_walk`, also the reference the accelerator is tested against). The property tests in
``tests/audit/test_audit_canonical.py`` and ``tests/test_speedups.py`` check byte equality
against ``rfc8785`` for arbitrary JSON values (unicode keys outside the BMP, floats in exponent
form, control characters).

Hazards that a canonical form does not paper over:

- Unicode normalisation is *not* applied: ``"é"`` (NFC, U+00E9) and ``"é"`` (NFD, U+0065
  U+0301) are different data and canonicalise (and hash) differently. Normalising would make
  two different byte strings that a tool may treat differently share one digest.
- Integers beyond ±(2**53 - 1) have no exact RFC 8785 form; :func:`canonical_json` refuses them
  like ``rfc8785``. :func:`canonical_json_ijson` instead writes them as decimal strings, the
  I-JSON (RFC 7493 §2.2) convention, so an argument ``2**60`` and ``"1152921504606846976"``
  share a digest. Schema validation has fixed the argument's type before audit, so the
  collision cannot change what a tool receives.
- NaN and the infinities are not JSON and are refused by both.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import math
import os
import re
from collections.abc import Callable
from typing import Any

import rfc8785

from runtime import _speedups

__all__ = [
    "GENESIS_HASH",
    "CanonicalizationError",
    "canonical_json",
    "canonical_json_ijson",
    "canonical_json_ijson_bulk",
    "canonical_scalar",
    "sha256_hex",
]

# prev_hash of record 1: 64 zero hex digits, the hash width, so every record has the same shape.
GENESIS_HASH = "0" * 64

CanonicalizationError = rfc8785.CanonicalizationError

_INT_MAX = 2**53 - 1
# The C escaper of the stdlib: escapes exactly '"', '\\' and U+0000..U+001F, with the same short
# forms (\b \f \n \r \t) and lower-case \u00xx as RFC 8785 §3.2.2.2; everything else is literal.
_encode_str: Any = json.encoder.c_encode_basestring or json.encoder.py_encode_basestring  # type: ignore[attr-defined]


def _utf16_key(item: tuple[str, Any]) -> bytes:
    return item[0].encode("utf-16be", "surrogatepass")


def _sorted_items(obj: dict[Any, Any]) -> list[tuple[str, Any]]:
    try:
        keys = "".join(obj)
    except TypeError:
        raise CanonicalizationError("object keys must be strings") from None
    if keys.isascii():
        # Code point order equals UTF-16 order for ASCII; keys are unique, so the tuple
        # comparison never reaches the values.
        return sorted(obj.items())
    return sorted(obj.items(), key=_utf16_key)


def _float(f: float) -> str:
    if not math.isfinite(f):
        raise rfc8785.FloatDomainError(f)
    if f == 0:
        return "0"  # -0.0 too: JSON has one zero
    r = repr(f)
    if "e" in r:
        # Python switches to exponent form at 1e16 and 1e-5, ECMAScript at 1e21 and 1e-7:
        # the rare cases go through the reference implementation.
        return rfc8785.dumps(f).decode("ascii")
    # Same shortest round-trip digits as ECMAScript's Number::toString; only "x.0" differs.
    return r[:-2] if r.endswith(".0") else r


def _walk(obj: Any, ijson: bool) -> str:
    t = type(obj)
    if t is str:
        return _encode_str(obj)  # type: ignore[no-any-return]
    if t is dict:
        return (
            "{"
            + ",".join([_encode_str(k) + ":" + _walk(v, ijson) for k, v in _sorted_items(obj)])
            + "}"
        )
    if obj is None:
        return "null"
    if t is bool:
        return "true" if obj else "false"
    if t is int:
        if -_INT_MAX <= obj <= _INT_MAX:
            return str(obj)
        if ijson:
            return f'"{obj}"'
        raise rfc8785.IntegerDomainError(obj)
    if t is float:
        return _float(obj)
    if t is list or t is tuple:
        return "[" + ",".join([_walk(v, ijson) for v in obj]) + "]"
    # Subclasses (StrEnum, IntEnum, OrderedDict...) are serialised as their base JSON type,
    # as rfc8785 does; bool is checked before int because bool subclasses int.
    if isinstance(obj, bool):
        return "true" if obj else "false"
    if isinstance(obj, str):
        return _encode_str(str.__str__(obj))  # type: ignore[no-any-return]
    if isinstance(obj, int):
        return _walk(int(obj), ijson)
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, dict):
        return _walk(dict(obj), ijson)
    if isinstance(obj, (list, tuple)):
        return _walk(list(obj), ijson)
    raise CanonicalizationError(f"unsupported type: {t.__name__}")


def _finish(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates
        raise CanonicalizationError("input contains non-UTF-8 codepoints") from exc


def _py_encode(obj: Any, ijson: bool) -> bytes:
    return _finish(_walk(obj, ijson))


def _py_encode_text(obj: Any, ijson: bool) -> str:
    return _py_encode(obj, ijson).decode("utf-8")


def _first_encode(obj: Any, ijson: bool) -> bytes:
    # Deferred to the first encoding: every process imports this module (sandbox children
    # too), and only the ones that encode should build or load the accelerator.
    _select(_speedups.module())
    return _encode(obj, ijson)


def _first_encode_text(obj: Any, ijson: bool) -> str:
    _select(_speedups.module())
    return _encode_text(obj, ijson)


def _first_record(fields: tuple[Any, ...]) -> tuple[bytes, bytes, bytes, bytes] | None:
    _select(_speedups.module())
    return None if _record is None else _record(fields)


def _first_chain(records: list[Any], head_seq: int, head_hash: str) -> Any:
    _select(_speedups.module())
    return NotImplemented if _chain is None else _chain(records, head_seq, head_hash)


def _first_journal_write(fd: int, fields: tuple[Any, ...], check_link: bool) -> Any:
    _select(_speedups.module())
    return None if _journal_write is None else _journal_write(fd, fields, check_link)


def _first_journal_append(fd: int, fields: tuple[Any, ...], check_link: bool, size: int) -> Any:
    _select(_speedups.module())
    return None if _journal_append is None else _journal_append(fd, fields, check_link, size)


def _first_free_blocks(fd: int) -> int:
    _select(_speedups.module())
    return os.fstatvfs(fd).f_bavail if _free_blocks is None else _free_blocks(fd)


def _first_journal_request(*args: Any) -> Any:
    _select(_speedups.module())
    return None if _journal_request is None else _journal_request(*args)


def _first_journal_completion(*args: Any) -> Any:
    _select(_speedups.module())
    return None if _journal_completion is None else _journal_completion(*args)


# The encoders in use: the accelerator's once loaded, else the walk (see _select).
_encode: Callable[[Any, bool], bytes] = _first_encode
_encode_text: Callable[[Any, bool], str] = _first_encode_text
# The accelerator's audit record encoder (runtime.audit._record.journal_record), or None.
_record: Callable[[tuple[Any, ...]], tuple[bytes, bytes, bytes, bytes] | None] | None = (
    _first_record
)
# The accelerator's batch chaining (runtime.audit._record.chain_rows), or None.
_chain: Callable[[list[Any], int, str], Any] | None = _first_chain
# The accelerator's record encoding and journal write in one call (Journal.append_fields),
# or None.
_journal_write: Callable[[int, tuple[Any, ...], bool], Any] | None = _first_journal_write
# The same, answered as AuditLog._journal_write keeps it (journal_append), or None.
_journal_append: Callable[[int, tuple[Any, ...], bool, int], Any] | None = _first_journal_append
# A call's write-ahead and completion records built and journaled in one call each
# (AuditLog's hot path: journal_request, journal_completion), or None.
_journal_request: Callable[..., Any] | None = _first_journal_request
_journal_completion: Callable[..., Any] | None = _first_journal_completion
# os.fstatvfs(fd).f_bavail with the GIL held (free_blocks), or None.
_free_blocks: Callable[[int], int] | None = _first_free_blocks


def _select(mod: Any) -> None:
    """Use the accelerator ``mod`` (:func:`runtime._speedups.module`), or the Python code
    when None. Tests call it to run the same inputs through both."""
    global _encode, _encode_text, _record, _chain, _journal_write, _journal_append  # noqa: PLW0603
    global _journal_request, _journal_completion, _free_blocks  # noqa: PLW0603
    if mod is None:
        _encode, _encode_text, _record, _chain = _py_encode, _py_encode_text, None, None
        _journal_write = _journal_append = _journal_request = _journal_completion = None
        _free_blocks = None
    else:
        _encode, _encode_text, _record = mod.canonical, mod.canonical_text, mod.record
        _chain, _journal_write = mod.chain, mod.journal_write
        _journal_append = mod.journal_append
        _journal_request, _journal_completion = mod.journal_request, mod.journal_completion
        _free_blocks = mod.free_blocks


def _deep(obj: Any, ijson: bool) -> bytes:
    # The accelerator stops at a fixed depth (the C stack is smaller than what a raised
    # recursion limit lets the walk reach), raising RecursionError: the walk then decides, so
    # the accelerator accepts every value the walk accepts (and, taking one recursion level
    # per container to the walk's two, some deeper ones). A walk that fails raises its own
    # RecursionError.
    if _encode is _py_encode:
        raise RecursionError("canonical JSON nested too deeply")
    return _py_encode(obj, ijson)


def canonical_json(obj: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value, as UTF-8 bytes.

    Byte-identical to ``rfc8785.dumps``; raises the same ``CanonicalizationError`` (a
    ``ValueError``) for values JSON cannot hold exactly.
    """
    try:
        return _encode(obj, False)
    except RecursionError:
        return _deep(obj, False)


def canonical_json_ijson(obj: Any) -> bytes:
    """Like :func:`canonical_json`, but integers beyond ±(2**53 - 1) become decimal strings."""
    try:
        return _encode(obj, True)
    except RecursionError:
        return _deep(obj, True)


# The text checks below run on a copy with every digit turned into "#": substring searches in C
# instead of a regex pass (a digit-class regex costs ~10x more on 1 KiB).
_DIGITS = str.maketrans("0123456789", "#" * 10)
# Integral floats: ``repr`` writes "3.0" and "-0.0", ECMAScript "3" and "0". In the compact text
# a number ends at "," "]" "}" or the end.
_NEG_ZERO = re.compile(r"-0\.0(?=[,\]}]|$)")
_INTEGRAL = re.compile(r"\.0(?=[,\]}]|$)")
_dumps = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
).encode


def canonical_json_ijson_bulk(obj: Any) -> bytes:
    """:func:`canonical_json_ijson` for large values (tool results): the stdlib's C encoder
    when its text provably is the canonical form, else the exact walk.

    Floats print as ``repr`` does, which equals ECMAScript's shortest round-trip form except
    in exponent form (sent to the walk) and for integral values,
    rewritten on the text. That rewrite cannot tell a number from look-alike digits inside a
    string, and the C encoder coerces what RFC 8785 refuses (non-string keys become strings,
    tuples lists): so the text is parsed back and must equal ``obj`` — ``{1: x}`` parses back
    as ``{"1": x}``, ``"v1.0"`` rewritten to ``"v1"`` differs, a tuple differs from a list;
    each of those simply takes the walk (``3 == 3.0`` in Python, so the intended float rewrite
    passes). On small values the double pass costs more than the walk does.

    With the C accelerator loaded this is :func:`canonical_json_ijson`: its one exact pass
    costs less than the stdlib encoder's alone.
    """
    if _encode is _first_encode:
        _select(_speedups.module())
    if _encode is not _py_encode:
        return canonical_json_ijson(obj)
    try:
        text = _dumps(obj)
    except (TypeError, ValueError, RecursionError):
        return canonical_json_ijson(obj)  # the walk raises its own typed error
    shape = text.translate(_DIGITS)
    # Exponent-form floats, integer tokens of 16+ digits (2**53 has 16) and code points outside
    # the BMP (UTF-16 key order differs from code point order only there) take the exact
    # walk; a look-alike inside a string only costs that walk.
    if (
        "#e+" not in shape
        and "#e-" not in shape
        and "################" not in shape
        and (text.isascii() or max(text) <= "\uffff")
    ):
        if ".0" in text:
            text = _INTEGRAL.sub("", _NEG_ZERO.sub("0", text))
        try:
            data = text.encode("utf-8")
            same = json.loads(text) == obj
        except (UnicodeEncodeError, ValueError, RecursionError):
            same = False
        if same:
            return data
    return canonical_json_ijson(obj)


def canonical_scalar(value: str | float | None) -> str:
    """Canonical text of a top-level record column (str, int, float, None): the hot path."""
    t = type(value)
    if t is str:
        return _encode_str(value)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if t is int and -_INT_MAX <= value <= _INT_MAX:  # type: ignore[operator]
        return str(value)
    if t is float and _encode is _py_encode:
        return _float(value)  # type: ignore[arg-type]  # the pure path, without the walk
    try:
        return _encode_text(value, False)
    except RecursionError:
        return _deep(value, False).decode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
