"""JSONL export with the OpenTelemetry GenAI semantic-convention keys next to our own fields."""

from __future__ import annotations

import json
from typing import Any

from runtime.models import AuditRecord

__all__ = ["json_line", "otel_record"]

# Line breaks to str.splitlines() (and to JavaScript before ES2019, some log shippers) that
# JSON allows raw inside strings: escaped, so that one record is one line to every reader.
_LINE_BREAKS = str.maketrans({"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def json_line(obj: Any) -> str:
    """``obj`` as one JSON line (with its newline): UTF-8 text kept as it is, but U+0085,
    U+2028 and U+2029 escaped. Why: they come raw from untrusted arguments, and a consumer
    splitting the export with ``str.splitlines()`` saw extra lines that are not JSON (a
    forged-looking record boundary). Outside strings json.dumps writes only ASCII, so the
    escapes land inside strings, where they decode to the same characters."""
    return json.dumps(obj, ensure_ascii=False).translate(_LINE_BREAKS) + "\n"


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
