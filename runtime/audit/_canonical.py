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


def _walk(obj: Any, out: list[str], ijson: bool) -> None:
    t = type(obj)
    if t is str:
        out.append(_encode_str(obj))
    elif obj is None:
        out.append("null")
    elif t is bool:
        out.append("true" if obj else "false")
    elif t is int:
        if -_INT_MAX <= obj <= _INT_MAX:
            out.append(str(obj))
        elif ijson:
            out.append(f'"{obj}"')
        else:
            raise rfc8785.IntegerDomainError(obj)
    elif t is float:
        out.append(_float(obj))
    elif t is dict:
        items = list(obj.items())
        for k, _ in items:
            if type(k) is not str and not isinstance(k, str):
                raise CanonicalizationError("object keys must be strings")
        if all(k.isascii() for k, _ in items):
            items.sort(key=lambda kv: kv[0])  # code point order == UTF-16 order for ASCII
        else:
            items.sort(key=_utf16_key)
        out.append("{")
        first = True
        for k, v in items:
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(k))
            out.append(":")
            _walk(v, out, ijson)
        out.append("}")
    elif t is list or t is tuple:
        out.append("[")
        for i, v in enumerate(obj):
            if i:
                out.append(",")
            _walk(v, out, ijson)
        out.append("]")
    # Subclasses (StrEnum, IntEnum, OrderedDict...) are serialised as their base JSON type,
    # as rfc8785 does; bool is checked before int because bool subclasses int.
    elif isinstance(obj, bool):
        out.append("true" if obj else "false")
    elif isinstance(obj, str):
        out.append(_encode_str(str.__str__(obj)))
    elif isinstance(obj, int):
        _walk(int(obj), out, ijson)
    elif isinstance(obj, float):
        out.append(_float(float(obj)))
    elif isinstance(obj, dict):
        _walk(dict(obj), out, ijson)
    elif isinstance(obj, (list, tuple)):
        _walk(list(obj), out, ijson)
    else:
        raise CanonicalizationError(f"unsupported type: {t.__name__}")


def _finish(out: list[str]) -> bytes:
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates
        raise CanonicalizationError("input contains non-UTF-8 codepoints") from exc


def canonical_json(obj: Any) -> bytes:
    """The RFC 8785 canonical form of a JSON value, as UTF-8 bytes.

    Byte-identical to ``rfc8785.dumps``; raises the same ``CanonicalizationError`` (a
    ``ValueError``) for values JSON cannot hold exactly.
    """
    out: list[str] = []
    _walk(obj, out, False)
    return _finish(out)


def canonical_json_ijson(obj: Any) -> bytes:
    """Like :func:`canonical_json`, but integers beyond ±(2**53 - 1) become decimal strings."""
    out: list[str] = []
    _walk(obj, out, True)
    return _finish(out)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
