"""runtime: a secure execution runtime for untrusted LLM tool calls.

The public surface is this module; everything else is reachable through it or through the
documented sub-packages (``runtime.backends``, ``runtime.policy``, ``runtime.audit``,
``runtime.catalogue``, ``runtime.toolkit``)."""

from __future__ import annotations

from runtime.audit import AuditLog, VerifyReport
from runtime.backends.base import Backend, ExecOutcome, ExecRequest, Fingerprint
from runtime.backends.mock import MockBackend
from runtime.broker import Broker, Event, SyncBroker
from runtime.catalogue import Catalogue
from runtime.errors import (
    ApprovalRequired,
    AuditError,
    CallCancelled,
    CallRejected,
    ConfigError,
    ErrorType,
    ExecutionError,
    InternalError,
    InvalidArguments,
    InvalidCall,
    ManifestError,
    OutputTooLarge,
    PolicyDenied,
    PolicyError,
    ResourceLimitExceeded,
    RuntimeToolError,
    SandboxError,
    SandboxUnavailable,
    ToolFailed,
    ToolNotFound,
    ToolTimeout,
)
from runtime.models import Decision, Limits, ToolCall, ToolResult, ToolSpec
from runtime.policy import Policy
from runtime.shapes import normalize_call

__all__ = [
    "ApprovalRequired",
    "AuditError",
    "AuditLog",
    "Backend",
    "Broker",
    "CallCancelled",
    "CallRejected",
    "Catalogue",
    "ConfigError",
    "Decision",
    "ErrorType",
    "Event",
    "ExecOutcome",
    "ExecRequest",
    "ExecutionError",
    "Fingerprint",
    "InternalError",
    "InvalidArguments",
    "InvalidCall",
    "Limits",
    "ManifestError",
    "MockBackend",
    "OutputTooLarge",
    "Policy",
    "PolicyDenied",
    "PolicyError",
    "ResourceLimitExceeded",
    "RuntimeToolError",
    "SandboxError",
    "SandboxUnavailable",
    "SyncBroker",
    "ToolCall",
    "ToolFailed",
    "ToolNotFound",
    "ToolResult",
    "ToolSpec",
    "ToolTimeout",
    "VerifyReport",
    "normalize_call",
]

__version__ = "0.1.0"
