"""The journal's write lock is taken without queueing on it (runtime/audit/_log.py, _take):
non-blocking tries with short sleeps between them, then a blocking acquire. Mutual
exclusion and the order of records under threads: tests/broker/test_sync_threads.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from runtime.audit import AuditLog, _log


def _hold(lock: threading.Lock, seconds: float, held: threading.Event) -> threading.Thread:
    def run() -> None:
        with lock:
            held.set()
            time.sleep(seconds)

    thread = threading.Thread(target=run)
    thread.start()
    assert held.wait(10)
    return thread


def test_taken_once_the_holder_lets_go_while_polling() -> None:
    lock = threading.Lock()
    holder = _hold(lock, 0.0005, threading.Event())
    _log._take(lock)  # within the polls (~1.9 ms in all)
    assert lock.locked()
    holder.join()
    lock.release()


def test_blocks_for_a_holder_that_outlasts_the_polls() -> None:
    lock = threading.Lock()
    t0 = time.monotonic()
    holder = _hold(lock, 0.05, threading.Event())
    _log._take(lock)
    assert time.monotonic() - t0 >= 0.05  # it waited for the holder, then took the lock
    assert lock.locked()
    holder.join()
    lock.release()
    assert sum(_log._TAKE_POLL_S) < 0.05


def test_two_threads_journal_through_one_log(tmp_path: Path) -> None:
    """Both journal paths (the accelerator's and the Python one) keep the lock: two threads
    journaling at once leave every record in the chain, and it verifies."""
    log = AuditLog(tmp_path / "audit.db")
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(300):
                log.record_request(
                    call_id=f"t{k}-{i}",
                    tool="echo",
                    arguments={"text": "x"},
                    decision={"action": "allow", "rule": "r", "reasons": []},
                    backend="mock",
                    sandbox=None,
                    returning=False,
                    defer=True,
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == []
        log.flush()
        report = log.verify()
        assert report.ok and report.count == 600
    finally:
        log.close()
