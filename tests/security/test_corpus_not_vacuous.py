"""Attacks that no backend could fail are no measurement: each case repaired after the
review of 2026-11-24 must succeed against the tools with no check at all (baseline-none);
a case whose program the host lacks is reported as not applicable, never as contained."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.security import generate
from benchmarks.security.corpus import Case, load_corpus, unmet_requirements
from benchmarks.security.executors import make_executor
from benchmarks.security.oracles import BenchLimits
from benchmarks.security.runner import run_cases

# The baselines run as fixed private uids and reap them after each case (see test_baselines).
pytestmark = pytest.mark.xdist_group("baseline_uids")

LIMITS = BenchLimits()

#: case -> the effect it must show when nothing stops it
REPAIRED = {
    "A7-005": "leak",  # /dev/fd/../.. is /proc: four ".." reach the root
    "B3-010": "write",  # dash's printf has no \x escapes
    "B4-007": "write",  # \r separates nothing
    "B5-020": "write",  # sed s/x/.../e collided with the path's slashes
    "B8-004": "leak",  # PATH to a directory holding no program
    "B8-005": "leak",  # LD_PRELOAD of a text file is ignored
    "B8-008": "leak",  # bash -ic CMD never prompts, so never runs PROMPT_COMMAND
    "B10-004": "write",  # mv .. is always EBUSY
    "B11-005": "write",  # node stripped the double quotes inside NODE_OPTIONS
    "B11-010": "write",
    "C3-002": "resources",  # tail -c 1 buffers nothing; tail -n 1 was meant
    # 2-30 GB files ended in the harness's own RLIMIT_FSIZE (700 MiB) for the baselines
    "C4-002": "resources",
    "C4-003": "resources",
    "C4-004": "resources",
    "E6-004": "connect",  # dash has no /dev/tcp
    # one process's fds: the harness's RLIMIT_NOFILE ended it, and nothing counted fds
    "C6-001": "resources",
    "C6-002": "resources",
    "G1-013": "leak",
    "G1-014": "leak",
}


@pytest.fixture(scope="module")
def corpus() -> dict[str, Case]:
    return {c.id: c for c in load_corpus()}


def test_repaired_attacks_succeed_without_a_sandbox(corpus: dict[str, Case], servers: Any) -> None:
    ex = make_executor("baseline-none", servers, LIMITS)
    summary = run_cases([corpus[i] for i in REPAIRED], ex, servers, LIMITS)
    verdicts = {v.case_id: v for v in summary.verdicts}
    uncontained = {i: v.effects for i, v in verdicts.items() if not v.ok}
    missing = {i: e for i, e in REPAIRED.items() if e not in uncontained.get(i, [])}
    assert not missing, (missing, {i: verdicts[i].detail for i in missing})


def test_retired_ids_are_not_reused(corpus: dict[str, Case]) -> None:
    assert generate.RETIRED and not set(generate.RETIRED) & set(corpus)
    # the ids after a retired one kept their numbers
    assert corpus["E4-015"].title == "brackets around v4"


def test_a_case_needing_a_missing_program_is_not_applicable(
    corpus: dict[str, Case], servers: Any
) -> None:
    needy = [c for c in corpus.values() if c.requires]
    assert {"B5-017", "B5-036", "B9-002"} <= {c.id for c in needy}
    base = corpus["B5-017"]
    absent = Case(**{**_fields(base), "requires": ("no-such-program-secbench --version",)})
    present = Case(**{**_fields(base), "requires": ("true",)})
    assert unmet_requirements(absent) == ["no-such-program-secbench --version"]
    assert unmet_requirements(present) == []
    ex = make_executor("baseline-none", servers, LIMITS)
    summary = run_cases([absent], ex, servers, LIMITS)
    out = summary.to_json()
    assert summary.verdicts == [] and out["total"] == 0 and out["contained"] == 0
    assert out["not_applicable"] == {"B5-017": "needs: no-such-program-secbench --version"}


def _fields(case: Case) -> dict[str, Any]:
    return {
        "id": case.id,
        "cls": case.cls,
        "group": case.group,
        "title": case.title,
        "technique": case.technique,
        "source": case.source,
        "setup": case.setup,
        "calls": case.calls,
        "oracle": case.oracle,
        "race": case.race,
        "repeat": case.repeat,
        "raw": case.raw,
    }
