"""The policy's [paths] read/write globs inside the file toolkit (options path_read /
path_write, set by the sandbox backend when the globs are narrower than everything).

Red team: with read = write = ["out/**"], a walk from the workspace root (list_files,
file_search, code_query without a path) showed files outside out/, and a symlink in out/
(``out/s -> ../src``) let write_file and read_file reach files the globs leave out."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime import toolkit_fs
from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext
from tests.tools.helpers import Load, fails

_RENAME_EXCHANGE = 2


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
    # 'out/s' is in out/**, but the walk below it lists src/. (An empty listing, as it
    # once was, still told that src/ is a folder: N2.)
    err = fails(tool("list_files"), {"path": "out/s"}, narrow, "path_not_allowed")
    assert err.details["resolved"] == "src"
    args = {"query": "SECRET", "path": "out/s"}
    assert fails(tool("code_query"), args, narrow, "path_not_allowed").details["resolved"] == "src"


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


@pytest.fixture
def linked(ctx: ToolContext, ws: Path) -> ToolContext:
    """Red team (K4): pub/ and out/ readable, private/ not; a symlinked folder and a
    symlinked file in pub/ lead into private/."""
    for name in ("pub", "out", "private"):
        (ws / name).mkdir()
    (ws / "private" / "secret.txt").write_text("TOPSECRET-content\n")
    (ws / "private" / "sub").mkdir()
    (ws / "pub" / "ok.txt").write_text("fine\n")
    (ws / "pub" / "link").symlink_to("../private")
    (ws / "pub" / "slink").symlink_to("../private/secret.txt")
    ctx.options["path_read"] = ["pub/**", "out/**"]
    ctx.options["path_write"] = ["out/**"]
    ctx.options["path_deny"] = [".runtime/**", "**/.env"]
    return ctx


@pytest.mark.parametrize(
    ("path", "resolved"),
    [
        ("pub/link/secret.txt", "private/secret.txt"),
        ("pub/link/sub", "private/sub"),
        # Missing is an answer too: "exists: false" only where the file could be read.
        ("pub/link/nothere", "private/nothere"),
        ("pub/link/nothere/deeper", "private/nothere/deeper"),
        ("pub/link/secret.txt/x", "private/secret.txt"),  # not "is a file"
    ],
)
def test_info_through_a_symlinked_folder_is_refused(
    tool: Load, linked: ToolContext, path: str, resolved: str
) -> None:
    # get_file_info gave the size, mode and dates of private/secret.txt.
    err = fails(tool("get_file_info"), {"path": path}, linked, "path_not_allowed")
    assert err.details["resolved"] == resolved and err.details["rule"] == "paths.read"
    assert "18" not in err.message and "TOPSECRET" not in err.message


def test_info_below_a_file_is_judged_as_a_missing_path(tool: Load, linked: ToolContext) -> None:
    """A path below a file is missing (exists=false), and said so only where a missing path
    would be: inside the read globs."""
    linked.options["path_read"] = ["pub/ok.txt", "pub/nothere"]
    info = tool("get_file_info")
    assert info({"path": "pub/ok.txt"}, linked)["exists"] is True
    fails(info, {"path": "pub/nothere/x"}, linked, "path_not_allowed")
    err = fails(info, {"path": "pub/ok.txt/x"}, linked, "path_not_allowed")
    assert err.details["resolved"] == "pub/ok.txt/x"


def test_info_describes_a_symlink_where_it_lies(tool: Load, linked: ToolContext) -> None:
    # The link is an entry of pub/ (list_files shows it): its own size is that of its
    # target text, which is its content; the file it points to is not described.
    info = tool("get_file_info")({"path": "pub/slink"}, linked)
    assert info["type"] == "symlink" and info["target"] == "../private/secret.txt"
    assert info["size"] == len("../private/secret.txt")
    assert tool("get_file_info")({"path": "pub/link"}, linked)["type"] == "symlink"
    assert tool("get_file_info")({"path": "pub/ok.txt"}, linked)["size"] == 5
    assert tool("get_file_info")({"path": "pub/nothere"}, linked)["exists"] is False
    assert tool("get_file_info")({"path": "pub/ok.txt/x"}, linked)["exists"] is False
    assert tool("get_file_info")({"path": "out/new/deeper"}, linked)["exists"] is False
    err = fails(tool("get_file_info"), {"path": "private/secret.txt"}, linked, "path_not_allowed")
    assert err.details["resolved"] == "private/secret.txt"


@pytest.mark.parametrize("want", ["file", "all"])
def test_code_query_names_no_file_through_a_symlinked_folder(
    tool: Load, linked: ToolContext, want: str
) -> None:
    # The single-file branch added the path match before open_file's allow check.
    args = {"query": "secret", "path": "pub/link/secret.txt", "type": want}
    fails(tool("code_query"), args, linked, "path_not_allowed")
    args = {"query": "ok", "path": "pub/ok.txt", "type": want}
    assert [m["file"] for m in tool("code_query")(args, linked)["matches"]] == ["pub/ok.txt"]


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        # "not found" against path_not_allowed told which names exist under private/.
        ("read_file", {"path": "pub/link/nothere"}),
        ("read_file", {"path": "pub/link/nothere/deeper"}),
        ("read_file", {"path": "pub/link/secret.txt/x"}),
        ("edit_file", {"path": "pub/link/nothere", "old_string": "a", "new_string": "b"}),
        # "'pub/link/secret.txt' is a file, not a directory" told that it exists.
        ("list_files", {"path": "pub/link/secret.txt"}),
        ("file_search", {"path": "pub/link/secret.txt"}),
        ("code_query", {"query": "x", "path": "pub/link/secret.txt/x"}),
    ],
)
def test_errors_say_nothing_of_paths_outside_the_globs(
    tool: Load, linked: ToolContext, tool_name: str, args: dict[str, str]
) -> None:
    fails(tool(tool_name), args, linked, "path_not_allowed")


def test_errors_still_describe_readable_paths(tool: Load, linked: ToolContext) -> None:
    fails(tool("read_file"), {"path": "pub/nothere"}, linked, "not_found")
    fails(tool("list_files"), {"path": "pub/ok.txt"}, linked, "not_a_directory")
    fails(tool("read_file"), {"path": "pub/ok.txt/x"}, linked, "not_a_directory")


def test_a_socket_behind_a_symlinked_folder_is_not_named(
    tool: Load, linked: ToolContext, ws: Path
) -> None:
    # open_file's ENXIO branch stat'ed what the path named to say "is a socket".
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(ws / "private" / "sock"))
        fails(tool("read_file"), {"path": "pub/link/sock"}, linked, "path_not_allowed")
        (ws / "pub" / "sock").symlink_to("../private/sock")
        err = fails(tool("read_file"), {"path": "pub/sock"}, linked, "path_not_allowed")
        assert err.details["resolved"] == "private/sock"
    finally:
        s.close()


def test_write_only_paths_are_still_written_and_described_for_writing(
    tool: Load, linked: ToolContext, ws: Path
) -> None:
    # write_file's own lstat ("created") and the parents it makes are judged for writing.
    linked.options["path_write"] = ["out/**", "logs/**"]
    (ws / "logs").mkdir()
    (ws / "logs" / "app.log").write_text("x\n")
    args = {"path": "logs/app.log", "content": "y"}
    assert tool("write_file")(args, linked)["created"] is False
    args = {"path": "logs/new/deep.log", "content": "y"}
    assert tool("write_file")(args, linked)["created"] is True
    args = {"path": "logs/app.log/x", "content": "y"}
    fails(tool("write_file"), args, linked, "not_a_directory")
    fails(tool("get_file_info"), {"path": "logs/app.log"}, linked, "path_not_allowed")
    args = {"path": "pub/link/new.txt", "content": "y"}
    fails(tool("write_file"), args, linked, "path_not_allowed")
    assert not (ws / "private" / "new.txt").exists()


def test_no_folder_is_made_outside_the_write_globs(
    tool: Load, linked: ToolContext, ws: Path
) -> None:
    # The folders of a write's path were made (through out/l, in private/) before the
    # write globs refused the file itself.
    (ws / "out" / "l").symlink_to("../private")
    (ws / "out" / "x.txt").write_text("x\n")
    args = {"path": "out/l/newdir/a/f.txt", "content": "y"}
    err = fails(tool("write_file"), args, linked, "path_not_allowed")
    assert err.details["resolved"] == "private/newdir/a/f.txt"
    args = {"source": "out/x.txt", "destination": "out/l/mv/x.txt"}
    fails(tool("move_file"), args, linked, "path_not_allowed")
    assert sorted(p.name for p in (ws / "private").iterdir()) == ["secret.txt", "sub"]
    assert (ws / "out" / "x.txt").exists()
    # A glob that names files only still lets a write make the folder they are in.
    linked.options["path_read"] = linked.options["path_write"] = ["new/*.txt"]
    tool("write_file")({"path": "new/a.txt", "content": "y"}, linked)
    tool("move_file")({"source": "new/a.txt", "destination": "new/b.txt"}, linked)
    assert (ws / "new" / "b.txt").read_text() == "y"


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("delete_file", {"path": "out/l/nothere/x"}),
        ("delete_file", {"path": "out/l/nothere"}),
        ("move_file", {"source": "out/l/nothere/x", "destination": "out/y"}),
        ("move_file", {"source": "pub/link/nothere/x", "destination": "out/y"}),
    ],
)
def test_write_errors_say_nothing_of_paths_outside_the_globs(
    tool: Load, linked: ToolContext, ws: Path, tool_name: str, args: dict[str, str]
) -> None:
    # "not found" for a missing name under private/, path_not_allowed for a present one.
    (ws / "out" / "l").symlink_to("../private")
    fails(tool(tool_name), args, linked, "path_not_allowed")
    fails(tool("delete_file"), {"path": "out/nothere"}, linked, "not_found")


@pytest.fixture
def swapped(ctx: ToolContext, ws: Path) -> ToolContext:
    """Red team (N1): pub/a a real folder, pub/a_lnk -> ../private; a shell_exec in pub/
    (where it may write) swaps the two names with renameat2(RENAME_EXCHANGE) while
    write_file makes pub/a/n<i>/x.txt."""
    (ws / "pub" / "a").mkdir(parents=True)
    (ws / "pub" / "a_lnk").symlink_to("../private")
    (ws / "private").mkdir()
    ctx.options["path_read"] = ["**"]
    ctx.options["path_write"] = ["pub/**"]
    return ctx


def _exchange(ws: Path) -> None:
    """pub/a and pub/a_lnk swap names in one step, as the red team's shell did."""
    libc = ctypes.CDLL(None, use_errno=True)
    pub = os.fsencode(ws / "pub")
    if libc.renameat2(-100, pub + b"/a", -100, pub + b"/a_lnk", _RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("write_file", {"path": "pub/a/n1/x.txt", "content": "x"}),
        ("write_file", {"path": "pub/a/n1/n2/x.txt", "content": "x"}),
        ("move_file", {"source": "pub/x.txt", "destination": "pub/a/n1/x.txt"}),
    ],
)
def test_a_link_swapped_in_after_the_check_makes_no_folder(
    tool: Load,
    swapped: ToolContext,
    ws: Path,
    monkeypatch: pytest.MonkeyPatch,
    tool_name: str,
    args: dict[str, str],
) -> None:
    # The write was judged (pub/a/n1/x.txt, in pub/**), then open_dir(create=True) made
    # each folder under a parent it re-resolved from the root by name: the link swapped in
    # meanwhile made private/n1 before the file itself was refused.
    (ws / "pub" / "x.txt").write_text("x\n")
    open_dir = toolkit_fs.Workspace.open_dir

    def swap_then_open_dir(
        self: toolkit_fs.Workspace, parts: tuple[str, ...], **kw: Any
    ) -> toolkit_fs.Fd:
        if kw.get("create"):  # the last check is behind us: the shell's swap lands here
            _exchange(ws)
        return open_dir(self, parts, **kw)

    monkeypatch.setattr(toolkit_fs.Workspace, "open_dir", swap_then_open_dir)
    err = fails(tool(tool_name), args, swapped, "path_not_allowed")
    assert err.details["resolved"].startswith("private/n1") and err.details["rule"] == "paths.write"
    assert list((ws / "private").iterdir()) == []
    assert (ws / "pub" / "x.txt").exists()


_SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = os.fsencode(sys.argv[1] + "/a"), os.fsencode(sys.argv[1] + "/a_lnk")
print("ready", flush=True)
for _ in range(50_000_000):
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        sys.exit(ctypes.get_errno())
"""


def test_the_real_race_makes_no_folder(tool: Load, swapped: ToolContext, ws: Path) -> None:
    # The red team's race, bounded by writes: another process swaps the names throughout.
    outcomes: set[str] = set()
    with subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(ws / "pub")], stdout=subprocess.PIPE, text=True
    ) as swapper:
        try:
            assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
            for i in range(400):
                args = {"path": f"pub/a/n{i}/x.txt", "content": "x"}
                try:
                    tool("write_file")(args, swapped)
                    outcomes.add("ok")
                except ToolFailed as exc:
                    outcomes.add(str(exc.details["reason"]))
            assert swapper.poll() is None, "the swapper stopped early"
        finally:
            swapper.kill()
    assert list((ws / "private").iterdir()) == [], outcomes


@pytest.fixture
def behind(ctx: ToolContext, ws: Path) -> ToolContext:
    """Red team (N2): pub/link -> ../private; private/ holds a folder and a file; only
    pub/ is readable (and writable)."""
    (ws / "pub" / "sub").mkdir(parents=True)
    (ws / "private" / "inner").mkdir(parents=True)
    (ws / "private" / "secret.py").write_text("def topsecret_function(): pass\n")
    (ws / "pub" / "link").symlink_to("../private")
    ctx.options["path_read"] = ["pub/**"]
    ctx.options["path_write"] = ["pub/**"]
    return ctx


_WALKERS = [
    ("list_files", {}),
    ("list_files", {"recursive": True}),
    ("file_search", {"pattern": "*"}),
    ("code_query", {"query": "x"}),
    ("code_query", {"query": "x", "type": "file"}),
]


@pytest.mark.parametrize(("tool_name", "extra"), _WALKERS)
@pytest.mark.parametrize(
    ("path", "resolved"),
    [
        # An empty listing, "not found", path_not_allowed and "not found" again: which
        # names exist under private/, and which are folders.
        ("pub/link/inner", "private/inner"),
        ("pub/link/nothere", "private/nothere"),
        ("pub/link/secret.py", "private/secret.py"),
        ("pub/link/inner/x", "private/inner/x"),
        ("pub/link", "private"),
    ],
)
def test_walks_say_nothing_of_folders_outside_the_read_globs(
    tool: Load,
    behind: ToolContext,
    tool_name: str,
    extra: dict[str, object],
    path: str,
    resolved: str,
) -> None:
    err = fails(tool(tool_name), {"path": path, **extra}, behind, "path_not_allowed")
    assert err.details["resolved"] == resolved and err.details["rule"] == "paths.read"


@pytest.mark.parametrize("cwd", ["pub/link/inner", "pub/link/nothere", "pub/link/secret.py"])
def test_a_shell_cwd_says_nothing_of_folders_outside_the_read_globs(
    tool: Load, behind: ToolContext, cwd: str
) -> None:
    fails(tool("shell_exec"), {"command": "true", "cwd": cwd}, behind, "path_not_allowed")


def test_walks_still_answer_for_readable_folders(tool: Load, behind: ToolContext, ws: Path) -> None:
    fails(tool("list_files"), {"path": "pub/nothere"}, behind, "not_found")
    fails(tool("file_search"), {"path": "pub/nothere/x"}, behind, "not_found")
    assert tool("list_files")({"path": "pub/sub"}, behind)["files"] == []
    listed = tool("list_files")({"path": "."}, behind)  # the root holds readable paths
    assert [f["path"] for f in listed["files"]] == ["pub"]
    assert tool("shell_exec")({"command": "true", "cwd": "pub/sub"}, behind)["exit_code"] == 0
    # A folder outside the globs that holds readable paths is walked, showing only those.
    (ws / "private" / "inner" / "pub").mkdir()
    (ws / "private" / "inner" / "pub" / "ok.py").write_text("def fine(): pass\n")
    behind.options["path_read"] = ["pub/**", "private/inner/pub/**"]
    listed = tool("list_files")({"path": "pub/link/inner", "recursive": True}, behind)
    assert [f["path"] for f in listed["files"]] == [
        "pub/link/inner/pub",
        "pub/link/inner/pub/ok.py",
    ]
    found = tool("code_query")({"query": "fine", "path": "pub/link/inner/pub"}, behind)
    assert found["count"] == 1
    fails(tool("list_files"), {"path": "pub/link/nothere"}, behind, "path_not_allowed")
    fails(tool("list_files"), {"path": "pub/link/inner/nothere"}, behind, "path_not_allowed")
    fails(tool("list_files"), {"path": "pub/link/inner/pub/nothere"}, behind, "not_found")
