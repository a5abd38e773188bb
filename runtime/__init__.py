"""runtime: a secure execution runtime for untrusted LLM tool calls.

The public surface is this module; everything else is reachable through it or through the
documented sub-packages (``runtime.backends``, ``runtime.policy``, ``runtime.audit``,
``runtime.catalogue``, ``runtime.toolkit``)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from runtime.audit import AuditLog, VerifyReport
    from runtime.backends.base import Backend, ExecOutcome, ExecRequest, Fingerprint
    from runtime.backends.mock import MockBackend
    from runtime.broker import Broker, Event, SyncBroker
    from runtime.catalogue import Catalogue
    from runtime.models import Decision, Limits, ToolCall, ToolResult, ToolSpec
    from runtime.policy import Policy
    from runtime.shapes import normalize_call

# Imported on first use (PEP 562), not with the package: a ``runtime`` process loads only
# what its command needs (``runtime tools`` no policy engine, audit log or broker). The
# errors are imported now: small, and every layer raises them.
_LAZY = {
    "AuditLog": "runtime.audit",
    "VerifyReport": "runtime.audit",
    "Backend": "runtime.backends.base",
    "ExecOutcome": "runtime.backends.base",
    "ExecRequest": "runtime.backends.base",
    "Fingerprint": "runtime.backends.base",
    "MockBackend": "runtime.backends.mock",
    "Broker": "runtime.broker",
    "Event": "runtime.broker",
    "SyncBroker": "runtime.broker",
    "Catalogue": "runtime.catalogue",
    "Decision": "runtime.models",
    "Limits": "runtime.models",
    "ToolCall": "runtime.models",
    "ToolResult": "runtime.models",
    "ToolSpec": "runtime.models",
    "Policy": "runtime.policy",
    "normalize_call": "runtime.shapes",
}


def __getattr__(name: str) -> Any:
    """A public name, or a sub-module (``runtime.policy`` after only ``import runtime``, as
    when this package imported them all), loaded on first use."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
