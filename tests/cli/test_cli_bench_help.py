"""``runtime bench perf|security|soak --help`` listed no options at all (typer's help of a
command that passes its arguments on): the benchmark's own parser now answers ``--help``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import run


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("perf", ["--json", "--quick", "--no-sandbox"]),
        ("security", ["--backend", "--class", "--json", "--report", "--case"]),
        ("soak", ["--calls", "--json"]),
    ],
)
def test_bench_help_lists_the_benchmarks_options(
    command: str, options: list[str], tmp_path: Path
) -> None:
    proc = run("bench", command, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"usage: runtime bench {command}" in proc.stdout
    for option in options:
        assert option in proc.stdout


def test_bench_group_help_still_lists_the_commands(tmp_path: Path) -> None:
    proc = run("bench", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for command in ("perf", "security", "soak"):
        assert command in proc.stdout


@pytest.mark.parametrize(
    ("command", "args", "words"),
    [
        ("soak", ["--samples", "0"], "--samples: must be at least 1, not 0"),
        ("soak", ["--calls", "0"], "--calls: must be at least 1, not 0"),
        ("soak", ["--calls", "-5"], "--calls: must be at least 1, not -5"),
        ("soak", ["--calls", "abc"], "--calls: not a whole number: 'abc'"),
        ("soak", ["--max-rss-growth-mb", "nan"], "must be a finite number >= 0"),
        ("soak", ["--bogus"], "unrecognized arguments: --bogus"),
        ("perf", ["--bogus"], "unrecognized arguments: --bogus"),
        ("security", ["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bench_usage_errors_exit_64(
    command: str, args: list[str], words: str, tmp_path: Path
) -> None:
    # --samples 0 divided by zero and --calls 0 indexed an empty list (tracebacks, after a
    # broker was opened); argparse's own usage errors exited 2. DESIGN §7: usage is 64.
    proc = run("bench", command, *args, cwd=tmp_path)
    assert proc.returncode == 64, (proc.stdout, proc.stderr)
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""
