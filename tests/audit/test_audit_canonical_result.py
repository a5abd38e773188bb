"""``AuditLog.canonical_result`` takes the exact walk for small flat objects and the bulk
encoder for everything else; both give the I-JSON canonical bytes."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785

from runtime.audit import AuditLog
from runtime.errors import AuditError


@pytest.mark.parametrize(
    "result",
    [
        {"ok": True},
        {"b": 1.0, "a": -0.0, "c": 1e21, "d": 2.5e-9, "e": None, "f": "v1.0"},
        {"\U0001f600": 1, "\uffff": 2, "z": "é"},
        {f"k{i}": i for i in range(16)},
        {f"k{i}": float(i) for i in range(17)},  # 17 keys: the bulk path
        {"nested": {"b": [1, 2.0], "a": "x"}},
        [1, {"b": 2, "a": 3.0}],
    ],
)
def test_canonical_result_is_rfc8785(log: AuditLog, result: Any) -> None:
    assert log.canonical_result(result) == rfc8785.dumps(result)


def test_small_results_with_big_ints_and_bad_values(log: AuditLog) -> None:
    assert log.canonical_result({"n": 2**60}) == b'{"n":"1152921504606846976"}'
    with pytest.raises(AuditError, match="not JSON data"):
        log.canonical_result({"n": float("nan")})
    with pytest.raises(AuditError, match="not JSON data"):
        log.canonical_result({1: "x"})
