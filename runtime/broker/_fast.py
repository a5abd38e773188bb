"""Building the broker's own result models without re-validating what it just built.

Every field of the ToolResult the broker returns is already typed by the time it is built:
``call_id``/``tool`` come from a validated ToolCall (or the bounded raw fallbacks), the result
value passed the tool's result schema, ``error`` is an ErrorInfo, ``usage`` a validated Usage,
times are datetimes the broker took itself. Running pydantic-core over them again costs ~10 µs
per call, a fifth of the per-call budget (DESIGN §10); ``BaseModel.model_construct`` is slower
still (it walks every field in Python to fill defaults).

Hazard: this skips validation, so it is only for values the broker constructed; anything a
backend or a caller handed in (usage numbers, raw call fields) is validated before it gets
here. ``tests/broker/test_fast_models.py`` checks that the result equals the validated model.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from runtime import _trusted
from runtime.models import ErrorInfo, ToolResult, Usage

__all__ = ["tool_result", "usage"]

_NO_EXTRA: dict[str, Any] = {}
_RESULT_FIELDS = frozenset(ToolResult.model_fields)
_USAGE_FIELDS = tuple(Usage.model_fields)
_EMPTY_USAGE = dict.fromkeys(_USAGE_FIELDS)
# The exact type each Usage field stores (``float | None`` -> float); the fast path of
# usage() takes only these.
_USAGE_TYPES: dict[str, type] = {
    name: next(t for t in (float, int) if info.annotation in (t | None, t))
    for name, info in Usage.model_fields.items()
}


#: Whether a signature (the keys of a usage dict, then the types of its values) takes the fast
#: path of usage(). A backend reports the same keys with the same types on every call (wasm:
#: fuel, peak_memory_bytes, cpu_ms, wall_ms), so one lookup replaces a check per item. Keys are
#: backend data: the memo is bounded.
_SIGNATURES: dict[tuple[Any, ...], bool] = {}
_SIGNATURES_MAX = 64


def _fits(data: dict[str, Any]) -> bool:
    return all(_USAGE_TYPES.get(key) is type(value) for key, value in data.items())


def usage(data: dict[str, Any]) -> Usage:
    """A Usage from backend-reported ``data``: built directly when every item is a known
    field holding exactly the type validation would store (a float in a float field, an int
    in an int field: what the wasm and mock backends report), else validated. Validation was
    ~5 µs of every call. ``tests/broker/test_fast_models.py`` compares the two."""
    signature = (*data, *map(type, data.values()))
    fits = _SIGNATURES.get(signature)
    if fits is None:
        fits = _fits(data)
        if len(_SIGNATURES) >= _SIGNATURES_MAX:
            _SIGNATURES.clear()
        _SIGNATURES[signature] = fits
    if not fits:
        return Usage.model_validate(data)
    fields = dict(_EMPTY_USAGE)
    fields.update(data)
    # extra="allow": an empty dict, as validation makes (a new one per model).
    return _trusted.model(Usage, fields, data, _NO_EXTRA)  # type: ignore[no-any-return]


def tool_result(
    *,
    call_id: str,
    tool: str,
    success: bool,
    result: Any,
    error: ErrorInfo | None,
    started_at: _dt.datetime,
    completed_at: _dt.datetime,
    duration_ms: float,
    backend: str | None,
    usage: Usage,
    decision: dict[str, Any] | None,
) -> ToolResult:
    """``ToolResult(...)`` for values the broker built and typed itself (see module doc)."""
    fields = {
        "call_id": call_id,
        "tool": tool,
        "success": success,
        "result": result,
        "error": error,
        "started_at": started_at,
        "completed_at": completed_at,
        "duration_ms": float(duration_ms),
        "backend": backend,
        "usage": usage,
        "decision": decision,
    }
    return _trusted.model(ToolResult, fields, _RESULT_FIELDS, None)  # type: ignore[no-any-return]
