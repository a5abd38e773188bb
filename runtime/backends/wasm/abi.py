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
      (``resource_limit``).
``rt_oom() -> i32`` (optional)
    1 when the guest trapped on purpose because ``memory.grow`` failed; lets the host report
    ``resource_limit`` as data instead of guessing from the trap.

Everything the guest returns is hostile input to the host: the output is bounds-checked,
size-capped before it is copied, and parsed with a JSON parser that refuses NaN/Infinity.
"""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

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


# Built once: json.dumps/json.loads with any keyword build a new encoder or decoder per call.
# Both are stateless between calls (safe to share across threads).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_FLOAT_CHECKING_DECODER = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float
)


class GuestABI:
    """Names and codecs of ABI version 1 (see the module docstring)."""

    VERSION: ClassVar[int] = 1
    MEMORY: ClassVar[str] = "memory"
    ALLOC: ClassVar[str] = "rt_alloc"
    OOM: ClassVar[str] = "rt_oom"
    STATUS_OK: ClassVar[int] = 0
    STATUS_ERROR: ClassVar[int] = 1
    STATUS_EXHAUSTED: ClassVar[int] = 2

    @staticmethod
    def encode_arguments(arguments: dict[str, Any]) -> bytes:
        """The arguments as compact UTF-8 JSON. Lone surrogates and NaN cannot cross."""
        try:
            return _ENCODER.encode(arguments).encode("utf-8")
        except (ValueError, TypeError, RecursionError) as exc:
            raise InvalidArguments(f"arguments cannot be passed to a wasm guest: {exc}") from exc

    @staticmethod
    def unpack(packed: int) -> tuple[int, int]:
        """(out_ptr, out_len) from the i64 a tool export returns (signed in wasmtime-py)."""
        packed &= 0xFFFF_FFFF_FFFF_FFFF
        return packed & 0xFFFF_FFFF, packed >> 32

    @staticmethod
    def decode_result(payload: bytes | bytearray) -> Any:
        """The result JSON of a status-0 output.

        A number too big for a float (CPython would make it ``inf``, which JSON cannot carry)
        is the caller's data: ToolFailed. Anything else unparsable is the guest's fault:
        SandboxError."""
        try:
            # Strict UTF-8 (the ABI's encoding): no BOM, no surrogates smuggled in as bytes.
            text = payload.decode("utf-8")
            # No '.', 'e' or 'E' anywhere: no float, so skip the per-float hook. (A regex
            # for "an exponent >= 100" measured slower than the hook on typical documents.)
            if "." not in text and "e" not in text and "E" not in text:
                return _DECODER.decode(text)
            return _FLOAT_CHECKING_DECODER.decode(text)
        except _FloatOutOfRange as exc:
            raise ToolFailed(
                f"number {str(exc)[:40]} is out of the float range (CPython would make it inf)"
            ) from exc
        except (ValueError, RecursionError) as exc:
            raise SandboxError(f"wasm guest returned an invalid result: {exc}") from exc

    @staticmethod
    def decode_message(payload: bytes | bytearray) -> str:
        return bytes(payload).decode("utf-8", errors="replace")
