"""``Redactor.may_redact(text)``, the C-speed gate that lets the audit log skip the redaction
walk: whenever it says False, redaction really returns an equal value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit._canonical import canonical_json
from runtime.audit._redact import Redactor

# Pieces that build secret names and values with every kind of separator in between.
_PIECES = st.sampled_from(
    [
        "to",
        "ken",
        "auth",
        "a",
        "uth",
        "api",
        "Key",
        "K",
        "ey",
        "pass",
        "word",
        "Session",
        "id",
        "-",
        "_",
        ".",
        " ",
        "é",
        "\u212a",
        "İ",
        "\n",
        '"',
        "\\",
        "x",
        "Bearer ",
        "basic ",
        "abcdefgh12345678",
        "AKIA",
        "ABCDEFGHIJKLMNOP",
        "://",
        "u:p@h",
        "sk-",
        "ghp_",
        "eyJ",
        "=",
        ": ",
        "tenant",
        "Tenant",
        "X",
        # The command-line, URL and setting rules (_redact_command, value rules, siblings).
        "curl ",
        "mysql ",
        "sshpass ",
        # Percent escapes: a secret name can be spelled through them (t%6Fken).
        "%6F",
        "%74",
        "%5F",
        "%25",
        "%",
        "?",
        "&",
        "docker ",
        "login ",
        "redis-cli ",
        "http ",
        "-u ",
        "-uadmin:",
        "-p",
        "-a ",
        "--password ",
        "ldapsearch ",
        "-w ",
        "sqlcmd ",
        "-P ",
        "twine ",
        "htpasswd ",
        "-b ",
        "az ",
        "--oauth2-bearer ",
        # Whole argv elements: the option and the value as neighbours in a list.
        "--password",
        "--token",
        "curl",
        "sshpass",
        "hunter2",
        "set ",
        "config ",
        "admin:pw",
        "https://",
        "glpat-",
        "abcdefgh12345678@h",
        "sig=",
        "Sig",
        "=",
        "&",
        ";",
        "'",
        "key",
        "name",
        "value",
        "OPENAI_KEY",
        "pass",
        "pwd",
        # Percent-encoded pieces (decoded once by redact_str).
        "%3D",
        "%3d",
        "%26",
        "%2F",
        "%",
        "sig%3D",
    ]
)
_TEXT = st.lists(_PIECES, max_size=6).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=1500, deadline=None)
@given(_JSON, st.sampled_from([(), ("X-Tenant-Id",), ("-",), ("sig",), ("key",)]))
def test_a_closed_gate_means_nothing_to_redact(value: Any, extra: tuple[str, ...]) -> None:
    redactor = Redactor(extra)
    if not redactor.may_redact(canonical_json(value).decode("utf-8", "surrogatepass")):
        assert redactor(value) == value


@pytest.mark.parametrize(
    "value",
    [
        {"to-ken": "v"},  # joined words form a secret name
        {"a.u.t.h": "v"},
        {"api_\u212aey": "v"},  # KELVIN SIGN lower-cases to "k"
        {"note": "AKIA" + "A" * 16},
        {"note": "Bearer abcdefgh12345678"},
        {"h": ["Cookie", "c=1"]},
        {"xTenantId": "t"},
        {"to\nken": None},  # canonical JSON spells the newline with a letter: to\\nken
        {"to\u001fken": "v"},  # ... and this one with five: to\\u001fken
        {"se\rcret": {"pass\tword": "v"}},
        {"url": "/r?to=http%3A%2F%2Fh%2F%3Fa%3D1%26sig%3DS1"},  # only an encoded sig=
    ],
)
def test_the_gate_opens_for_secrets(value: Any) -> None:
    redactor = Redactor(["X-Tenant-Id"])
    assert redactor(value) != value
    assert redactor.may_redact(canonical_json(value).decode("utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        '{"\\u0074oken":"v"}',  # any escaping: a letter spelled as \\u0074
        '{"to\\u000Aken":"v"}',
        '{"\\u0041KIAAAAAAAAAAAAAAAA":1}',
        '{"api\\u212aey":"v"}',  # beyond ASCII: the C gate leaves it to Python
        '{"x":"\\q"}',  # not JSON: the gate stays open
        '{"x":"\\u12"}',
        "\\",
    ],
)
def test_the_gate_decodes_any_json_escaping(text: str) -> None:
    assert Redactor().may_redact(text)


def test_escapes_of_separators_keep_plain_data_gated() -> None:
    assert not Redactor().may_redact('{"line":"a\\nb\\t\\"c\\\\d\\u0001"}')


def test_the_gate_stays_closed_for_plain_data() -> None:
    assert not Redactor().may_redact('{"price":1.5,"text":"xxxx","items":[1,2]}')
    assert Redactor(["-"]).may_redact("{}")  # a key without words matches too much to gate
