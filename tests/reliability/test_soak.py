"""Issue 8 §6: a small soak through ``benchmarks/soak.py`` (the code behind ``runtime bench
soak``): no fd growth in the broker or its zygote, bounded RSS growth, a verified audit
chain, and nothing left after close. The 10,000-call figures come from the benchmark."""

from __future__ import annotations

import json

import pytest

from runtime.cli.bench import load_benchmark

pytestmark = [pytest.mark.slow, pytest.mark.sandbox, pytest.mark.timeout(240)]


def test_small_soak_shows_no_growth() -> None:
    soak = load_benchmark("soak")
    out = soak.run_soak(300, samples=10)
    assert out["checks"] == {
        "audit": True,
        "fd_growth": True,
        "rss_growth": True,
        "closed_clean": True,
    }, {k: v for k, v in out.items() if k != "samples"}
    assert out["fd_growth"] == 0 and out["zygote_fd_growth"] == 0
    assert out["fds_leaked_after_close"] == 0 and out["children_after_close"] == 0
    assert out["rss_growth_mb"] <= 16.0
    assert out["outcomes"]["success"] >= 300 * 4 // 7
    assert len(out["samples"]) >= 10


def test_soak_cli_reports_samples_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    soak = load_benchmark("soak")
    code = soak.main(["--calls", "14", "--samples", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == (0 if out["ok"] else 1)
    assert out["calls"] == 14 and out["checks"]["audit"] is True
    assert {"call", "rss_mb", "fds", "children", "zygote_rss_mb", "zygote_fds"} <= set(
        out["samples"][0]
    )
