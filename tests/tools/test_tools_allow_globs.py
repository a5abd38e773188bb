"""The policy's [paths] read/write globs inside the file toolkit (options path_read /
path_write, set by the sandbox backend when the globs are narrower than everything).

Red team: with read = write = ["out/**"], a walk from the workspace root (list_files,
file_search, code_query without a path) showed files outside out/, and a symlink in out/
(``out/s -> ../src``) let write_file and read_file reach files the globs leave out."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.toolkit import ToolContext
from tests.tools.helpers import Load, fails


@pytest.fixture
def narrow(ctx: ToolContext, ws: Path) -> ToolContext:
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("SECRET_TOKEN = 'abc123'\n")
    (ws / "private.txt").write_text("PRIVATE\n")
    (ws / "out").mkdir()
    (ws / "out" / "ok.py").write_text("def fine():\n    pass\n")
    (ws / "out" / "s").symlink_to("../src")
    (ws / "out" / "p").symlink_to("../private.txt")
    ctx.options["path_read"] = ["out/**"]
    ctx.options["path_write"] = ["out/**"]
    return ctx


def test_walks_show_only_readable_entries(tool: Load, narrow: ToolContext) -> None:
    listed = tool("list_files")({"recursive": True}, narrow)
    assert {f["path"] for f in listed["files"]} == {"out", "out/ok.py", "out/s", "out/p"}
    found = tool("file_search")({"pattern": "*"}, narrow)
    assert {m["path"] for m in found["matches"]} == {"out", "out/ok.py", "out/s", "out/p"}
    cq = tool("code_query")
    assert cq({"query": "SECRET"}, narrow)["count"] == 0
    assert cq({"query": "SECRET", "path": "."}, narrow)["count"] == 0
    assert [m["name"] for m in cq({"query": "fine"}, narrow)["matches"]] == ["fine"]


def test_walk_through_symlink_is_judged_where_it_leads(tool: Load, narrow: ToolContext) -> None:
    # 'out/s' is in out/**, but the walk below it lists src/.
    assert tool("list_files")({"path": "out/s"}, narrow)["files"] == []
    assert tool("code_query")({"query": "SECRET", "path": "out/s"}, narrow)["count"] == 0


def test_read_through_symlink_outside_read_globs(tool: Load, narrow: ToolContext) -> None:
    err = fails(tool("read_file"), {"path": "out/p"}, narrow, "path_not_allowed")
    assert err.details["resolved"] == "private.txt" and err.details["rule"] == "paths.read"
    fails(tool("read_file"), {"path": "out/s/main.py"}, narrow, "path_not_allowed")
    fails(tool("code_query"), {"query": "x", "path": "out/s/main.py"}, narrow, "path_not_allowed")
    assert tool("read_file")({"path": "out/ok.py"}, narrow)["content"].startswith("def fine")


def test_write_through_symlink_outside_write_globs(
    tool: Load, narrow: ToolContext, ws: Path
) -> None:
    args = {"path": "out/s/main.py", "content": "pwned"}
    err = fails(tool("write_file"), args, narrow, "path_not_allowed")
    assert err.details["resolved"] == "src/main.py" and err.details["rule"] == "paths.write"
    fails(tool("write_file"), {"path": "out/s/new.py", "content": "x"}, narrow, "path_not_allowed")
    args = {"path": "out/s/main.py", "old_string": "abc123", "new_string": "pwned"}
    fails(tool("edit_file"), args, narrow, "path_not_allowed")
    fails(tool("delete_file"), {"path": "out/s/main.py"}, narrow, "path_not_allowed")
    args = {"source": "out/s/main.py", "destination": "out/stolen.py"}
    fails(tool("move_file"), args, narrow, "path_not_allowed")
    assert (ws / "src" / "main.py").read_text() == "SECRET_TOKEN = 'abc123'\n"
    assert not (ws / "src" / "new.py").exists()
    tool("write_file")({"path": "out/new.txt", "content": "ok"}, narrow)
    assert (ws / "out" / "new.txt").read_text() == "ok"


def test_without_allow_globs_nothing_changes(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("SECRET_TOKEN = 1\n")
    (ws / "out").mkdir()
    (ws / "out" / "s").symlink_to("../src")
    assert tool("code_query")({"query": "SECRET"}, ctx)["count"] == 1
    assert tool("read_file")({"path": "out/s/main.py"}, ctx)["content"] == "SECRET_TOKEN = 1\n"
    tool("write_file")({"path": "out/s/main.py", "content": "x"}, ctx)
    assert (ws / "src" / "main.py").read_text() == "x"


def test_write_only_paths_are_not_read_through_a_move_or_an_edit(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """Red team: with logs/** writable but not readable, move_file logs/app.log to out/
    (readable) showed it, and edit_file answered whether a guess was in it."""
    (ws / "logs").mkdir()
    (ws / "logs" / "app.log").write_text("LOGSECRET token=abc\n")
    (ws / "out").mkdir()
    ctx.options["path_read"] = ["out/**"]
    ctx.options["path_write"] = ["out/**", "logs/**"]
    args = {"source": "logs/app.log", "destination": "out/app.log"}
    err = fails(tool("move_file"), args, ctx, "path_not_allowed")
    assert err.details["rule"] == "paths.read"
    args = {"path": "logs/app.log", "old_string": "token=abc", "new_string": "x"}
    fails(tool("edit_file"), args, ctx, "path_not_allowed")
    assert (ws / "logs" / "app.log").read_text() == "LOGSECRET token=abc\n"
    assert not (ws / "out" / "app.log").exists()
    tool("write_file")({"path": "logs/new.log", "content": "ok"}, ctx)  # still writable
