"""The report: Markdown table, self-contained HTML with an inline SVG chart, results.json,
and the CLI entry's JSON keys."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from benchmarks.security.corpus import load_corpus
from benchmarks.security.report import html_report, markdown_table, svg_chart, write_report

# The baselines run as fixed private uids and reap them after each case: two workers
# running baseline cases at once would kill each other's processes (pytest-xdist).
pytestmark = pytest.mark.xdist_group("baseline_uids")

ROOT = Path(__file__).resolve().parents[2]

RESULTS = [
    {
        "backend": "ours",
        "total": 3,
        "contained": 3,
        "benign_total": 1,
        "benign_passed": 1,
        "per_class": {
            "A": {"total": 2, "contained": 2},
            "B": {"total": 1, "contained": 1},
            "H": {"total": 1, "passed": 1},
        },
        "failures": [],
        "failure_detail": {},
        "duration_s": 1.0,
    },
    {
        "backend": "baseline-none",
        "total": 3,
        "contained": 0,
        "benign_total": 1,
        "benign_passed": 1,
        "per_class": {
            "A": {"total": 2, "contained": 0},
            "B": {"total": 1, "contained": 0},
            "H": {"total": 1, "passed": 1},
        },
        "failures": ["A1-001", "A1-002", "B1-001"],
        "failure_detail": {"A1-001": ["leak: canary in read_file result"]},
        "duration_s": 2.0,
    },
]
META = {"date": "2026-01-01 00:00 UTC", "machine": "test", "cases": 4, "fast": True}


def test_markdown_table():
    table = markdown_table(RESULTS)
    assert "| class | ours | baseline-none |" in table
    assert "| A filesystem containment | 2/2 | 0/2 |" in table
    assert "**3/3** | **0/3**" in table


def test_svg_has_one_bar_per_backend_and_class():
    svg = svg_chart(RESULTS)
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert len(re.findall(r"<rect [^>]*><title>", svg)) == 2 * 3
    assert "baseline-none A: 0/2" in svg


def test_html_is_self_contained():
    page = html_report(RESULTS, META, load_corpus())
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    assert "<svg" in page and "A1-001" in page


def test_write_report(tmp_path):
    write_report(tmp_path, RESULTS, META, load_corpus())
    assert {p.name for p in tmp_path.iterdir()} == {"report.md", "report.html", "results.json"}
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["results"][1]["failures"] == ["A1-001", "A1-002", "B1-001"]


def test_cli_json_keys(capsys, tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    code = security_bench.main(
        [
            "--backend",
            "baseline-none",
            "--class",
            "H",
            "--case",
            "H1-001",
            "--case",
            "H1-027",
            "--json",
            "--no-progress",
            "--report",
            str(tmp_path),
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in (
        "backend",
        "total",
        "contained",
        "benign_total",
        "benign_passed",
        "per_class",
        "failures",
        "duration_s",
    ):
        assert key in out
    assert out["benign_total"] == 2 and out["benign_passed"] == 2
    assert (tmp_path / "report.html").is_file()


def test_cli_usage_errors():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert security_bench.main(["--backend", "nope"]) == 64
    assert security_bench.main(["--class", "Z"]) == 64


def test_an_unknown_case_id_is_a_usage_error(capsys):
    # It ran 0 cases and exited 0: a typo looked like a pass.
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    argv = ["--case", "A1-001", "--case", "A1-9999", "--case", "nope", "--no-progress"]
    assert security_bench.main(argv) == 64
    assert "unknown case id(s): A1-9999, nope" in capsys.readouterr().err
    assert security_bench.main(["--class", "B", "--case", "A1-001", "--no-progress"]) == 64
    assert "no case selected" in capsys.readouterr().err


def test_the_failure_lists_are_complete(tmp_path):
    # The Markdown and HTML lists stopped at 200 cases, silently.
    ids = [f"A1-{i:03d}" for i in range(1, 251)]
    many = {
        **RESULTS[1],
        "total": 250,
        "failures": ids,
        "failure_detail": {cid: ["leak: x" * 100] for cid in ids},
    }
    write_report(tmp_path, [many], META, load_corpus())
    md = (tmp_path / "report.md").read_text()
    page = (tmp_path / "report.html").read_text()
    for cid in ids:
        assert f"`{cid}`" in md and f"<code>{cid}</code>" in page
    assert "results.json" in md and "results.json" in page  # where the full detail is


ERRORED = {
    "backend": "flaky",
    "total": 3,
    "contained": 1,
    "errored": 2,
    "benign_total": 1,
    "benign_passed": 0,
    "benign_errored": 1,
    "per_class": {
        "A": {"total": 2, "contained": 1, "errored": 1},
        "B": {"total": 1, "contained": 0, "errored": 1},
        "H": {"total": 1, "passed": 0, "contained": 0, "errored": 1},
    },
    "failures": [],
    "failure_detail": {},
    "errors": ["A1-001", "B1-001", "H1-001"],
    "error_detail": {"A1-001": ["call 0 (read_file) did not run: the worker exited 1"]},
    "duration_s": 1.0,
}


def test_errors_are_counted_apart_in_every_report(tmp_path):
    # A case a call of which did not run was counted as contained (nothing leaked).
    table = markdown_table([ERRORED])
    assert "| A filesystem containment | 1/2 (1 err) |" in table
    assert "| **errors (not scored)** | **2 + 1 benign** |" in table
    write_report(tmp_path, [ERRORED], META, load_corpus())
    md = (tmp_path / "report.md").read_text()
    assert "## flaky: 3 errors (a call did not run: not scored)" in md
    assert "- `A1-001` " in md and "the worker exited 1" in md
    page = (tmp_path / "report.html").read_text()
    assert "<td>1/2 (1 err)</td>" in page and "<th>errors (not scored)</th>" in page
    assert "flaky: 3 errors" in page and "flaky A: 1/2 (1 err)" in page


def test_only_ours_fails_the_exit_status_errors_included():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert security_bench.exit_status([RESULTS[0], ERRORED]) == 0
    assert security_bench.exit_status([{**ERRORED, "backend": "ours"}]) == 1


def test_what_stopped_each_contained_attack_is_reported(tmp_path):
    stopped = {
        **RESULTS[0],
        "per_class": {
            "A": {
                "total": 2,
                "contained": 2,
                "stopped_policy": 1,
                "stopped_error": 1,
                "stopped_ran": 0,
            },
            "B": {
                "total": 1,
                "contained": 1,
                "stopped_policy": 0,
                "stopped_error": 0,
                "stopped_ran": 1,
            },
            "H": {"total": 1, "passed": 1},
        },
        "cases": {
            "A1-001": {
                "outcome": "contained",
                "stopped": "policy",
                "calls": ["policy: deny paths.read: outside"],
            },
            "B1-001": {"outcome": "contained", "stopped": "ran", "calls": ["ran"]},
        },
    }
    write_report(tmp_path, [stopped], META, load_corpus())
    md = (tmp_path / "report.md").read_text()
    assert "| A filesystem containment | 1 / 1 / 0 |" in md
    assert "- `A1-001` contained (policy): policy: deny paths.read: outside" in md
    page = (tmp_path / "report.html").read_text()
    assert "<td>1 / 1 / 0</td>" in page
    assert "<code>B1-001</code> contained (ran): ran" in page
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["results"][0]["cases"]["A1-001"]["stopped"] == "policy"


def test_cases_not_applicable_are_listed_with_their_reason(tmp_path):
    """A case needing a program this host lacks is left out of the score (runner's
    ``not_applicable``): the reports count and list it, with what it needs."""
    res = {**RESULTS[0], "not_applicable": {"B5-017": "needs: busybox"}}
    table = markdown_table([res])
    assert "| not applicable (not scored) | 1 |" in table
    write_report(tmp_path, [res], META, load_corpus())
    md = (tmp_path / "report.md").read_text()
    assert "## ours: 1 not applicable on this host (not scored)" in md
    assert "- `B5-017` " in md and "needs: busybox" in md
    page = (tmp_path / "report.html").read_text()
    assert "<th>not applicable (not scored)</th><td>1</td>" in page
    assert "needs: busybox" in page
