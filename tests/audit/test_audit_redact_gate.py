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
    ]
)
_TEXT = st.lists(_PIECES, max_size=6).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=1500, deadline=None)
@given(_JSON, st.sampled_from([(), ("X-Tenant-Id",), ("-",)]))
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
    ],
)
def test_the_gate_opens_for_secrets(value: Any) -> None:
    redactor = Redactor(["X-Tenant-Id"])
    assert redactor(value) != value
    assert redactor.may_redact(canonical_json(value).decode("utf-8"))


def test_the_gate_stays_closed_for_plain_data() -> None:
    assert not Redactor().may_redact('{"price":1.5,"text":"xxxx","items":[1,2]}')
    assert Redactor(["-"]).may_redact("{}")  # a key without words matches too much to gate
