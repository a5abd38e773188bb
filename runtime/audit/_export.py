"""JSONL export with the OpenTelemetry GenAI semantic-convention keys next to our own fields."""

from __future__ import annotations

from typing import Any

from runtime._jsontext import json_line
from runtime.models import AuditRecord

__all__ = ["json_line", "otel_record"]

# ``json_line``: one record a line, U+0085/U+2028/U+2029, C1 controls, bidi and other format
# characters escaped (runtime._jsontext, shared with the CLI's output).


def otel_record(record: AuditRecord) -> dict[str, Any]:
    """One export line: ``gen_ai.*`` / ``error.type`` keys first, then every record field.

    ``error.type`` is present only on records that carry one (OTel: set it when the operation
    failed), ``gen_ai.conversation.id`` (the session) only on records that name a session.
    Arguments are the redacted ones; results are never exported, only their digest.
    """
    out: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": record.tool,
        "gen_ai.tool.call.id": record.call_id,
    }
    if record.session is not None:
        # The session the call ran in: OTel GenAI's conversation (session, thread) id.
        out["gen_ai.conversation.id"] = record.session
    if record.error_type is not None:
        out["error.type"] = record.error_type
    out.update(record.model_dump(mode="json"))
    return out
