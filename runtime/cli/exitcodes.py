"""Exit codes of ``runtime exec`` (DESIGN §7) — a contract, derived from the result only."""

from __future__ import annotations

from runtime.errors import ErrorType
from runtime.models import ToolResult

__all__ = [
    "EX_DENIED",
    "EX_INTERNAL",
    "EX_INVALID",
    "EX_OK",
    "EX_TOOL_FAILED",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "exit_code_for",
]

EX_OK = 0
EX_TOOL_FAILED = 1
EX_USAGE = 64
EX_INVALID = 65
EX_UNAVAILABLE = 69
EX_INTERNAL = 70
EX_DENIED = 77

_BY_TYPE = {
    ErrorType.TOOL_NOT_FOUND: EX_INVALID,
    ErrorType.INVALID_ARGUMENTS: EX_INVALID,
    ErrorType.POLICY_DENIED: EX_DENIED,
    ErrorType.APPROVAL_REQUIRED: EX_DENIED,
    ErrorType.TIMEOUT: EX_TOOL_FAILED,
    ErrorType.RESOURCE_LIMIT: EX_TOOL_FAILED,
    ErrorType.TOOL_ERROR: EX_TOOL_FAILED,
    ErrorType.OUTPUT_TOO_LARGE: EX_TOOL_FAILED,
    ErrorType.SANDBOX_ERROR: EX_TOOL_FAILED,
    ErrorType.INTERNAL_ERROR: EX_INTERNAL,
}


def exit_code_for(result: ToolResult) -> int:
    if result.success or result.error is None:
        return EX_OK
    if result.error.type is ErrorType.SANDBOX_ERROR and result.error.details.get("unavailable"):
        return EX_UNAVAILABLE
    return _BY_TYPE[result.error.type]
