"""``runtime --version`` (it was "No such option", exit 64) prints the package's version,
the one pyproject.toml declares."""

from __future__ import annotations

import tomllib
from pathlib import Path

import runtime
from tests.cli.test_cli import run

ROOT = Path(__file__).resolve().parents[2]


def test_version_prints_the_packages_version(tmp_path: Path) -> None:
    proc = run("--version", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"runtime {runtime.__version__}\n"


def test_the_version_is_the_one_pyproject_declares() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == runtime.__version__
