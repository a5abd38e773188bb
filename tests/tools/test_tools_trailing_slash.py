"""A trailing '/' names a directory (POSIX: ENOTDIR on a file): the file tools no longer
drop it (hunt L3: read_file 'nonl.txt/' read the file, write_file 'slash.txt/' made a
file 'slash.txt')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.toolkit import ToolContext
from tests.tools.helpers import Load
from tests.tools.helpers import fails as _fails


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"path": "f.txt/"}),
        ("read_file", {"path": "f.txt/."}),
        ("write_file", {"path": "f.txt/", "content": "x"}),
        ("write_file", {"path": "new.txt/", "content": "x"}),
        ("edit_file", {"path": "f.txt/", "old_string": "a", "new_string": "b"}),
        ("delete_file", {"path": "f.txt/"}),
        ("move_file", {"source": "f.txt/", "destination": "g.txt"}),
        ("move_file", {"source": "f.txt", "destination": "g.txt/"}),
        ("read_file", {"path": "link/"}),
    ],
)
def test_a_trailing_slash_on_a_file_is_not_a_directory(
    tool: Load, ctx: ToolContext, ws: Path, name: str, args: dict[str, Any]
) -> None:
    (ws / "f.txt").write_text("a")
    (ws / "link").symlink_to("f.txt")
    err = _fails(tool(name), args, ctx, "not_a_directory")
    assert "ends with '/'" in err.message
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt", "link"]
    assert (ws / "f.txt").read_text() == "a"


def test_a_trailing_slash_on_a_directory_still_works(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    (ws / "d" / "sub").mkdir(parents=True)
    (ws / "d" / "f.txt").write_text("a")
    listed = tool("list_files")({"path": "d/"}, ctx)
    assert [e["name"] for e in listed["files"]] == ["f.txt", "sub"]
    assert tool("file_search")({"path": "d/", "pattern": "*.txt"}, ctx)["count"] == 1
    _fails(tool("read_file"), {"path": "d/"}, ctx, "is_directory")
    _fails(tool("read_file"), {"path": "missing/"}, ctx, "not_found")
    r = tool("move_file")({"source": "d/sub/", "destination": "e/"}, ctx)
    assert r["moved"] and (ws / "e").is_dir()
    r = tool("delete_file")({"path": "d/", "recursive": True}, ctx)
    assert r["type"] == "directory" and not (ws / "d").exists()
