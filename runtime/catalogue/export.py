"""Tool definitions in each provider's format."""

from __future__ import annotations

from typing import Any, Literal

from runtime.models import ToolSpec

__all__ = ["EXPORT_FORMATS", "ExportFormat", "export_tool"]

ExportFormat = Literal["native", "openai", "openai-responses", "anthropic", "mcp"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = (
    "native",
    "openai",
    "openai-responses",
    "anthropic",
    "mcp",
)


def _mcp_output_schema(spec: ToolSpec) -> dict[str, Any] | None:
    # MCP requires an outputSchema to be an object schema; ours always are.
    if spec.result and spec.result.get("type") == "object":
        return spec.result
    return None


def export_tool(spec: ToolSpec, fmt: ExportFormat) -> dict[str, Any]:
    if fmt == "native":
        return {
            "name": spec.name,
            "description": spec.description,
            "category": spec.category,
            "parameters": spec.parameters,
            "result": spec.result,
            "backend": spec.backend.value,
            "hints": spec.hints.model_dump(),
        }
    if fmt == "openai":
        return {
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": spec.parameters,
            },
        }
    if fmt == "openai-responses":
        return {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    if fmt == "anthropic":
        return {
            "name": spec.name,
            "description": spec.description,
            "input_schema": spec.parameters,
        }
    if fmt == "mcp":
        # The display name: Tool.title since MCP 2025-06-18, annotations.title before it
        # (clients show title, then annotations.title, then name); both the same.
        title = spec.name.replace("_", " ")
        out: dict[str, Any] = {
            "name": spec.name,
            "title": title,
            "description": spec.description,
            "inputSchema": spec.parameters,
            "annotations": {
                "title": title,
                "readOnlyHint": spec.hints.read_only,
                "destructiveHint": spec.hints.destructive,
                "idempotentHint": spec.hints.idempotent,
                "openWorldHint": spec.hints.open_world,
            },
        }
        schema = _mcp_output_schema(spec)
        if schema is not None:
            out["outputSchema"] = schema
        return out
    raise ValueError(f"unknown export format {fmt!r}; expected one of {EXPORT_FORMATS}")
