"""RFC 8785 (JCS) canonical JSON, and the digests the audit chain is built from.

``rfc8785.dumps`` is the reference, but it costs ~75 µs for one audit record on the project's
machines, more than the broker's whole per-call budget. :func:`canonical_json` produces the same
bytes with the C string escaper of the stdlib ``json`` module and a Python walk; the property
tests in ``tests/audit/test_canonical.py`` check byte equality against ``rfc8785`` for arbitrary
JSON values (unicode keys outside the BMP, floats in exponent form, control characters).

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
import json.encoder
import math
from typing import Any

import rfc8785

__all__ = [
    "GENESIS_HASH",
    "CanonicalizationError",
    "canonical_json",
    "canonical_json_ijson",
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


def canonical_json(obj: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value, as UTF-8 bytes.

    Byte-identical to ``rfc8785.dumps``; raises the same ``CanonicalizationError`` (a
    ``ValueError``) for values JSON cannot hold exactly.
    """
    return _finish(_walk(obj, False))


def canonical_json_ijson(obj: Any) -> bytes:
    """Like :func:`canonical_json`, but integers beyond ±(2**53 - 1) become decimal strings."""
    return _finish(_walk(obj, True))


def canonical_scalar(value: str | float | None) -> str:
    """Canonical text of a top-level record column (str, int, float, None): the hot path."""
    t = type(value)
    if t is str:
        return _encode_str(value)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if t is int and -_INT_MAX <= value <= _INT_MAX:  # type: ignore[operator]
        return str(value)
    if t is float:
        return _float(value)  # type: ignore[arg-type]
    return canonical_json(value).decode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
