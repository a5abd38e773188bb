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

The depth cap is one rule in every shape: arguments nest at most ``CallLimits.max_depth``
levels of arrays and objects, the arguments object being level 1 (scalars are not a level).
The envelope a shape wraps around its arguments is not counted: it depended on the shape,
and ``data`` of 63 levels, which the json tools' manifests promise, was refused as call text
and accepted as a dict.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime import _speedups, _trusted
from runtime._quote import cut
from runtime.errors import InvalidArguments, InvalidCall
from runtime.models import ToolCall, new_call_id

__all__ = [
    "ENVELOPE_DEPTH",
    "CallLimits",
    "call_text_too_deep",
    "normalize_call",
    "parse_call_bytes",
]


@dataclass(frozen=True, slots=True)
class CallLimits:
    """Caps on one call, checked before and while parsing."""

    max_bytes: int = 1_048_576  # whole call, bytes (1 MiB)
    #: Levels of arrays/objects in the arguments, the arguments object being level 1.
    max_depth: int = 64
    max_string: int = 1_048_576  # longest single string, characters


DEFAULT_LIMITS = CallLimits()

#: The integers an argument may hold: what msgpack frames carry to the sandbox (int64 and
#: uint64). A larger one failed late: an OverflowError in the frame encoder (internal_error),
#: or, past CPython's 4300-digit int-to-text limit, a ValueError out of the audit encoder
#: that escaped Broker.call with no record of the call. A tool that needs bigger numbers
#: takes them as strings.
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1


#: Arrays/objects a call's envelope may put around its arguments object: MCP's
#: ``{"params": {"arguments": ...}}`` and OpenAI's ``{"function": {"arguments": ...}}``. Call
#: text is refused unparsed past ``max_depth`` plus these (its shape is not known before it
#: is parsed); the walk after parsing applies the exact rule.
ENVELOPE_DEPTH = 2


def call_text_too_deep(text: str, limits: CallLimits) -> bool:
    """Whether call text nests too deep for any shape's arguments to be within the cap."""
    return _depth_exceeds(text, limits.max_depth + ENVELOPE_DEPTH)


def _depth_message(where: str, max_depth: int) -> str:
    return (
        f"{where} deeper than {max_depth} levels of arrays and objects "
        "(the arguments object is level 1)"
    )


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


def _check_value(value: Any, limits: CallLimits, root: str = "$", envelope: int = 0) -> None:
    """Raise InvalidArguments for the first value beyond ``limits`` (depth, string length) or
    not JSON data (NaN, infinity, a non-text key, a lone surrogate, an integer outside
    INT_MIN..INT_MAX, a value of any other type than str, dict, list, int, float, bool, None).
    ``root``: the JSONPath of ``value`` in the call, which the error's path starts with.
    ``envelope``: the arrays/objects around the arguments object in ``value`` (0: ``value``
    is the arguments), which the depth cap does not count.

    Runs on every call over every argument: the walk builds no path strings; the JSONPath of a
    violation is assembled only when there is one.
    """
    max_depth = limits.max_depth + envelope
    found = _find(value, max_depth, limits.max_string)
    if found is None:
        return
    if found is NotImplemented:  # a value the C walk leaves to the reference walk
        found = _violation(value, max_depth, limits.max_string, 0)
        if found is None:
            return
    rule, keys = found
    # A long key is cut (runtime._quote): a 300,000-character key made a message as long.
    path = root + "".join(f"[{k}]" if type(k) is int else f".{cut(k)}" for k in reversed(keys))
    if rule == "max_depth":
        raise InvalidArguments(
            _depth_message(f"{path}: nesting", limits.max_depth), path=path, rule=rule
        )
    if rule == "max_string":
        raise InvalidArguments(
            f"{path}: string of {len(_at(value, keys))} characters exceeds {limits.max_string}",
            path=path,
            rule=rule,
        )
    if rule == "key":
        raise InvalidArguments(f"{path}: object keys must be strings", path=path)
    if rule == "unicode":
        raise InvalidArguments(
            f"{path}: holds a lone UTF-16 surrogate (not Unicode text)", path=path, rule=rule
        )
    if rule == "integer":
        raise InvalidArguments(
            f"{path}: integer outside the 64-bit range (-2**63 .. 2**64-1)", path=path, rule=rule
        )
    if rule == "type":
        name = type(_at(value, keys)).__name__
        raise InvalidArguments(f"{path}: a {name} is not JSON data", path=path, rule=rule)
    what = "NaN" if math.isnan(_at(value, keys)) else "infinity"
    raise InvalidArguments(f"{path}: {what} is not JSON", path=path)


def _at(value: Any, keys: list[Any]) -> Any:
    for k in reversed(keys):
        value = value[k]
    return value


def _violation(
    value: Any, max_depth: int, max_string: int, depth: int
) -> tuple[str, list[Any]] | None:
    """``(rule, keys innermost first)`` of the first violation under ``value``, else None.
    ``depth``: the arrays/objects around ``value``. Only arrays and objects are levels: one
    is refused at level ``depth + 1`` past ``max_depth``; a scalar never is."""
    if isinstance(value, str):
        if len(value) > max_string:
            return ("max_string", [])
        return ("unicode", []) if _not_text(value) else None
    if isinstance(value, dict):
        if depth >= max_depth:
            return ("max_depth", [])
        for k, v in value.items():
            if not isinstance(k, str):
                return ("key", [])
            if _not_text(k):  # named by the object holding it, as JSON paths have no keys
                return ("unicode", [])
            if type(v) is str:  # the common leaf, checked without a call
                if len(v) > max_string:
                    return ("max_string", [k])
                if not v.isascii() and _not_text(v):
                    return ("unicode", [k])
                continue
            found = _violation(v, max_depth, max_string, depth + 1)
            if found is not None:
                found[1].append(k)
                return found
    elif isinstance(value, list):
        if depth >= max_depth:
            return ("max_depth", [])
        for i, v in enumerate(value):
            found = _violation(v, max_depth, max_string, depth + 1)
            if found is not None:
                found[1].append(i)
                return found
    elif isinstance(value, float):
        if not math.isfinite(value):  # never from strict JSON
            return ("nan", [])
    elif isinstance(value, int):  # bool too: always in range
        if not INT_MIN <= value <= INT_MAX:
            return ("integer", [])
    elif value is not None:
        # bytes, a tuple, a set, any object: the Python API takes what it is given, and
        # nothing downstream (schema, audit record, frame) holds it as JSON.
        return ("type", [])
    return None


def _not_text(value: Any) -> bool:
    """True for a string holding a surrogate code point (a lone UTF-16 half, or both halves
    of a pair as two code points): not Unicode text, so no audit record, file name or pipe
    can carry it. A dict or ToolCall from the Python API brings such strings as they are.
    Hazard: ``value`` passed ``isinstance(value, str)``, which an object can fake through
    ``__class__``; only real str data is looked at."""
    if str not in type(value).__mro__ or str.isascii(value):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _py_find(value: Any, max_depth: int, max_string: int) -> Any:
    return _violation(value, max_depth, max_string, 0)


def _first_find(value: Any, max_depth: int, max_string: int) -> Any:
    # Deferred to the first call: every process imports this module, and only the ones that
    # check calls should build or load the accelerator.
    _select(_speedups.module())
    return _find(value, max_depth, max_string)


#: The caps walk in use: the accelerator's ``violation`` (the same answer as _violation, or
#: NotImplemented for values it leaves to it: anything not exactly a JSON type, nesting past
#: its C depth cap, caps that are not plain ints), else _violation itself.
_find: Callable[[Any, int, int], Any] = _first_find


def _select(mod: Any) -> None:
    """Use the accelerator ``mod`` (:func:`runtime._speedups.module`), or the Python walk
    when None. Tests call it to run the same inputs through both."""
    global _find  # noqa: PLW0603 - the one switch, read on every call
    _find = _py_find if mod is None else mod.violation


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    """A JSON number as a float, refusing one beyond a double ('1e400' became infinity,
    which no audit record can hold: the call failed closed with no record of it)."""
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is beyond the range of a double")
    return value


def _loads(
    text: str, what: str, limits: CallLimits, cls: type[InvalidArguments], envelope: int
) -> Any:
    """``text`` parsed, refused unparsed past its bytes cap or past ``max_depth`` plus
    ``envelope`` levels of brackets (the levels around the arguments object it may hold)."""
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise cls(f"{what} exceeds {limits.max_bytes} bytes", rule="max_bytes")
    if _depth_exceeds(text, limits.max_depth + envelope):
        raise cls(_depth_message(f"{what} nests", limits.max_depth), rule="max_depth")
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as exc:
        raise cls(f"{what} is not valid JSON: {exc}", rule="json") from exc
    # Rare: walk only when the text has such an escape (a substring test first: cheapest).
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None:
        keys = _lone_surrogate(value)
        if keys is not None:
            path = "$" + "".join(f"[{k}]" if type(k) is int else f".{k}" for k in keys)
            raise cls(
                f"{path}: {what} has a lone UTF-16 surrogate escape (not Unicode text)",
                path=path,
                rule="unicode",
            )
    return value


#: A ``\uD800``-``\uDFFF`` escape: valid JSON, but alone (not in a pair) it decodes to a
#: lone surrogate, which no file name, pipe or audit record can carry (the audit log refused
#: the write-ahead record: internal_error, and no record of the call).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> list[Any] | None:
    """Keys (outermost first) to the first string or key with a lone surrogate, else None;
    for a key, the keys of the object holding it. Depth is bounded by the caps checked
    before parsing."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return []
        return None
    items: Any = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for k, v in items:
        if isinstance(k, str) and _lone_surrogate(k) is not None:
            return []
        found = _lone_surrogate(v)
        if found is not None:
            return [k, *found]
    return None


def parse_call_bytes(data: bytes | str, limits: CallLimits = DEFAULT_LIMITS) -> ToolCall:
    """Parse raw call text (a file, stdin, a request body) into a ToolCall."""
    if isinstance(data, bytes):
        if len(data) > limits.max_bytes:
            raise InvalidCall(f"call exceeds {limits.max_bytes} bytes", rule="max_bytes")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidCall(f"call is not UTF-8: {exc}") from exc
    return normalize_call(_loads(data, "call", limits, InvalidCall, ENVELOPE_DEPTH), limits)


def _arguments(raw: Any, shape: str, limits: CallLimits, where: str) -> dict[str, Any]:
    """The arguments at ``where`` (their JSONPath in the call), decoded when they are a JSON
    string (OpenAI's shapes; any shape's may be). A decoded string gets the value check the
    whole call got before (``_check_value``: integer range, value types, depth, string
    length): it skipped it, and an integer past 64 bits failed later as internal_error
    (exit 70, msgpack's OverflowError) where the same call as an object is invalid (65)."""
    if raw is None:
        return {}
    if isinstance(raw, str):  # OpenAI sends arguments as a JSON *string*; it may be broken
        what = f"{shape} arguments"
        raw = _loads(raw, what, limits, InvalidArguments, 0) if raw.strip() else {}
        _check_value(raw, limits, where)
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
        for field in ("call_id", "tool"):
            if _not_text(getattr(obj, field)):
                path = f"$.{field}"
                raise InvalidArguments(
                    f"{path}: holds a lone UTF-16 surrogate (not Unicode text)",
                    path=path,
                    rule="unicode",
                )
        return obj
    if not isinstance(obj, dict):
        raise InvalidCall(f"a call must be a JSON object, got {type(obj).__name__}")
    shape = _shape(obj)
    # The whole call, its envelope uncounted by the depth cap (for an unrecognised shape:
    # one level, as most shapes have).
    _check_value(obj, limits, envelope=1 if shape is None else _ENVELOPES[shape])
    if shape == "openai":
        fn = obj["function"]
        name = _name(fn.get("name"), shape)
        args = _arguments(fn.get("arguments"), shape, limits, "$.function.arguments")
        call_id = _call_id(obj.get("id"))
    elif shape == "openai-responses":
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("arguments"), shape, limits, "$.arguments")
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
    elif shape == "anthropic":
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("input"), shape, limits, "$.input")
        call_id = _call_id(obj.get("id"))
    elif shape == "native":
        name = _name(obj.get("tool"), shape)
        args = _arguments(obj.get("arguments"), shape, limits, "$.arguments")
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
        # A "context" in the call body is the model's text, not the caller's: session,
        # profile and environment come from the API (Broker.call), never from the call.
    elif shape == "mcp-request":
        params = obj["params"]
        name = _name(params.get("name"), "mcp")
        args = _arguments(params.get("arguments"), "mcp", limits, "$.params.arguments")
        call_id = _call_id(obj.get("id") if isinstance(obj.get("id"), str) else None)
    elif shape == "mcp":
        name = _name(obj.get("name"), shape)
        args = _arguments(obj.get("arguments"), shape, limits, "$.arguments")
        call_id = _call_id(obj.get("call_id") or obj.get("id"))
    else:
        raise InvalidCall(
            "unrecognised call shape: expected native {tool, arguments}, OpenAI "
            "{type: function, function}, Responses {type: function_call}, Anthropic "
            "{type: tool_use} or MCP {name, arguments}"
        )
    return _tool_call(call_id, name, args, {"shape": "mcp" if shape == "mcp-request" else shape})


#: Arrays/objects around each shape's arguments object (at most ENVELOPE_DEPTH).
_ENVELOPES = {
    "openai": 2,  # $.function.arguments
    "openai-responses": 1,
    "anthropic": 1,
    "native": 1,
    "mcp-request": 2,  # $.params.arguments
    "mcp": 1,
}


def _shape(obj: dict[Any, Any]) -> str | None:
    """The shape of the call ``obj`` (a key of _ENVELOPES; an MCP ``tools/call`` request is
    ``mcp-request``), else None. Reads only top-level members and the dicts it names."""
    kind = obj.get("type")
    if kind == "function" and isinstance(obj.get("function"), dict):
        return "openai"
    if kind == "function_call":
        return "openai-responses"
    if kind == "tool_use":
        return "anthropic"
    if "tool" in obj:
        return "native"
    if obj.get("method") == "tools/call" and isinstance(obj.get("params"), dict):
        return "mcp-request"
    if "name" in obj and ("arguments" in obj or len(obj) == 1):
        return "mcp"
    return None


_CALL_FIELDS = frozenset(ToolCall.model_fields)


def _tool_call(call_id: str, tool: str, args: dict[str, Any], context: dict[str, Any]) -> ToolCall:
    """``ToolCall(call_id=..., tool=..., arguments=..., context=...)``: built without
    pydantic-core when every value already has the exact type validation would produce (text
    names, a dict with text keys; validation would copy the dict, so this copies it too),
    else validated. Validation was ~5 µs of a call's ~100. Hazard: only for exact types;
    ``tests/broker/test_shapes_trusted.py`` checks the result equals the validated model."""
    if type(call_id) is str and type(tool) is str and type(args) is dict:
        for key in args:
            if type(key) is not str:
                break
        else:
            return _trusted.model(  # type: ignore[no-any-return]
                ToolCall,
                {"call_id": call_id, "tool": tool, "arguments": dict(args), "context": context},
                _CALL_FIELDS,
                None,  # extra="forbid"
            )
    return ToolCall(call_id=call_id, tool=tool, arguments=args, context=context)
