"""Secrets written as JSON, a dict literal or an XML element inside a string argument (a
request body, ``curl -d '{...}'``): the name is quoted, so a closing quote sits between it and
the colon, and the value is quoted. The red team's shapes, through the redactor and the audit
log (both encoders: the C gate prefilters on the whole arguments' text)."""

from __future__ import annotations

import json

import pytest

from runtime.audit import REDACTED, AuditLog, canonical_json, redact
from runtime.audit._redact import Redactor

_BODY = json.dumps({"username": "bob", "password": "hunter2hunter2", "client_secret": "cs-9f8e7d"})


@pytest.mark.parametrize(
    ("text", "secrets", "shown"),
    [
        (
            _BODY,
            ["hunter2hunter2", "cs-9f8e7d"],
            f'{{"username": "bob", "password": "{REDACTED}", "client_secret": "{REDACTED}"}}',
        ),
        (  # JSON inside a JSON string: the quotes are escaped
            json.dumps({"data": _BODY}),
            ["hunter2hunter2", "cs-9f8e7d"],
            json.dumps({"data": _BODY})
            .replace("hunter2hunter2", REDACTED)
            .replace("cs-9f8e7d", REDACTED),
        ),
        (
            """curl -d '{"password": "s3cr3t pw\\"x", "user":"bob"}' https://h/login""",
            ["s3cr3t", 'pw\\"x'],
            f"""curl -d '{{"password": "{REDACTED}", "user":"bob"}}' https://h/login""",
        ),
        (
            "{'api_key': 'k-123 456', 'n': 1}",
            ["k-123", "456"],
            f"{{'api_key': '{REDACTED}', 'n': 1}}",
        ),
        ('password="two words" next', ["two words"], f'password="{REDACTED}" next'),
        (
            "<login><user>bob</user><password>hunter22</password></login>",
            ["hunter22"],
            f"<login><user>bob</user><password>{REDACTED}</password></login>",
        ),
        ('<token kind="x">t0k3n</token>', ["t0k3n"], f'<token kind="x">{REDACTED}</token>'),
    ],
    ids=["json", "escaped-json", "curl-d", "dict-literal", "quoted-value", "xml", "xml-attr"],
)
def test_quoted_names_and_values_are_redacted(text: str, secrets: list[str], shown: str) -> None:
    out = redact({"body": text})["body"]
    assert out == shown
    assert not [s for s in secrets if s in out]
    # The audit log's gate opens for them (it sees the arguments' canonical text).
    assert Redactor().may_redact(canonical_json({"body": text}).decode("utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        '{"user": "bob", "note": "the password is asked for"}',
        "<user>bob</user><passage>text</passage>",
        '"key": "value", "monkey": "x"',
    ],
)
def test_quoted_ordinary_data_is_kept(text: str) -> None:
    assert redact({"body": text}) == {"body": text}


@pytest.mark.parametrize(
    "text",
    [
        '"password": "' + "\\" * 50000,
        '"token":"' * 8000,
        "<password>" * 8000,
        "<a " * 20000 + ">x</a>",
        "<token>" + "x" * 50000,
        '\\"secret\\": \\"' * 6000,
    ],
    ids=lambda t: repr(t[:12]),
)
def test_quoted_adversarial_strings_finish(text: str) -> None:
    # No timing assertion: a super-linear rule would run for hours and hit the test timeout.
    assert isinstance(redact({"body": text})["body"], str)


def test_a_json_body_never_reaches_the_log_in_clear(log: AuditLog) -> None:
    args = {"url": "https://api.example.com/login", "body": _BODY}
    rec = log.record_request(
        call_id="c1",
        tool="http_post",
        arguments=args,
        decision={"action": "deny", "rule": "categories.network"},
        backend="subprocess",
        sandbox=None,
    )
    assert "hunter2hunter2" not in json.dumps(rec.arguments)
    assert json.loads(rec.arguments["body"])["password"] == REDACTED
    raw = log.path.read_bytes().decode("latin-1")
    assert "hunter2hunter2" not in raw and "cs-9f8e7d" not in raw
