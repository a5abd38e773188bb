"""The guest ABI (version 1), shared by the host and every guest: how bytes cross the wall.

A guest is a core WebAssembly module with **no imports** (no WASI, no clock, no files) that
exports:

``memory``
    its linear memory (the only one).
``rt_alloc(size: i32) -> i32``
    returns a pointer to ``size`` writable bytes, or 0 when it cannot. The host calls it once
    per call, for the input. A bump allocator is enough: every call gets a fresh instance.
``<tool>(in_ptr: i32, in_len: i32) -> i64``
    one export per tool (the manifest's ``wasm.export``). The input is the call's validated
    arguments as a JSON object in UTF-8. The return value packs the output as
    ``(out_len << 32) | out_ptr``; the output's first byte is a status:

    - ``0`` ok: the rest is the result, a JSON value in UTF-8 (an object for built-ins);
    - ``1`` error: the rest is a UTF-8 message for the caller (``tool_error``);
    - ``2`` exhausted: the guest ran out of a resource; the rest is a message
      (``resource_limit``);
    - ``3`` cut: the output outgrew the guest's memory; the rest is its first part. Sized
      like any output: past ``output_bytes`` it is ``output_too_large``, else
      ``resource_limit`` (``limit: wasm_memory_mb``). Never parsed.
``rt_oom() -> i32`` (optional)
    1 when the guest trapped on purpose because ``memory.grow`` failed; lets the host report
    ``resource_limit`` as data instead of guessing from the trap.

Everything the guest returns is hostile input to the host: the output is bounds-checked,
size-capped before it is copied, and parsed with a JSON parser that refuses NaN/Infinity.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar

from pydantic_core import from_json as _from_json
from pydantic_core import to_json as _to_json

from runtime.errors import InvalidArguments, SandboxError, ToolFailed

__all__ = ["GuestABI"]


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


class _FloatOutOfRange(Exception):
    pass


def _finite_float(lexeme: str) -> float:
    value = float(lexeme)
    if math.isinf(value):
        raise _FloatOutOfRange(lexeme)
    return value


def _shape_table() -> bytes:
    """Byte classes for _may_overflow: digits -> "d", e/E -> "e", +/- -> "s", all else "."."""
    table = bytearray(b"." * 256)
    for c in b"0123456789":
        table[c] = ord("d")
    for c in b"eE":
        table[c] = ord("e")
    for c in b"+-":
        table[c] = ord("s")
    return bytes(table)


_SHAPE = _shape_table()
# A float lexeme reaches 1.8e308 (inf) only with >= 309 digits before its point, or an
# exponent: with 1-2 exponent digits (<= 99) it still needs >= 210 digits before the point.
_LONG_DIGIT_RUN = b"d" * 210


def _may_overflow(payload: bytes | bytearray) -> bool:
    """False when no number in ``payload`` can be a float outside the double range.

    Conservative (strings that look like numbers count too): True only sends the payload to
    the parser that checks every float, which is exact. One C-level translate and three
    substring searches: cheaper than a per-float Python hook, far cheaper than a regex."""
    shape = payload.translate(_SHAPE)
    return b"eddd" in shape or b"esddd" in shape or _LONG_DIGIT_RUN in shape


# Built once: json.dumps/json.loads with any keyword build a new encoder or decoder per call.
# Both are stateless between calls (safe to share across threads).
# No circular-reference bookkeeping: a cycle still ends as RecursionError (the C encoder counts
# its depth), which encode_arguments reports like any other unencodable argument.
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
)
# JSONEncoder.encode builds a C encoder object per call (plus a closure and a markers dict);
# with check_circular off that object holds no per-call state, so one is built here with the
# very arguments JSONEncoder.iterencode passes, and called directly. None without _json.
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)  # not in the stubs
_C_ENCODE = (
    _c_make_encoder(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )
    if _c_make_encoder is not None
    else None
)
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_FLOAT_CHECKING_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float
)


_TEXT_ONLY = frozenset({str})

#: A \u escape in the surrogate range (a lone one, or half of a valid pair): only a payload
#: with one can decode to a str holding a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_surrogate(value: Any) -> bool:
    """Whether any string or key in decoded JSON ``value`` holds a surrogate code point.
    Iterative: a result may nest deeper than Python's recursion limit allows a walk."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item) is not None:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _keys_in_canonical_order(arguments: dict[str, Any]) -> bool:
    """Whether ``arguments`` iterates in RFC 8785's key order: sorted, by code point, which
    is its UTF-16 order for ASCII keys (beyond the BMP the two orders differ: not taken)."""
    keys = list(arguments)
    return keys == sorted(keys) and "".join(keys).isascii()


class GuestABI:
    """Names and codecs of ABI version 1 (see the module docstring)."""

    VERSION: ClassVar[int] = 1
    MEMORY: ClassVar[str] = "memory"
    ALLOC: ClassVar[str] = "rt_alloc"
    OOM: ClassVar[str] = "rt_oom"
    STATUS_OK: ClassVar[int] = 0
    STATUS_ERROR: ClassVar[int] = 1
    STATUS_EXHAUSTED: ClassVar[int] = 2
    STATUS_CUT: ClassVar[int] = 3

    @staticmethod
    def encode_arguments(arguments: dict[str, Any], canonical: bytes | None = None) -> bytes:
        """The arguments as compact UTF-8 JSON. Lone surrogates and NaN cannot cross.

        ``canonical`` is the arguments' RFC 8785 text when the caller has it (the broker's,
        ``ExecRequest.arguments_json``): for text-only arguments whose keys are in order it
        is these very bytes (property-tested), so it is returned as is."""
        try:
            if type(arguments) is dict:
                # Every key and value exactly a str (C-level maps: a generator over the
                # items was ~25 opcodes a call).
                if {*map(type, arguments), *map(type, arguments.values())} <= _TEXT_ONLY:
                    if canonical is not None and (
                        len(arguments) == 1 or _keys_in_canonical_order(arguments)
                    ):
                        return canonical
                    # Strings only (json_parse, base64, hash, csv, regex take text): for str,
                    # pydantic-core writes json.dumps's bytes (property-tested) as bytes, with
                    # no intermediate str; numbers it would format differently, so not those.
                    return _to_json(arguments)
                if _C_ENCODE is not None:
                    return "".join(_C_ENCODE(arguments, 0)).encode("utf-8")
            return _ENCODER.encode(arguments).encode("utf-8")
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidArguments(f"arguments cannot be passed to a wasm guest: {exc}") from exc

    @staticmethod
    def unpack(packed: int) -> tuple[int, int]:
        """(out_ptr, out_len) from the i64 a tool export returns (signed in wasmtime-py)."""
        packed &= 0xFFFF_FFFF_FFFF_FFFF
        return packed & 0xFFFF_FFFF, packed >> 32

    @staticmethod
    def decode_result(payload: bytes | bytearray, may_overflow: bool | None = None) -> Any:
        """The result JSON of a status-0 output.

        A number too big for a float (CPython would make it ``inf``, which JSON cannot carry)
        is the caller's data: ToolFailed. Anything else unparsable, or a string or key holding a
        lone surrogate (a ``\\ud800`` escape: results are strict UTF-8), is the guest's
        fault: SandboxError. ``may_overflow`` is ``_may_overflow(payload)`` when the caller already
        has it (the native helper computes it while the GIL is released)."""
        try:
            if _may_overflow(payload) if may_overflow is None else may_overflow:
                value = _FLOAT_CHECKING_DECODER.decode(payload.decode("utf-8"))
            else:
                try:
                    # pydantic-core's parser (jiter), ~2x CPython's json on typical results,
                    # with the same values: correctly rounded floats, exact big ints, last
                    # duplicate key wins. It refuses more (nesting past ~200, lone surrogate
                    # escapes, long ints): whatever it refuses, CPython's json decides, so both
                    # the values and the errors stay CPython's.
                    return _from_json(payload, allow_inf_nan=False, cache_strings="keys")
                except ValueError:
                    # Strict UTF-8 (the ABI's encoding): no BOM, no surrogates smuggled in as
                    # bytes.
                    value = _DECODER.decode(payload.decode("utf-8"))
            # CPython's json turns a lone surrogate escape ("\ud800") into a str no UTF-8
            # can carry; the audit and every consumer downstream would refuse it.
            if _SURROGATE_ESCAPE.search(payload) is not None and _has_surrogate(value):
                raise ValueError("a string holds a lone surrogate (results are strict UTF-8)")
            return value
        except _FloatOutOfRange as exc:
            raise ToolFailed(
                f"number {str(exc)[:40]} is out of the float range (CPython would make it inf)"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise SandboxError(f"wasm guest returned an invalid result: {exc}") from exc

    @staticmethod
    def decode_message(payload: bytes | bytearray) -> str:
        return bytes(payload).decode("utf-8", errors="replace")
