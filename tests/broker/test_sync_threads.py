"""Threads sharing one SyncBroker: every call's two audit records are kept, once each, in
an order that agrees with the calls.

The hot path journals both records under the log's write lock and inserts them into SQLite
in batches (256 records) by whichever thread fills one; the journal's write and free-space
check keep the GIL (runtime/_speedups.c, JOURNAL_HOLD_GIL_MAX). Each thread makes enough
calls for several batches; the log must then hold exactly two records per call, each
call's request before its completion, each thread's calls in the order it made them, and
times that never go back along the chain (the time is taken under the write lock).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.base import ExecRequest
from runtime.backends.mock import MockBackend
from runtime.broker import SyncBroker
from runtime.catalogue import Catalogue

_THREADS = 3
_CALLS = 200  # per thread: 1,200 records, four and a half batches


def _handler(request: ExecRequest) -> Any:
    return {"echo": request.arguments["text"]}


def _check_log(broker: SyncBroker, ids: list[list[str]]) -> None:
    broker.audit.flush()
    report = broker.audit.verify()
    assert report.ok, report
    total = sum(len(mine) for mine in ids)
    records = broker.audit.tail(2 * total + 10)
    assert len(records) == 2 * total  # none lost, none doubled
    seen: dict[str, list[tuple[str, int]]] = {}
    times = []
    for record in records:
        assert record.seq is not None
        seen.setdefault(record.call_id, []).append((record.kind, record.seq))
        times.append(record.time)
    assert times == sorted(times)
    for mine in ids:
        last = 0
        for call_id in mine:
            (kind1, seq1), (kind2, seq2) = seen.pop(call_id)
            assert (kind1, kind2) == ("request", "completion")
            assert last < seq1 < seq2
            last = seq2
    assert seen == {}


def _run_threads(broker: SyncBroker, call: dict[str, Any], check: Any) -> list[list[str]]:
    ids: list[list[str]] = [[] for _ in range(_THREADS)]
    errors: list[BaseException] = []
    start = threading.Barrier(_THREADS)

    def work(k: int) -> None:
        try:
            start.wait()
            for i in range(_CALLS):
                call_id = f"t{k}-{i}"
                result = broker.call({**call, "call_id": call_id})
                check(result)
                ids[k].append(call_id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert not any(t.is_alive() for t in threads)
    return ids


def test_threads_on_one_sync_broker_keep_every_record_in_order(
    tmp_path: Path, catalogue: Catalogue
) -> None:
    with SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(_handler)},
    ) as broker:
        first = broker.call({"tool": "echo", "arguments": {"text": "warm"}})
        assert first.success, first.error

        def check(result: Any) -> None:
            assert result.success, result.error
            assert result.result == {"echo": "x"}

        ids = _run_threads(broker, {"tool": "echo", "arguments": {"text": "x"}}, check)
        ids[0].insert(0, first.call_id)  # the warm-up call, first
        _check_log(broker, ids)


@pytest.mark.wasm
def test_threads_on_one_sync_broker_wasm(tmp_path: Path) -> None:
    """The same through the wasm backend, whose guest runs with the GIL released."""
    with SyncBroker(workspace=tmp_path / "ws", audit=tmp_path / "audit.db") as broker:
        call = {"tool": "json_parse", "arguments": {"text": '{"a": [1, 2, 3]}'}}
        first = broker.call(call)
        assert first.success, first.error

        def check(result: Any) -> None:
            assert result.success, result.error

        ids = _run_threads(broker, call, check)
        ids[0].insert(0, first.call_id)
        _check_log(broker, ids)
