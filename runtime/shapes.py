"""Normalise a tool call from any provider shape into a :class:`~runtime.models.ToolCall`.

Accepted shapes (DESIGN §7)::

    native               {"tool": NAME, "arguments": {...}, "call_id"?: ID}
    OpenAI chat          {"id"?: ID, "type": "function",
                          "function": {"name": NAME, "arguments": "<json string>"}}
    OpenAI Responses     {"type": "function_call", "call_id"?: ID, "name": NAME,
                          "arguments": "<json string>"}
    Anthropic            {"type": "tool_use", "id"?: ID, "name": NAME, "input": {...}}
    MCP                  {"name": NAME, "arguments": {...}}   (or a whole tools/call request)

Caps are checked *before* parsing (bytes, nesting depth, string length): a call is attacker
data and must not be able to make the broker allocate or recurse without bound.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from runtime.errors import InvalidArguments, InvalidCall
from runtime.models import ToolCall, new_call_id

__all__ = ["CallLimits", "normalize_call", "parse_call_bytes"]


@dataclass(frozen=True, slots=True)
class CallLimits:
    """Caps on one call, checked before and while parsing."""

    max_bytes: int = 1_048_576  # whole call, bytes (1 MiB)
    max_depth: int = 64  # nesting of arrays/objects
    max_string: int = 1_048_576  # longest single string, characters


DEFAULT_LIMITS = CallLimits()


def _depth_exceeds(text: str, max_depth: int) -> bool:
    """Bracket depth of JSON text without parsing it (brackets inside strings skipped)."""
    depth = 0
    in_str = False
    esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def _check_value(value: Any, limits: CallLimits, depth: int = 0, path: str = "$") -> None:
    if depth > limits.max_depth:
        raise InvalidArguments(
            f"{path}: nesting deeper than {limits.max_depth} levels",
            path=path,
            rule="max_depth",
        )
    if isinstance(value, str):
        if len(value) > limits.max_string:
            raise InvalidArguments(
                f"{path}: string of {len(value)} characters exceeds {limits.max_string}",
                path=path,
                rule="max_string",
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArguments(f"{path}: object keys must be strings", path=path)
            _check_value(v, limits, depth + 1, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_value(v, limits, depth + 1, f"{path}[{i}]")
    elif isinstance(value, float) and math.isnan(value):  # NaN never comes from strict JSON
        raise InvalidArguments(f"{path}: NaN is not JSON", path=path)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str, what: str, limits: CallLimits, cls: type[InvalidArguments]) -> Any:
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise cls(f"{what} exceeds {limits.max_bytes} bytes", rule="max_bytes")
    if _depth_exceeds(text, limits.max_depth):
        raise cls(f"{what} nests deeper than {limits.max_depth} levels", rule="max_depth")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise cls(f"{what} is not valid JSON: {exc}", rule="json") from exc


def parse_call_bytes(data: bytes | str, limits: CallLimits = DEFAULT_LIMITS) -> ToolCall:
    """Parse raw call text (a file, stdin, a request body) into a ToolCall."""
    if isinstance(data, bytes):
        if len(data) > limits.max_bytes:
            raise InvalidCall(f"call exceeds {limits.max_bytes} bytes", rule="max_bytes")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidCall(f"call is not UTF-8: {exc}") from exc
    return normalize_call(_loads(data, "call", limits, InvalidCall), limits)


def _arguments(raw: Any, shape: str, limits: CallLimits) -> dict[str, Any]:
    if raw is None:
        return {}
    if isinstance(raw, str):  # OpenAI sends arguments as a JSON *string*; it may be broken
        raw = _loads(raw, f"{shape} arguments", limits, InvalidArguments) if raw.strip() else {}
    if not isinstance(raw, dict):
        raise InvalidArguments(
            f"{shape} arguments must be a JSON object, got {type(raw).__name__}",
            path="$",
            rule="type",
        )
    return raw


def _name(value: Any, shape: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidCall(f"{shape} call has no tool name")
    return value


def _call_id(value: Any) -> str:
    if isinstance(value, str) and 0 < len(value) <= 256:
        return value
    return new_call_id()


def normalize_call(obj: Any, limits: CallLimits = DEFAULT_LIMITS) -> ToolCall:
    """Turn a decoded call of any accepted shape into a ToolCall, or raise InvalidCall."""
    if isinstance(obj, ToolCall):
        _check_value(obj.arguments, limits)
        return obj
    if not isinstance(obj, dict):
        raise InvalidCall(f"a call must be a JSON object, got {type(obj).__name__}")
    _check_value(obj, limits)
    kind = obj.get("type")
    context: dict[str, Any] = {}
    if kind == "function" and isinstance(obj.get("function"), dict):
        fn = obj["function"]
        shape = "openai"
        name = _name(fn.get("name"), shape)
        args = _arguments(fn.get("arguments"), shape, limits)
        call_id = _call_id(obj.get("id"))
    elif kind == "function_call":
        shape = "openai-responses"
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("arguments"), shape, limits)
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
    elif kind == "tool_use":
        shape = "anthropic"
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("input"), shape, limits)
        call_id = _call_id(obj.get("id"))
    elif "tool" in obj:
        shape = "native"
        name = _name(obj.get("tool"), shape)
        args = _arguments(obj.get("arguments"), shape, limits)
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
        if isinstance(obj.get("context"), dict):
            context.update(obj["context"])
    elif obj.get("method") == "tools/call" and isinstance(obj.get("params"), dict):
        shape = "mcp"
        params = obj["params"]
        name = _name(params.get("name"), shape)
        args = _arguments(params.get("arguments"), shape, limits)
        call_id = _call_id(obj.get("id") if isinstance(obj.get("id"), str) else None)
    elif "name" in obj and ("arguments" in obj or len(obj) == 1):
        shape = "mcp"
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("arguments"), shape, limits)
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
    else:
        raise InvalidCall(
            "unrecognised call shape: expected native {tool, arguments}, OpenAI "
            "{type: function, function}, Responses {type: function_call}, Anthropic "
            "{type: tool_use} or MCP {name, arguments}"
        )
    context["shape"] = shape
    return ToolCall(call_id=call_id, tool=name, arguments=args, context=context)
