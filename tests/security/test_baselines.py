"""The baselines: the seed validators as the seeds wrote them, and real uncontained runs
scored as failures end to end (fixtures → worker → oracles)."""

from __future__ import annotations

import pytest

from benchmarks.security.baselines import Refused, seed_check_command, seed_resolve
from benchmarks.security.corpus import load_corpus
from benchmarks.security.executors import make_executor
from benchmarks.security.oracles import BenchLimits
from benchmarks.security.runner import run_cases

# The baselines run as fixed private uids and reap them after each case: two workers
# running baseline cases at once would kill each other's processes (pytest-xdist).
pytestmark = pytest.mark.xdist_group("baseline_uids")

LIMITS = BenchLimits()


def test_seed_path_check_has_the_prefix_bug():
    assert seed_resolve("/x/ws", "a/b") == "/x/ws/a/b"
    with pytest.raises(Refused):
        seed_resolve("/x/ws", "../outside/s")
    with pytest.raises(Refused):
        seed_resolve("/x/ws", "/etc/passwd")
    # CVE-2025-53110: a string prefix is not a path prefix
    assert seed_resolve("/x/ws", "../ws-evil/s") == "/x/ws-evil/s"


@pytest.mark.parametrize(
    "cmd",
    [
        "rm -rf /",
        "rm  -rf  /tmp",
        "mkfs.ext4 /dev/sda",
        "dd if=/dev/zero of=x",
        "npm start",
        "python -m http.server",
    ],
)
def test_seed_patterns_block_the_plain_forms(cmd):
    with pytest.raises(Refused):
        seed_check_command(cmd)


@pytest.mark.parametrize("cmd", ["rm -r -f /", "/bin/rm -fr /", "r''m -rf /", "rm${IFS}-rf /"])
def test_seed_patterns_miss_the_variants(cmd):
    seed_check_command(cmd)  # no exception: that is the point of the comparison


@pytest.fixture(scope="module")
def corpus():
    return {c.id: c for c in load_corpus()}


def _run(backend, ids, corpus, servers):
    ex = make_executor(backend, servers, LIMITS)
    summary = run_cases([corpus[i] for i in ids], ex, servers, LIMITS)
    return {v.case_id: v for v in summary.verdicts}, summary


def _find(corpus, group, title):
    return next(c.id for c in corpus.values() if c.group == group and c.title == title)


def test_uncontained_runs_are_failures(corpus, servers):
    ids = {
        "leak": "A1-001",
        "write": _find(corpus, "A1", "write_file into dot-dot dir"),
        "connect": _find(corpus, "E6", "shell egress curl"),
        "survivors": _find(corpus, "C7", "setsid survivor"),
        "host secret": _find(corpus, "D2", "own environment"),
        "metadata": _find(corpus, "E2", "metadata dotted"),
    }
    verdicts, summary = _run("baseline-none", list(ids.values()), corpus, servers)
    for what, cid in ids.items():
        assert not verdicts[cid].ok, (what, verdicts[cid])
    assert verdicts[ids["leak"]].effects == ["leak"]
    assert "write" in verdicts[ids["write"]].effects
    assert "connect" in verdicts[ids["connect"]].effects
    assert "survivors" in verdicts[ids["survivors"]].effects
    out = summary.to_json()
    assert out["total"] == len(ids) and out["contained"] == 0
    assert sorted(out["failures"]) == sorted(ids.values())


def test_seed_layer_stops_plain_traversal_but_not_the_prefix(corpus, servers):
    prefix = _find(corpus, "A2", "read_file relative sibling")
    verdicts, _ = _run("baseline-seed", ["A1-001", prefix], corpus, servers)
    assert verdicts["A1-001"].ok
    assert not verdicts[prefix].ok and verdicts[prefix].effects == ["leak"]


def test_benign_controls_pass_on_the_baselines(corpus, servers):
    ids = [c.id for c in corpus.values() if c.benign][:6]
    verdicts, summary = _run("baseline-none", ids, corpus, servers)
    assert all(v.ok for v in verdicts.values()), [v.detail for v in verdicts.values()]
    assert summary.to_json()["benign_passed"] == len(ids)
