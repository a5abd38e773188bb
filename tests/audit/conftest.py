from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.audit import AuditLog


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "audit" / "audit.db"


@pytest.fixture
def log(log_path: Path) -> Iterator[AuditLog]:
    with AuditLog(log_path) as audit_log:
        yield audit_log
