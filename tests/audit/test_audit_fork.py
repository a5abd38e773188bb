"""An AuditLog does not survive ``os.fork()``: in the child it is the parent's.

The child used to journal records into the parent's journal, which the parent's close then
removed after inserting only the records it tracked itself: a call the child made was in
no record. In the child every write and read now raises AuditError (reason "forked"), the
journal is left as the parent has it, and close() returns at once without closing the
parent's connections or removing its journal — even when another thread of the parent
held one of the log's locks at the fork."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.errors import AuditError
from tests._forked import held_by_another_thread, in_a_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _request(log: AuditLog, call_id: str, *, defer: bool) -> None:
    log.record_request(
        call_id=call_id, tool="t", arguments={"i": call_id}, decision=None, backend="wasm",
        sandbox=None, returning=False, defer=defer,
    )  # fmt: skip


def _refusals(log: AuditLog) -> list[str]:
    """What each write and read of ``log`` does in the child (the error's reason)."""
    seen = []
    for attempt in (
        lambda: _request(log, "child-deferred", defer=True),
        lambda: _request(log, "child-committed", defer=False),
        log.flush,
        log.verify,
        lambda: log.tail(5),
    ):
        try:
            attempt()
        except AuditError as exc:
            assert "fork()" in exc.message, exc.message
            seen.append(str(exc.details.get("reason")))
        else:
            seen.append("written")
    return seen


@pytest.mark.parametrize("held", [None, "_write_lock", "_db_lock", "_read_lock"])
def test_a_forked_child_cannot_write_to_the_parents_log(tmp_path: Path, held: str | None) -> None:
    path = tmp_path / "a.db"
    log = AuditLog(path)
    _request(log, "parent-1", defer=True)
    _request(log, "parent-2", defer=False)
    _request(log, "parent-3", defer=True)  # pending in the parent at the fork
    assert log._journal is not None
    journal = log._journal.path
    size = journal.stat().st_size

    def child() -> str:
        seen = _refusals(log)
        log.close()
        log.close()
        seen.append("closed" if log.closed else "open")
        seen.append(str(journal.stat().st_size == size))
        return json.dumps(seen)

    if held is None:
        report = in_a_forked_child(child, timeout_s=30)
    else:
        with held_by_another_thread(getattr(log, held)):
            report = in_a_forked_child(child, timeout_s=30)
    assert json.loads(report) == ["forked"] * 5 + ["closed", "True"], report
    assert journal.exists()  # the child removed nothing of the parent's
    _request(log, "parent-4", defer=True)
    assert log.verify().ok  # the parent's connections still work
    log.close()
    with AuditLog(path) as again:
        assert again.verify().ok
        ids = [record.call_id for record in again.tail(10)]
    assert ids == ["parent-1", "parent-2", "parent-3", "parent-4"]
    assert not journal.exists()


def test_a_log_opened_in_a_forked_child_works(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    with AuditLog(path) as log:
        _request(log, "parent", defer=True)

        def child() -> str:
            with AuditLog(path) as mine:
                _request(mine, "child", defer=True)
            return "ok"

        assert in_a_forked_child(child, timeout_s=30) == "ok"
        assert sorted(r.call_id for r in log.tail(10)) == ["child", "parent"]
