"""Tool definitions in each provider's format."""

from __future__ import annotations

from typing import Any, Literal

from runtime.models import BackendKind, ToolSpec

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


def _mcp_annotations(spec: ToolSpec, title: str, network_walled: bool) -> dict[str, Any]:
    """The one rule from a manifest to MCP's four hints (2025-03-26 onwards: readOnlyHint
    "does not modify its environment"; destructiveHint "may perform destructive updates",
    false meaning additive only; idempotentHint "repeated calls with the same arguments
    have no additional effect"; openWorldHint "may interact with an open world of
    external entities").

    The first three are what the manifest states (``ToolHints`` refuses a read-only
    destructive tool). openWorldHint is also what the sandbox grants, so a manifest cannot
    understate it: a tool that may ask the egress gateway, an external MCP server's tool,
    and a program run in the call sandbox (``sandbox.exec``) when ``network_walled`` is
    false (best_effort on a host with neither a network namespace nor seccomp: the
    program has the host's network) are open-world.
    """
    hints = spec.hints
    runs_programs = spec.backend == BackendKind.SUBPROCESS and spec.sandbox.exec
    open_world = (
        hints.open_world
        or spec.sandbox.egress
        or spec.backend == BackendKind.MCP
        or (runs_programs and not network_walled)
    )
    return {
        "title": title,
        "readOnlyHint": hints.read_only,
        "destructiveHint": hints.destructive,
        "idempotentHint": hints.idempotent,
        "openWorldHint": open_world,
    }


def export_tool(
    spec: ToolSpec, fmt: ExportFormat, *, network_walled: bool = True
) -> dict[str, Any]:
    """``spec`` as ``fmt`` defines a tool. ``network_walled``: whether the call sandbox
    keeps a program off the network on this host (MCP's openWorldHint of the tools that run
    programs; the MCP server probes it, a plain export assumes the sandbox as designed)."""
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
            "annotations": _mcp_annotations(spec, title, network_walled),
        }
        schema = _mcp_output_schema(spec)
        if schema is not None:
            out["outputSchema"] = schema
        return out
    raise ValueError(f"unknown export format {fmt!r}; expected one of {EXPORT_FORMATS}")
