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
