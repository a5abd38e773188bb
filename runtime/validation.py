"""JSON Schema (2020-12) validation of tool arguments and results.

Each schema is compiled once (jsonschema-rs) and cached by tool. Hazards handled here:

* remote ``$ref``: never fetched — the validator runs offline and its retriever refuses every
  URI, so a manifest cannot make the broker talk to the network or read files;
* ``pattern``: compiled with the linear-time regex engine (no backtracking, no ReDoS), and a
  schema whose pattern needs backtracking features fails to compile at load time;
* error messages name the JSON path and the rule that failed (``$.path: message [rule]``).
"""

from __future__ import annotations

from typing import Any

import jsonschema_rs

from runtime.errors import InvalidArguments, ManifestError, ToolFailed

__all__ = ["SchemaValidator", "check_schema", "compile_schema"]

_MAX_REPORTED = 5


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
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


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
                {"path": _json_path(list(err.instance_path)), "rule": rule, "message": err.message}
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
