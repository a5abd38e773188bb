"""``runtime bench security`` printed "audit: audit log …/ws/.runtime/audit.db was removed while
open … journal kept for recovery" at the end of a run: ``run_cases`` removed its temporary
tree (the long-lived ``ours`` broker's workspace, audit log and all) before it closed the
executor, so the broker's last journaled records had nowhere to go. The executor is now
closed while its workspace still exists, also when a case raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.security.corpus import load_corpus
from benchmarks.security.oracles import BenchLimits, CallRecord
from benchmarks.security.runner import run_cases
from tests.security._quiet_executor import QuietExecutor


class _Stub(QuietExecutor):
    """An executor that records whether its workspace existed when it was closed."""

    name = "stub"
    owner: int | None = None
    fixed_root = True

    def __init__(self, fail: bool = False) -> None:
        self.ws: Path | None = None
        self.ws_at_close: bool | None = None
        self.fail = fail

    def open_case(self, fx: Any) -> None:
        self.ws = fx.ws
        if self.fail:
            raise KeyboardInterrupt  # not a harness error: it ends the run

    def call(self, tool: str, arguments: dict[str, Any]) -> CallRecord:
        return CallRecord(tool, arguments, False, None, "policy_denied", "", 0.0)

    def close(self) -> None:
        assert self.ws is not None
        self.ws_at_close = self.ws.is_dir()


def test_the_executor_is_closed_before_its_tree_is_removed(servers: Any) -> None:
    case = next(c for c in load_corpus() if c.benign)
    stub = _Stub()
    run_cases([case], stub, servers, BenchLimits(timeout_s=2.0))
    assert stub.ws_at_close is True
    assert stub.ws is not None and not stub.ws.exists()  # and the tree is gone after


def test_the_executor_is_closed_when_the_run_stops(servers: Any) -> None:
    case = next(c for c in load_corpus() if c.benign)
    stub = _Stub(fail=True)
    with pytest.raises(KeyboardInterrupt):
        run_cases([case], stub, servers, BenchLimits(timeout_s=2.0))
    assert stub.ws_at_close is True
