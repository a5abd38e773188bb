"""Other sandboxes scored on the corpus: the ``none`` baseline's tools (no check at all) run
inside the sandbox's command, so what is contained is what the sandbox contains —
``--backend bwrap`` (bubblewrap as agent command-line tools commonly configure it) and
``--wrap NAME=COMMAND`` for any other. A sandbox that cannot run the worker is refused:
it would otherwise score every attack as contained, having run nothing."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.security import executors
from benchmarks.security.corpus import load_corpus
from benchmarks.security.executors import WrapperError, make_executor, parse_wrapper
from benchmarks.security.oracles import BenchLimits
from benchmarks.security.runner import run_cases

# The wrapped workers run as the baseline's private uid (see test_baselines).
pytestmark = pytest.mark.xdist_group("baseline_uids")

ROOT = Path(__file__).resolve().parents[2]
LIMITS = BenchLimits()
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def _bench() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import security_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return security_bench


@pytest.fixture(scope="module")
def corpus() -> dict[str, Any]:
    return {c.id: c for c in load_corpus()}


def _find(corpus: dict[str, Any], group: str, title: str) -> str:
    return next(c.id for c in corpus.values() if c.group == group and c.title == title)


@needs_bwrap
def test_bwrap_is_scored_for_what_it_contains_and_what_it_does_not(
    corpus: dict[str, Any], servers: Any
) -> None:
    # The host root is bound read-only: a read outside the workspace leaks and the
    # environment passes through; writes outside, the network and survivors are contained.
    ids = {
        "read outside": "A1-001",
        "write outside": _find(corpus, "A1", "write_file into dot-dot dir"),
        "egress": _find(corpus, "E6", "shell egress curl"),
        "survivor": _find(corpus, "C7", "setsid survivor"),
        "host environment": _find(corpus, "D2", "own environment"),
        # /workspace/../outside/x: missing or read-only in bwrap's view; the harness guard
        # leaves it to the kernel instead of scoring it as written
        "alias write": _find(corpus, "A1", "write_file into sandbox alias dir"),
        "alias delete": _find(corpus, "A8", "delete /workspace"),
    }
    ex = make_executor("bwrap", servers, LIMITS)
    summary = run_cases([corpus[i] for i in ids.values()], ex, servers, LIMITS)
    verdicts = {v.case_id: v for v in summary.verdicts}
    assert verdicts[ids["read outside"]].effects == ["leak"]
    assert not verdicts[ids["host environment"]].ok
    for what in ("write outside", "egress", "survivor", "alias write", "alias delete"):
        assert verdicts[ids[what]].ok, (what, verdicts[ids[what]])
    assert summary.to_json()["backend"] == "bwrap"


def test_wrap_scores_a_sandbox_command_under_its_name(
    corpus: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # `env` confines nothing: the tools inside it are the unchecked baseline's, and a write
    # outside the tree where the host's root is writable is still scored as done.
    alias = _find(corpus, "A1", "write_file into sandbox alias dir")
    argv = ["--wrap", "nothing=env", "--case", "A1-001", "--case", alias, "--json"]
    code = _bench().main([*argv, "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0  # only `ours` can fail the command
    assert out["backend"] == "nothing"
    assert sorted(out["failures"]) == sorted(["A1-001", alias])


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("nothing", "expected NAME=COMMAND"),
        ("Bad Name=env", "expected NAME=COMMAND"),
        ("ours=env", "built-in backend"),
        ("x=", "the command is empty"),
        ("x=env 'unclosed", "quotation"),
        ("x=env {home}", "unknown placeholder {home}"),
        ("x=no-such-sandbox-program --", "not installed"),
        ("x=false", "cannot run the worker inside 'false'"),
    ],
)
def test_a_sandbox_that_cannot_be_scored_is_a_usage_error(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _bench().main(["--wrap", value, "--case", "A1-001", "--no-progress"]) == 64
    assert said in capsys.readouterr().err


def test_the_worker_must_answer_through_the_wrapper(servers: Any) -> None:
    name, argv = parse_wrapper("silent=sh -c 'exit 0' --")
    with pytest.raises(WrapperError, match="cannot run the worker inside 'sh'"):
        make_executor(name, servers, LIMITS, {name: argv})


def test_a_sandbox_that_dies_after_the_probe_scores_errors_not_containment(
    corpus: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # It answers the start-up probe (whose workspace is a secbench-probe-* directory), then
    # exits 1 on every call: that scored every attack "contained" (nothing ran, nothing
    # leaked), exit status 0.
    dies = (
        'flaky=sh -c \'case "$0" in *secbench-probe-*) exec "$@";; esac; '
        "echo sandbox crashed >&2; exit 1' {workspace}"
    )
    ids = ["A1-001", _find(corpus, "E6", "shell egress curl"), "H1-001"]
    argv = ["--wrap", dies, *(w for i in ids for w in ("--case", i)), "--json", "--no-progress"]
    code = _bench().main(argv)
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert (out["contained"], out["errored"], out["benign_errored"]) == (0, 2, 1)
    assert out["failures"] == [] and sorted(out["errors"]) == sorted(ids)
    assert "ERROR: backend 'flaky': 3 case(s) could not be scored" in captured.err
    assert code == 0  # only `ours` fails the command; the errors are printed and counted


@needs_bwrap
def test_bwrap_runs_the_http_tools_it_is_scored_on(corpus: dict[str, Any], servers: Any) -> None:
    # Its worker fell back to /usr/bin/python3, which has no httpx here: every HTTP attack
    # ended in ModuleNotFoundError and was scored contained (91 of class E). The probe now
    # requires every module the worker imports; the HTTP call really runs and, with no
    # network in the sandbox, fails to connect.
    ex = make_executor("bwrap", servers, LIMITS)
    summary = run_cases([corpus["E1-001"]], ex, servers, LIMITS)
    (verdict,) = summary.verdicts
    assert verdict.outcome == "contained", verdict
    assert summary.to_json()["errored"] == 0


def test_the_worker_modules_are_read_from_its_source() -> None:
    modules = executors.worker_modules()
    assert {"httpx", "csv", "json", "subprocess"} <= set(modules)
    assert "__future__" not in modules


@pytest.mark.parametrize("backend", ["baseline-none", "bwrap"])
def test_an_interpreter_without_a_module_the_tools_import_is_refused(
    backend: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if backend == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    need = (*executors.worker_modules(), "no_such_module_secbench")
    monkeypatch.setattr(executors, "worker_modules", lambda: need)
    assert _bench().main(["--backend", backend, "--case", "E1-001", "--no-progress"]) == 64
    err = capsys.readouterr().err
    assert f"backend {backend!r} cannot run the worker" in err
    assert "cannot import no_such_module_secbench (ModuleNotFoundError" in err
