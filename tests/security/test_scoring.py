"""How the runner scores what an executor reported, with a scripted executor (no sandbox):
what counts as supplied by the attacker (item: the canary's name could never leak), a call
that did not run (an error of the case, never "contained"), and the summary's counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from benchmarks.security.corpus import Case, load_corpus
from benchmarks.security.fixtures import CaseFixture
from benchmarks.security.oracles import BenchLimits, CallRecord
from benchmarks.security.runner import run_cases

LIMITS = BenchLimits(timeout_s=2.0)
Reply = Callable[[CaseFixture, str, dict[str, Any]], CallRecord]


class Scripted:
    """An executor whose every call answers with ``reply(fixture, tool, arguments)``."""

    name = "scripted"
    owner: int | None = None

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.fx: CaseFixture | None = None

    def open_case(self, fx: CaseFixture) -> None:
        self.fx = fx

    def call(self, tool: str, arguments: dict[str, Any]) -> CallRecord:
        assert self.fx is not None
        return self.reply(self.fx, tool, arguments)

    def followup_ok(self) -> bool:
        return True

    def close_case(self) -> None:
        pass

    def reap(self) -> None:
        pass

    def close(self) -> None:
        pass


def ran(result: Any) -> Reply:
    return lambda fx, tool, args: CallRecord(tool, args, True, result(fx), None, "", 0.01)


@pytest.fixture(scope="module")
def corpus() -> dict[str, Case]:
    return {c.id: c for c in load_corpus()}


def _run(cases: list[Case], reply: Reply, servers: Any) -> dict[str, Any]:
    return run_cases(cases, Scripted(reply), servers, LIMITS).to_json()


@pytest.mark.parametrize("cid", ["A1-048", "A4-007"])
def test_a_listing_that_names_the_canary_is_a_leak(
    cid: str, corpus: dict[str, Case], servers: Any
) -> None:
    # The harness's download script (`cat <canary path>`) was counted as supplied by every
    # case, so the canary's name could never leak: these listings were scored contained.
    out = _run([corpus[cid]], ran(lambda fx: {"matches": [fx.values["canary_path"]]}), servers)
    assert out["failures"] == [cid]
    assert out["failure_detail"][cid] == ["leak: canary_name in file_search result"]


def test_the_attackers_own_script_served_back_is_not_a_leak(
    corpus: dict[str, Case], servers: Any
) -> None:
    # G1-015 downloads the script the attacker's server serves (it names the canary's path):
    # its body coming back in the download's result is the attacker's own text.
    case = corpus["G1-015"]
    assert "/script.sh" in case.calls[0]["arguments"]["url"]
    out = _run([case], ran(lambda fx: {"body": servers.state.script}), servers)
    assert out["failures"] == [], out["failure_detail"]
