"""A secret parameter whose *name* is percent-encoded (``?t%6Fken=T``, ``api%5Fkey=K``) in a
call's arguments: the egress log's ``redact_url`` decoded names, but the arguments' rules read
names in clear, and the gate (C and Python) looked for fragments in clear, so the audit record
kept the value. Now the gate leaves text with a percent escape to the Python code, which tests
it decoded once too, and a ``NAME=VALUE`` whose name has an escape is judged by the name
decoded once, in any string, on both the record paths (the accelerator's and Python's)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime.audit import REDACTED, AuditLog, redact
from runtime.audit._canonical import canonical_json
from runtime.audit._redact import Redactor

SECRET = "SEKRETVALUE0123"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"https://h/x?t%6Fken={SECRET}&page=2", f"https://h/x?t%6Fken={REDACTED}&page=2"),
        (f"curl 'https://h/x?%74oken={SECRET}'", f"curl 'https://h/x?%74oken={REDACTED}'"),
        (f"see ?api%5Fkey={SECRET} there", f"see ?api%5Fkey={REDACTED} there"),
        (f"https://h/#access%5Ftoken={SECRET}", f"https://h/#access%5Ftoken={REDACTED}"),
        (f"pass%77ord={SECRET}", f"pass%77ord={REDACTED}"),
    ],
)
def test_an_encoded_secret_name_hides_its_value(text: str, shown: str) -> None:
    assert redact({"arg": text}) == {"arg": shown}
    assert Redactor().may_redact(canonical_json({"arg": text}).decode())


@pytest.mark.parametrize(
    "text",
    [
        "https://h/search?q=a%20b&page=2",  # an encoded name that is no secret: kept
        "name%20x=value%20y here",
        'printf "%20s" hello',
        "100%",
        "%zz=1",
    ],
)
def test_other_encoded_text_is_kept(text: str) -> None:
    assert redact({"arg": text}) == {"arg": text}


def test_the_gate_stays_closed_for_plain_encoded_data() -> None:
    assert not Redactor().may_redact('{"q":"a%20b%2Fc","n":"100%"}')


def test_a_deep_encoding_is_decoded_once_without_recursing() -> None:
    # Each level of %25 decodes to one more: the gate decodes once, never to a fixpoint.
    text = "%25" * 200_000 + "74oken"
    assert isinstance(Redactor().may_redact(text), bool)


def _stored(log_path: Path) -> bytes:
    out = b""
    for name in (log_path, log_path.with_name(log_path.name + "-wal")):
        if name.exists():
            out += name.read_bytes()
    for journal in log_path.parent.glob(log_path.name + ".rtj-*"):
        out += journal.read_bytes()
    return out


def test_the_record_keeps_no_value_of_an_encoded_secret_name(
    log_path: Path, canonical_impl: str
) -> None:
    arguments: dict[str, Any] = {"url": f"https://h/x?t%6Fken={SECRET}"}
    with AuditLog(log_path) as log:
        # The broker's hot path: prepared objects, deferred (journaled), no model returned.
        log.record_request(
            call_id="c0",
            tool="http_fetch",
            arguments=arguments,
            decision=log.prepare("decision", {"action": "allow"}),
            backend="host",
            sandbox=log.prepare("sandbox", {}),
            returning=False,
            defer=True,
        )
        assert SECRET.encode() not in _stored(log_path)
        log.flush()
        assert SECRET.encode() not in _stored(log_path)
    with sqlite3.connect(log_path) as conn:
        (text,) = conn.execute("SELECT arguments FROM audit_records").fetchone()
    assert SECRET not in text and f"t%6Fken={REDACTED}" in text
