"""Every call that runs is journaled: its write-ahead record is a line of the log's journal
before the backend runs (not yet a SQLite row), and both records reach the chain."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.base import ExecRequest
from runtime.broker import SyncBroker
from runtime.catalogue import Catalogue

pytestmark = pytest.mark.anyio


def _journal_lines(audit: Path) -> list[list[Any]]:
    lines: list[list[Any]] = []
    for path in sorted(audit.parent.glob(audit.name + ".rtj-*")):
        lines += [json.loads(line) for line in path.read_bytes().splitlines()]
    return lines


def _rows(audit: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(audit) as conn:
        return list(conn.execute("SELECT kind, call_id FROM audit_records ORDER BY seq"))


@pytest.mark.parametrize("path", ["async", "sync"])
async def test_a_side_effecting_call_is_journaled_before_it_runs(
    make_broker: Callable[..., Any], tmp_path: Path, catalogue: Catalogue, path: str
) -> None:
    audit = tmp_path / "audit.db"
    seen: dict[str, Any] = {}

    def handler(request: ExecRequest) -> dict[str, Any]:
        seen["journal"] = _journal_lines(audit)
        seen["rows"] = _rows(audit)
        return {"ok": True}

    call = {"tool": "echo", "call_id": "c-journal", "arguments": {"text": "hi"}}
    if path == "async":
        async with make_broker(handler, audit=audit) as broker:
            result = await broker.call(call)
            assert broker.audit.verify().count == 2
    else:
        from runtime.backends.mock import MockBackend

        with SyncBroker(
            workspace=tmp_path / "ws",
            audit=audit,
            catalogue=catalogue,
            backends={"mock": MockBackend(handler)},
        ) as sync:
            sync.call({"tool": "echo", "arguments": {"text": "warm-up"}})  # starts the backend
            result = sync.call(call)
            assert sync.audit.verify().count == 4
    assert result.success, result.error
    # The mock backend is not side-effect free: its write-ahead record is still a journal
    # line when it runs, not a committed row.
    assert seen["journal"][-1][:2] == ["request", "c-journal"]
    assert ("request", "c-journal") not in seen["rows"]
    assert ("completion", "c-journal") in _rows(audit)
