"""``runtime tools --category C`` with a category no tool has."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run


def test_tools_with_an_unknown_category_is_a_usage_error(tmp_path: Path) -> None:
    # It printed [] (exit 0), as if the category were empty: a typo ('files' for 'file')
    # read as "no such tools".
    proc = run("tools", "--category", "files", cwd=tmp_path)
    assert proc.returncode == 64, proc.stdout
    assert "'files'" in proc.stderr and "file" in proc.stderr and "data" in proc.stderr
    ok = run("tools", "--category", "data", cwd=tmp_path)
    assert ok.returncode == 0 and {t["category"] for t in json.loads(ok.stdout)} == {"data"}
