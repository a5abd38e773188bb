from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import _speedups
from runtime.audit import AuditLog, _canonical


@pytest.fixture(autouse=True, params=["c", "pure"])
def canonical_impl(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every audit test runs with the C accelerator and with the pure-Python encoders."""
    mod = _speedups.module()
    if request.param == "c" and mod is None:
        pytest.skip(f"the C accelerator is not loaded: {_speedups.status()['error']}")
    _canonical._select(mod if request.param == "c" else None)
    try:
        yield request.param
    finally:
        _canonical._select(mod)


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    # A directory of the log's own (the log does not create a missing one).
    (tmp_path / "audit").mkdir()
    return tmp_path / "audit" / "audit.db"


@pytest.fixture
def log(log_path: Path) -> Iterator[AuditLog]:
    with AuditLog(log_path) as audit_log:
        yield audit_log
