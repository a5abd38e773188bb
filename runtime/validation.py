"""JSON Schema (2020-12) validation of tool arguments and results.

Each schema is compiled once (jsonschema-rs) and cached by tool. Hazards handled here:

* remote ``$ref``: never fetched — the validator runs offline and its retriever refuses every
  URI, so a manifest cannot make the broker talk to the network or read files;
* ``pattern``: compiled with the linear-time regex engine (no backtracking, no ReDoS), and a
  schema whose pattern needs backtracking features fails to compile at load time;
* error messages name the JSON path and the rule that failed (``$.path: message [rule]``);
  the value a message quotes is cut to its first characters (jsonschema-rs quotes the whole
  instance: a 500,000-character argument made a 500,069-character message), and so is each
  key a path names (a 300,000-character ``env`` key made a 300,052-character message and
  the same path again in every reported error).
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs

from runtime._quote import QUOTE_MAX as _QUOTE_MAX
from runtime._quote import cut
from runtime.errors import InvalidArguments, ManifestError, ToolFailed

__all__ = ["SchemaValidator", "check_schema", "compile_schema"]

_MAX_REPORTED = 5
# _QUOTE_MAX: characters of a value (a string's text, an array's or object's JSON, a key
# in a path) an error message quotes; the rest is elided and the whole length said.
#: A message still longer (a value quoted otherwise than as JSON, a float written out in
#: full) keeps its start and its end, where the rule's words are.
_MESSAGE_MAX = 1024
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"remote $ref {uri!r} is not fetched: schemas must be self-contained")


def compile_schema(schema: dict[str, Any], *, where: str = "schema") -> SchemaValidator:
    try:
        validator = jsonschema_rs.Draft202012Validator(
            schema,
            validate_formats=False,
            retriever=_refuse_retrieval,
            pattern_options=jsonschema_rs.RegexOptions(size_limit=1 << 20),
        )
    except Exception as exc:  # jsonschema-rs raises ValueError/ReferencingError variants
        raise ManifestError(f"{where}: invalid JSON Schema: {exc}", field=where) from exc
    return SchemaValidator(validator)


def check_schema(schema: Any, *, where: str = "schema") -> None:
    """Raise ManifestError unless ``schema`` is a valid 2020-12 schema that compiles here."""
    if not isinstance(schema, dict):
        raise ManifestError(f"{where}: a JSON Schema must be an object", field=where)
    meta = jsonschema_rs.meta
    try:
        meta.validate(schema)
    except Exception as exc:
        raise ManifestError(f"{where}: not a valid JSON Schema: {exc}", field=where) from exc
    compile_schema(schema, where=where)


def _json_path(parts: list[str | int]) -> str:
    """``$.key[3].key`` with each long key cut as a quoted value is; a path still longer
    (many long keys) keeps its start and its end, where the failing member is named."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{cut(p)}"
    return _keep_ends(out)


def _keep_ends(text: str) -> str:
    if len(text) <= _MESSAGE_MAX:
        return text
    keep = _MESSAGE_MAX // 2
    return f"{text[:keep]}… ({len(text)} characters) …{text[-keep:]}"


def _bounded(message: str, instance: Any) -> str:
    """jsonschema-rs's ``message`` about ``instance`` with every value it quotes bounded: the
    instance's JSON when it is an array or object, any JSON string (the instance, a key)."""
    if len(message) <= _QUOTE_MAX:
        return message
    head, quote, tail = message, "", ""
    if isinstance(instance, (dict, list)):
        rendered = _compact(instance)
        at = message.find(rendered) if len(rendered) > _QUOTE_MAX else -1
        if at >= 0:
            # Cut apart from the string pass: the cut may end inside a string literal.
            head, tail = message[:at], message[at + len(rendered) :]
            quote = f"{rendered[:_QUOTE_MAX]}… ({len(rendered)} characters of JSON)"
    return _keep_ends(_short_strings(head) + quote + _short_strings(tail))


def _compact(value: Any) -> str:
    """``value`` as jsonschema-rs writes it (compact, non-ASCII as is); "" when it cannot be
    written (never for checked arguments and results)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return ""


def _short_strings(text: str) -> str:
    return _STRING_LITERAL.sub(_short_string, text) if len(text) > _QUOTE_MAX else text


def _short_string(match: re.Match[str]) -> str:
    literal = match.group()
    if len(literal) <= _QUOTE_MAX + 2:
        return literal
    try:
        value = json.loads(literal)
    except ValueError:  # not a JSON string after all: the message's length cap bounds it
        return literal
    if not isinstance(value, str) or len(value) <= _QUOTE_MAX:
        return literal
    cut = json.dumps(value[:_QUOTE_MAX], ensure_ascii=False)
    return f'{cut[:-1]}…" ({len(value)} characters)'


class SchemaValidator:
    """A compiled schema. ``validate_arguments`` raises InvalidArguments with path + rule."""

    __slots__ = ("_v",)

    def __init__(self, validator: Any) -> None:
        self._v = validator

    def errors(self, instance: Any) -> list[dict[str, str]]:
        if self._v.is_valid(instance):  # the fast path: one native call, no allocation
            return []
        found: list[dict[str, str]] = []
        for err in self._v.iter_errors(instance):
            schema_path = list(err.schema_path)
            rule = str(schema_path[-1]) if schema_path else "schema"
            found.append(
                {
                    "path": _json_path(list(err.instance_path)),
                    "rule": rule,
                    "message": _bounded(err.message, err.instance),
                }
            )
            if len(found) >= _MAX_REPORTED:
                break
        return found

    def validate_arguments(self, tool: str, arguments: Any) -> None:
        if self._v.is_valid(arguments):  # every call's path: errors()'s first step, inline
            return
        errs = self.errors(arguments)
        if errs:
            first = errs[0]
            raise InvalidArguments(
                f"{tool}: {first['path']}: {first['message']} [{first['rule']}]",
                path=first["path"],
                rule=first["rule"],
                errors=errs,
            )

    def validate_result(self, tool: str, result: Any) -> None:
        """A result that breaks the tool's own output schema is the tool's failure."""
        if self._v.is_valid(result):
            return
        errs = self.errors(result)
        if errs:
            first = errs[0]
            raise ToolFailed(
                f"{tool} returned a result that does not match its schema: "
                f"{first['path']}: {first['message']} [{first['rule']}]",
                path=first["path"],
                rule=first["rule"],
            )
