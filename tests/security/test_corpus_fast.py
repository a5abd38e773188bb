"""CI's fast subset on the runtime itself: a few cases of every class and group, run through
``ours`` with fresh fixtures and effect oracles. Every attack must be contained and every
benign control must pass. The full corpus runs with ``runtime bench security``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.security.corpus import MIN_COUNTS, fast_subset, load_corpus
from benchmarks.security.executors import make_executor
from benchmarks.security.oracles import BenchLimits
from benchmarks.security.runner import run_cases

ROOT = Path(__file__).resolve().parents[2]


def _missing() -> list[str]:
    need = ["runtime.policy", "runtime.audit", "runtime.backends.sandbox"]
    missing = [m for m in need if importlib.util.find_spec(m) is None]
    if not (ROOT / "tools").is_dir():
        missing.append("tools/")
    return missing


pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(bool(_missing()), reason=f"not on this branch yet: {_missing()}"),
]


@pytest.mark.timeout(600)
def test_fast_subset_on_ours(servers):
    cases = fast_subset(load_corpus())
    assert {c.cls for c in cases} == set(MIN_COUNTS)
    limits = BenchLimits(timeout_s=2.0)  # as `runtime bench security --fast`
    summary = run_cases(cases, make_executor("ours", servers, limits), servers, limits)
    out = summary.to_json()
    detail = json.dumps(out["failure_detail"], indent=1)[:6000]
    assert out["contained"] == out["total"], detail
    assert out["benign_passed"] == out["benign_total"], detail
