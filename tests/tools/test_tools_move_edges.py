"""move_file at its edges: what a refused move leaves behind, and what its errors say."""

from __future__ import annotations

from pathlib import Path

from runtime.toolkit import ToolContext
from tests.tools.helpers import Load
from tests.tools.helpers import fails as _fails


def test_a_missing_source_makes_no_destination_folder(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """Hunt L1: the destination's folders were made before the source was looked at, so a
    refused move left ``zz/`` behind."""
    err = _fails(
        tool("move_file"), {"source": "missing", "destination": "zz/deep/m"}, ctx, "not_found"
    )
    assert "source 'missing'" in err.message
    assert not (ws / "zz").exists()


def test_a_file_moved_below_itself_is_not_called_a_directory(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """Hunt L2: ``a.txt`` to ``a.txt/x`` said "cannot move a directory into itself"."""
    (ws / "a.txt").write_text("a")
    args = {"source": "a.txt", "destination": "a.txt/x"}
    err = _fails(tool("move_file"), args, ctx, "not_a_directory")
    assert "directory into itself" not in err.message and "'a.txt' is a file" in err.message
    (ws / "d").mkdir()
    err = _fails(tool("move_file"), {"source": "d", "destination": "d/sub"}, ctx, "into_itself")
    assert (ws / "a.txt").read_text() == "a" and (ws / "d").is_dir()


def test_overwrite_across_kinds_names_both(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """Hunt L2: a directory moved onto a file with overwrite said "a parent of destination
    'file' is not a directory" (rename's ENOTDIR, blamed on a parent); a file onto a
    directory only "is a directory"."""
    (ws / "d").mkdir()
    (ws / "d" / "in.txt").write_text("i")
    (ws / "file").write_text("f")
    (ws / "e").mkdir()
    move = tool("move_file")
    args = {"source": "d", "destination": "file", "overwrite": True}
    err = _fails(move, args, ctx, "not_a_directory")
    assert "parent" not in err.message
    assert "'file', a file" in err.message and "'d', a directory" in err.message
    args = {"source": "file", "destination": "e", "overwrite": True}
    err = _fails(move, args, ctx, "is_a_directory")
    assert "'e', a directory" in err.message and "'file', a file" in err.message
    assert (ws / "file").read_text() == "f" and (ws / "d" / "in.txt").exists()
