"""The runtime's exceptions: one tree, mapped to a result ``error.type`` at one boundary.

Errors are results, never exceptions escaping to the caller: the broker catches every
:class:`RuntimeToolError` at its boundary (``runtime.broker``) and turns it into a
:class:`~runtime.models.ToolResult` whose ``error.type`` is the class's :attr:`error_type`.
Anything else that escapes a layer is a bug and becomes ``internal_error``.

Lower-layer errors (``OSError``, msgpack, wasmtime, sqlite3, TOML) are translated into this
tree where they happen, with ``raise ... from exc``, so the cause is kept for debugging.

The tree::

    RuntimeToolError                     base; never raised itself
    ├── CallRejected                     the call never ran
    │   ├── ToolNotFound                 tool_not_found
    │   ├── InvalidArguments             invalid_arguments   (bad shape, bad JSON, schema)
    │   │   └── InvalidCall              invalid_arguments   (not a tool call at all)
    │   ├── PolicyDenied                 policy_denied
    │   └── ApprovalRequired             approval_required   (an ``ask`` with no approver)
    ├── ExecutionError                   the call started and did not end well
    │   ├── ToolFailed                   tool_error          (the tool itself reported failure)
    │   ├── ToolTimeout                  timeout             (wall clock, fuel or epoch)
    │   ├── ResourceLimitExceeded        resource_limit      (memory, pids, cpu, fsize, fuel)
    │   ├── OutputTooLarge               output_too_large
    │   ├── SandboxError                 sandbox_error       (set-up failed, child misbehaved)
    │   │   └── SandboxUnavailable       sandbox_error       (strict mode, mechanism missing)
    │   ├── DeniedPathWritten            policy_denied       (the call created a path
    │   │                                                     paths.deny_write covers: moved
    │   │                                                     aside, or not checkable)
    │   └── CallCancelled                internal_error      (cancelled from the API)
    ├── ConfigError                      internal_error      (bad policy / manifest / config)
    │   ├── PolicyError                  a policy file that does not load
    │   └── ManifestError                a tool manifest that does not load
    ├── AuditError                       internal_error      (the audit log cannot be written
    │                                                         or read: fail closed)
    └── InternalError                    internal_error
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = [
    "CHILD_ERROR_TYPES",
    "ApprovalRequired",
    "AuditError",
    "AuditFileRefused",
    "CallCancelled",
    "CallRejected",
    "ConfigError",
    "DeniedPathWritten",
    "ErrorType",
    "ExecutionError",
    "InternalError",
    "InvalidArguments",
    "InvalidCall",
    "ManifestError",
    "OutputTooLarge",
    "PolicyDenied",
    "PolicyError",
    "ResourceLimitExceeded",
    "RuntimeToolError",
    "SandboxError",
    "SandboxUnavailable",
    "ToolFailed",
    "ToolNotFound",
    "ToolTimeout",
]


class ErrorType(enum.StrEnum):
    """The ``error.type`` values of the result JSON (DESIGN §7). A contract: never rename."""

    TOOL_NOT_FOUND = "tool_not_found"
    INVALID_ARGUMENTS = "invalid_arguments"
    POLICY_DENIED = "policy_denied"
    APPROVAL_REQUIRED = "approval_required"
    TIMEOUT = "timeout"
    RESOURCE_LIMIT = "resource_limit"
    SANDBOX_ERROR = "sandbox_error"
    TOOL_ERROR = "tool_error"
    OUTPUT_TOO_LARGE = "output_too_large"
    INTERNAL_ERROR = "internal_error"

    def __str__(self) -> str:
        return self.value


class RuntimeToolError(Exception):
    """Base of every error the runtime raises on purpose.

    ``details`` is structured, JSON-safe data for the result (a JSON path, a rule id, a limit
    name); ``message`` is one human sentence naming what is wrong.
    """

    error_type: ErrorType = ErrorType.INTERNAL_ERROR

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details


class CallRejected(RuntimeToolError):
    """The call was refused before anything ran."""


class ToolNotFound(CallRejected):
    error_type = ErrorType.TOOL_NOT_FOUND


class InvalidArguments(CallRejected):
    error_type = ErrorType.INVALID_ARGUMENTS


class InvalidCall(InvalidArguments):
    """The input is not a recognisable tool call (unknown shape, not JSON, too big)."""


class PolicyDenied(CallRejected):
    error_type = ErrorType.POLICY_DENIED


class ApprovalRequired(CallRejected):
    error_type = ErrorType.APPROVAL_REQUIRED


class ExecutionError(RuntimeToolError):
    """The call started and did not end well. ``usage`` is what was measured, if anything."""

    def __init__(self, message: str, *, usage: dict[str, Any] | None = None, **details: Any):
        super().__init__(message, **details)
        self.usage: dict[str, Any] = usage or {}


class ToolFailed(ExecutionError):
    error_type = ErrorType.TOOL_ERROR


class ToolTimeout(ExecutionError):
    error_type = ErrorType.TIMEOUT


class ResourceLimitExceeded(ExecutionError):
    error_type = ErrorType.RESOURCE_LIMIT


class OutputTooLarge(ExecutionError):
    error_type = ErrorType.OUTPUT_TOO_LARGE


class SandboxError(ExecutionError):
    error_type = ErrorType.SANDBOX_ERROR


class SandboxUnavailable(SandboxError):
    """Strict mode and a required isolation mechanism is missing on this host."""


class DeniedPathWritten(ExecutionError):
    """The call created an entry on a path the policy denies writing (``paths.deny_write``
    globs that matched nothing when it started: ``.git`` in a workspace without one). It
    was renamed in place once the call ended (``details["quarantined"]``: old and new
    paths), or the check could not finish (``details["unchecked"]``)."""

    error_type = ErrorType.POLICY_DENIED


class CallCancelled(ExecutionError):
    error_type = ErrorType.INTERNAL_ERROR


class ConfigError(RuntimeToolError):
    """A configuration file (policy, manifest) is invalid. ``details`` names file/line/field."""


class PolicyError(ConfigError):
    pass


class ManifestError(ConfigError):
    pass


class AuditError(RuntimeToolError):
    """The audit log cannot be written or read. The broker fails closed on it."""


class AuditFileRefused(AuditError, ConfigError):
    """The audit log's name, or a name beside it that the log's files use (a journal,
    ``<log>.rtj-…``), holds something the runtime refuses to open: a FIFO, a device, a
    directory; for a journal also a symlink, another user's file, a file others may write.
    Also a log whose directory does not exist (not created), another program's SQLite
    database (tables of its own, no audit records: an ``audit_records`` table without the
    log's columns is not a log's) and a file that is not a SQLite database (both left
    untouched). An AuditError (the log is not opened) that is also a ConfigError: it is the
    user's to remove or rename (``runtime exec`` and ``serve`` exit 64 naming it)."""


class InternalError(RuntimeToolError):
    pass


#: The class raised for an ``error.type`` that crosses a process boundary as data (a sandboxed
#: tool's error frame, a broker reply). Only these types may be claimed by a tool child,
#: and ``invalid_arguments`` (InvalidArguments, which carries no usage: the tool refused its
#: arguments); anything else it claims is reported as ``tool_error``.
CHILD_ERROR_TYPES: dict[ErrorType, type[ExecutionError]] = {
    ErrorType.TOOL_ERROR: ToolFailed,
    ErrorType.TIMEOUT: ToolTimeout,
    ErrorType.RESOURCE_LIMIT: ResourceLimitExceeded,
    ErrorType.OUTPUT_TOO_LARGE: OutputTooLarge,
}
