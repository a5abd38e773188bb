from __future__ import annotations

import types

import runtime.audit as audit


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_complete() -> None:
    assert audit.__all__ == sorted(audit.__all__, key=_isort_key)
    public = {
        name
        for name, value in vars(audit).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    # The log, redaction and verification names are loaded on first use (PEP 562): in
    # vars() only once something used them.
    assert set(audit.__all__) == (public | set(audit._LAZY)) - {"annotations"}


def test_broker_api_is_exported() -> None:
    for name in ("AuditLog", "VerifyReport", "canonical_json", "redact"):
        assert name in audit.__all__
