"""runtime: a secure execution runtime for untrusted LLM tool calls."""

from __future__ import annotations

from runtime.errors import ErrorType, RuntimeToolError
from runtime.models import Decision, Limits, ToolCall, ToolResult, ToolSpec

__all__ = [
    "Decision",
    "ErrorType",
    "Limits",
    "RuntimeToolError",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
]

__version__ = "0.1.0"
