"""Canonical JSON and chain hashes: byte-equal to the rfc8785 reference, stable, round-trip."""

from __future__ import annotations

import enum
import math
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.audit import AuditLog, canonical_json, redact
from runtime.audit._canonical import CanonicalizationError, canonical_json_ijson, sha256_hex
from runtime.audit._record import COLUMNS, body_bytes

SAFE_INT = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(exclude_categories=("Cs",)))  # no lone surrogates: not UTF-8

JSON = st.recursive(
    st.none() | st.booleans() | SAFE_INT | FLOATS | TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(TEXT, children, max_size=5),
    max_leaves=25,
)


@settings(deadline=None)
@given(JSON)
def test_matches_rfc8785_reference(value: Any) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)


@settings(deadline=None)
@given(FLOATS)
def test_floats_match_ecmascript_form(value: float) -> None:
    assert canonical_json(value) == rfc8785.dumps(value)
    assert float(canonical_json(value)) == value or value == 0


@settings(deadline=None)
@given(st.dictionaries(TEXT, JSON, max_size=8), st.randoms())
def test_key_order_does_not_matter(value: dict[str, Any], rnd: Any) -> None:
    items = list(value.items())
    rnd.shuffle(items)
    assert canonical_json(dict(items)) == canonical_json(value)


def test_utf16_key_order_differs_from_code_point_order() -> None:
    # U+1F600 sorts before U+FF61 in UTF-16 (surrogate D83D < FF61), after it by code point.
    value = {"\uff61": 1, "\U0001f600": 2, "a": 3}
    assert canonical_json(value) == rfc8785.dumps(value)
    assert canonical_json(value).decode() == '{"a":3,"\U0001f600":2,"\uff61":1}'


def test_nfc_and_nfd_are_different_data() -> None:
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    assert canonical_json({"name": nfc}) != canonical_json({"name": nfd})


@pytest.mark.parametrize(
    "value",
    [2**53, -(2**53), float("nan"), math.inf, "\ud800", {1: "x"}, {"a": {1, 2}}, b"bytes"],
)
def test_rejects_what_rfc8785_rejects(value: Any) -> None:
    with pytest.raises(CanonicalizationError):
        rfc8785.dumps(value)
    with pytest.raises(CanonicalizationError):
        canonical_json(value)


def test_ijson_wraps_big_integers_only() -> None:
    assert canonical_json_ijson({"n": 2**60, "m": 5}) == b'{"m":5,"n":"1152921504606846976"}'
    with pytest.raises(CanonicalizationError):
        canonical_json_ijson(float("nan"))


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


def test_subclasses_serialise_as_their_json_type() -> None:
    value = {"c": Colour.RED, "l": Level.HIGH, "t": (1, 2), "b": True}
    assert canonical_json(value) == rfc8785.dumps(value) == b'{"b":true,"c":"red","l":3,"t":[1,2]}'


@settings(deadline=None)
@given(
    st.fixed_dictionaries(
        {
            "arguments": JSON,
            "usage": st.none() | st.dictionaries(TEXT, SAFE_INT | FLOATS, max_size=4),
            "duration_ms": st.none() | FLOATS,
            "result_size": st.none() | st.integers(min_value=0, max_value=2**40),
            "tool": TEXT,
            "session": st.none() | TEXT,
        }
    )
)
def test_record_body_matches_reference(fields: dict[str, Any]) -> None:
    record: dict[str, Any] = dict.fromkeys(COLUMNS)
    record.update(seq=7, kind="completion", call_id="c", time="t", prev_hash="0" * 64, **fields)
    row = tuple(
        canonical_json(record[c]).decode()
        if c in {"arguments", "usage"} and record[c] is not None
        else record[c]
        for c in COLUMNS
    )
    del record["hash"]
    if record["session"] is None:  # a null session is not in the body (_record's doc)
        del record["session"]
    assert body_bytes(row) == rfc8785.dumps(record)


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(
        st.dictionaries(TEXT | st.sampled_from(["token", "Authorization", "p"]), JSON, max_size=4),
        min_size=1,
        max_size=4,
    )
)
def test_arbitrary_arguments_round_trip_and_verify(calls: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as d, AuditLog(Path(d) / "a.db", redact_keys=()) as log:
        for i, arguments in enumerate(calls):
            rec = log.record_request(
                call_id=f"c{i}",
                tool="t",
                arguments=arguments,
                decision=None,
                backend=None,
                sandbox=None,
            )
            stored = log.tail(1)[0]
            assert stored == rec
            # Stored arguments are the redacted copy; the digest is of the real arguments:
            # their sha256, keyed with the log's secret when redaction changed them.
            assert canonical_json(stored.arguments) == canonical_json(redact(arguments))
            assert stored.arguments_digest == log.digest_arguments(arguments)
            plain = sha256_hex(canonical_json(arguments))
            assert (stored.arguments_digest == plain) == (redact(arguments) == arguments)
        report = log.verify()
        assert report.ok and report.count == len(calls)


def test_hash_is_stable_across_key_order_of_arguments(tmp_path: Path) -> None:
    a = {"path": "x", "opts": {"b": 1, "a": [1.5, "é"]}}
    b = {"opts": {"a": [1.5, "é"], "b": 1}, "path": "x"}
    with AuditLog(tmp_path / "1.db") as one, AuditLog(tmp_path / "2.db") as two:
        ra = one.record_request(
            call_id="c", tool="t", arguments=a, decision=None, backend=None, sandbox=None
        )
        rb = two.record_request(
            call_id="c", tool="t", arguments=b, decision=None, backend=None, sandbox=None
        )
    assert ra.arguments_digest == rb.arguments_digest
    assert ra.arguments == rb.arguments
