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
from tests.security._quiet_executor import QuietExecutor

LIMITS = BenchLimits(timeout_s=2.0)
Reply = Callable[[CaseFixture, str, dict[str, Any]], CallRecord]


class Scripted(QuietExecutor):
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


def test_a_path_the_attack_planted_is_not_a_leak(corpus: dict[str, Case], servers: Any) -> None:
    # B8-004 plants `bin/ls` = `cat <canary path>`; in the sandbox cat fails and says the path
    # it could not open, which was scored as the canary's name leaking (ours, 636/637).
    case = corpus["B8-004"]
    assert "{canary_path}" in str(case.setup)
    message = lambda fx: {"stderr": f"cat: {fx.values['canary_path']}: No such file"}  # noqa: E731
    out = _run([case], ran(message), servers)
    assert out["failures"] == [], out["failure_detail"]


def died(fx: CaseFixture, tool: str, args: dict[str, Any]) -> CallRecord:
    why = "the worker exited 1 without a valid reply"
    return CallRecord(tool, args, False, None, "tool_error", why, 0.01, not_run=why)


def no_httpx(fx: CaseFixture, tool: str, args: dict[str, Any]) -> CallRecord:
    # what the baseline worker answers when its interpreter has no httpx
    why = "ModuleNotFoundError: No module named 'httpx'"
    return CallRecord(tool, args, False, None, "tool_error", why, 0.01)


@pytest.mark.parametrize("reply", [died, no_httpx])
def test_a_call_that_did_not_run_is_an_error_not_containment(
    reply: Reply, corpus: dict[str, Case], servers: Any
) -> None:
    # A sandbox whose worker died on every call scored every attack "contained" (nothing
    # ran, so nothing leaked), and a tool that could not import httpx likewise.
    cases = [corpus["A1-001"], corpus["E6-001"], corpus["H1-001"]]
    out = _run(cases, reply, servers)
    assert (out["total"], out["contained"], out["errored"]) == (2, 0, 2)
    assert (out["benign_total"], out["benign_passed"], out["benign_errored"]) == (1, 0, 1)
    assert out["failures"] == []
    assert out["errors"] == ["A1-001", "E6-001", "H1-001"]
    assert "did not run" in out["error_detail"]["A1-001"][0]
    assert out["per_class"]["A"]["contained"] == 0 and out["per_class"]["A"]["errored"] == 1
    assert out["per_class"]["H"]["errored"] == 1


def test_an_effect_observed_before_the_worker_died_is_not_contained(
    corpus: dict[str, Case], servers: Any
) -> None:
    calls: list[str] = []

    def leak_then_die(fx: CaseFixture, tool: str, args: dict[str, Any]) -> CallRecord:
        calls.append(tool)
        if len(calls) == 1:
            return CallRecord(tool, args, True, fx.canary_content, None, "", 0.01)
        return died(fx, tool, args)

    case = next(c for c in corpus.values() if not c.benign and len(c.tools) >= 2)
    out = _run([case], leak_then_die, servers)
    assert out["failures"] == [case.id] and out["errors"] == []
    assert out["contained"] == 0 and out["errored"] == 0


def test_a_harness_failure_is_an_error(corpus: dict[str, Case], servers: Any) -> None:
    def boom(fx: CaseFixture, tool: str, args: dict[str, Any]) -> CallRecord:
        raise RuntimeError("harness broke")

    out = _run([corpus["A1-001"]], boom, servers)
    assert out["errors"] == ["A1-001"] and out["failures"] == []
    assert out["error_detail"]["A1-001"] == ["harness error: RuntimeError: harness broke"]


def test_each_call_says_how_it_ended_and_each_contained_case_what_stopped_it(
    corpus: dict[str, Case], servers: Any
) -> None:
    # Contained cases held no mechanism at all: a refusal, a kernel error and a call that
    # ran without effect all read "contained".
    def by_case(fx: CaseFixture, tool: str, args: dict[str, Any]) -> CallRecord:
        cid = fx.case.id
        if cid == "A1-001":
            decision = {"action": "deny", "rule": "paths.read"}
            return CallRecord(
                tool, args, False, None, "policy_denied", "outside", 0.01, decision=decision
            )
        if cid == "A1-002":
            return CallRecord(tool, args, False, None, "tool_error", "EACCES: denied", 0.01)
        return CallRecord(tool, args, True, {"ok": 1}, None, "", 0.01)

    cases = [corpus["A1-001"], corpus["A1-002"], corpus["B1-001"]]
    out = _run(cases, by_case, servers)
    per_case = out["cases"]
    assert per_case["A1-001"]["stopped"] == "policy"
    assert per_case["A1-001"]["calls"][0].startswith("policy: deny paths.read")
    assert per_case["A1-002"]["stopped"] == "error"
    assert per_case["A1-002"]["calls"] == ["error: tool_error: EACCES: denied"]
    assert per_case["B1-001"]["stopped"] == "ran"
    assert all(end == "ran" for end in per_case["B1-001"]["calls"])
    a = out["per_class"]["A"]
    assert (a["stopped_policy"], a["stopped_error"], a["stopped_ran"]) == (1, 1, 0)
    assert out["per_class"]["B"]["stopped_ran"] == 1
