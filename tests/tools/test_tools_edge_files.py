"""File tools at the edges: move_file where the source and the destination are one file,
a path that names a UNIX socket (each a clear tool_error, never a lost file or a false
``moved: true``), and writes past the call's file-size limit (resource_limit)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests.tools.helpers import Load, Tool
from tests.tools.helpers import fails as _fails


def test_move_onto_the_same_path_says_so(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """It said "cannot move a directory into itself" of a plain file."""
    (ws / "a.txt").write_text("A")
    (ws / "d").mkdir()
    mv = tool("move_file")
    for dst in ("a.txt", "./a.txt", "/workspace/a.txt"):
        for overwrite in (False, True):
            args = {"source": "a.txt", "destination": dst, "overwrite": overwrite}
            err = _fails(mv, args, ctx, "same_path")
            assert "directory" not in err.message and "same" in err.message
    _fails(mv, {"source": "d", "destination": "d/"}, ctx, "same_path")
    # The same entry through a symlinked folder: rename(2) did nothing, moved=true.
    (ws / "d" / "f").write_text("F")
    (ws / "dl").symlink_to("d")
    for overwrite in (False, True):
        args = {"source": "d/f", "destination": "dl/f", "overwrite": overwrite}
        _fails(mv, args, ctx, "same_path")
    assert (ws / "d" / "f").read_text() == "F"
    assert (ws / "a.txt").read_text() == "A" and (ws / "d").is_dir()


def test_move_between_two_links_of_one_file_is_refused(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """rename(2) between two hard links of one file does nothing and succeeds: the tool
    answered moved=true with the source still there."""
    (ws / "a.txt").write_text("A")
    os.link(ws / "a.txt", ws / "b.txt")
    mv = tool("move_file")
    for overwrite in (False, True):
        args = {"source": "a.txt", "destination": "b.txt", "overwrite": overwrite}
        err = _fails(mv, args, ctx, "same_file")
        assert "hard link" in err.message
    assert (ws / "a.txt").read_text() == (ws / "b.txt").read_text() == "A"


def test_move_of_a_symlink_onto_its_own_target_keeps_the_file(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """``link -> a.txt`` moved onto ``a.txt`` with overwrite=true replaced the file with the
    link, which then named itself: the file's content was gone (coreutils' mv refuses)."""
    (ws / "a.txt").write_text("precious")
    (ws / "link").symlink_to("a.txt")
    (ws / "sub").mkdir()
    (ws / "sub" / "up").symlink_to("../a.txt")
    mv = tool("move_file")
    for src in ("link", "sub/up"):
        err = _fails(
            mv, {"source": src, "destination": "a.txt", "overwrite": True}, ctx, "same_file"
        )
        assert "symlink" in err.message
    assert (ws / "a.txt").read_text() == "precious" and not (ws / "a.txt").is_symlink()
    # A symlink onto some other file is an ordinary move.
    (ws / "other.txt").write_text("other")
    assert mv({"source": "link", "destination": "other.txt", "overwrite": True}, ctx)["moved"]
    assert os.readlink(ws / "other.txt") == "a.txt"


def test_move_of_a_directory_into_itself_through_a_symlink(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """The kernel's EINVAL came back as "cannot access destination 'dl/sub': Invalid
    argument" (reason os_error)."""
    (ws / "d").mkdir()
    (ws / "dl").symlink_to("d")
    _fails(tool("move_file"), {"source": "d", "destination": "dl/sub"}, ctx, "into_itself")
    assert (ws / "d").is_dir()


@pytest.fixture
def sock(ws: Path) -> Iterator[Path]:
    path = ws / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    (ws / "sock_link").symlink_to("sock")
    yield path
    s.close()


@pytest.mark.parametrize("name", ["sock", "sock_link"])
@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("read_file", {}),
        ("read_file", {"encoding": "base64"}),
        ("edit_file", {"old_string": "a", "new_string": "b"}),
    ],
)
def test_a_socket_is_named_as_such(
    tool: Load,
    ctx: ToolContext,
    sock: Path,
    name: str,
    tool_name: str,
    args: dict[str, Any],
) -> None:
    """Opening a socket fails with ENXIO, which came back as "cannot access file 'sock': No
    such device or address" (reason os_error): the caller could not tell what was wrong."""
    err = _fails(tool(tool_name), {"path": name, **args}, ctx, "is_other")
    assert "socket" in err.message and "not a regular file" in err.message


def _under_fsize_limit(fn: Tool, args: dict[str, Any], ctx: ToolContext, limit: int) -> str:
    """``fn(args, ctx)`` in a forked child with RLIMIT_FSIZE at ``limit`` bytes (what the
    sandbox sets from the policy's fsize_mb; Python ignores SIGXFSZ, so a write past it
    fails with EFBIG): the error type and details it raised, as JSON."""
    import json
    import resource

    from runtime.errors import RuntimeToolError

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            try:
                fn(args, ctx)
                out = {"type": "success"}
            except RuntimeToolError as exc:
                out = {"type": str(exc.error_type.value), "message": exc.message, **exc.details}
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    return data.decode()


@pytest.mark.parametrize(
    ("tool_name", "args"),
    [
        ("write_file", {"path": "big.txt", "content": "a" * 300_000}),
        ("write_file", {"path": "half.txt", "content": "a" * 70_000, "mode": "append"}),
        (
            "edit_file",
            {"path": "half.txt", "old_string": "a", "new_string": "bb", "replace_all": True},
        ),
    ],
)
def test_a_write_past_the_file_size_limit_is_a_resource_limit(
    tool: Load, ctx: ToolContext, ws: Path, tool_name: str, args: dict[str, Any]
) -> None:
    """Past the call's file-size limit (fsize_mb), write_file and edit_file said "no space
    left (or file too large)" (tool_error): the caller could not tell that the policy's
    limit stopped it. Now resource_limit naming fsize_mb, the file left as it was."""
    import json

    (ws / "half.txt").write_text("a" * 70_000)
    out = json.loads(_under_fsize_limit(tool(tool_name), args, ctx, 100_000))
    assert out["type"] == "resource_limit", out
    assert out["limit"] == "fsize_mb" and "fsize_mb" in out["message"], out
    assert (ws / "half.txt").read_text() == "a" * 70_000
    assert not (ws / "big.txt").exists()


@pytest.fixture
def small_walks(monkeypatch: pytest.MonkeyPatch) -> int:
    """The walk's bound on entries (200,000 in use) made small enough for a test tree."""
    from runtime import toolkit_fs

    monkeypatch.setattr(toolkit_fs, "WALK_MAX_ENTRIES", 50)
    return 50


def test_a_walk_cut_by_its_bound_says_truncated(
    tool: Load, ctx: ToolContext, ws: Path, small_walks: int
) -> None:
    """Past the walk's bound on entries, list_files and file_search stopped silently:
    file_search answered count 0, truncated false, for a file that was there."""
    (ws / "a").mkdir()
    for i in range(small_walks * 2):
        (ws / "a" / f"f{i:03d}").write_text("")
    (ws / "z.txt").write_text("")
    r = tool("file_search")({"pattern": "z.txt"}, ctx)
    assert r["count"] == 0 and r["truncated"] is True, r
    r = tool("list_files")({"recursive": True, "limit": 1000}, ctx)
    assert r["truncated"] is True and r["count"] <= small_walks + 1, r["count"]
    # Within the bound nothing changes.
    r = tool("file_search")({"pattern": "z.txt", "path": ".", "max_depth": 1}, ctx)
    assert r["count"] == 1 and r["truncated"] is False


def test_code_query_does_not_walk_the_folders_it_skips(
    tool: Load, ctx: ToolContext, ws: Path, small_walks: int
) -> None:
    """code_query says it skips node_modules, .git, build output: it walked them all and
    dropped their files afterwards, so a big node_modules (sorted before src/) used up the
    walk's bound and the project's own code was never searched, silently (and a 150k-file
    node_modules took seconds)."""
    (ws / "node_modules" / "pkg").mkdir(parents=True)
    for i in range(small_walks * 2):
        (ws / "node_modules" / "pkg" / f"m{i:03d}.js").write_text("function main() {}\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("def main():\n    pass\n")
    r = tool("code_query")({"query": "main"}, ctx)
    assert [m["file"] for m in r["matches"]] == ["src/app.py"], r
    assert r["truncated"] is False
    # Asked for by path, a skipped folder is searched.
    r = tool("code_query")({"query": "main", "path": "node_modules/pkg", "limit": 5}, ctx)
    assert r["matches"] and r["matches"][0]["file"].startswith("node_modules/pkg/"), r


@pytest.fixture
def far_times() -> Iterator[Path]:
    """A workspace with files dated past year 9999 and before year 1, on a file system that
    keeps such times (tmpfs keeps 64-bit seconds; ext4 clamps them to 1901-2446)."""
    import shutil
    import tempfile

    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    root = Path(tempfile.mkdtemp(prefix="rt-far-times-", dir="/dev/shm"))
    try:
        (root / "ok.txt").write_text("a")
        for name, when in (("future.txt", 2**40), ("past.txt", -(2**40))):
            (root / name).write_text("b")
            os.utime(root / name, (0, when))
            if os.stat(root / name).st_mtime != when:
                pytest.skip("this file system clamps timestamps")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_file_dated_past_year_9999_does_not_break_its_listing(
    tool: Load, far_times: Path
) -> None:
    """A modification time outside datetime's years 1-9999 (an archive's, or `touch -d`
    on tmpfs, XFS, Btrfs) made list_files and file_search of its whole directory, and
    get_file_info of it, fail with 'ValueError: year 36812 is out of range'. Such times
    are shown at the nearest end of RFC 3339's range."""
    ctx = ToolContext(workspace=far_times, limits=Limits(output_bytes=65536))
    r = tool("list_files")({}, ctx)
    dated = {f["name"]: f["modified"] for f in r["files"]}
    assert dated["future.txt"].startswith("9999-12-31T23:59:59")
    assert dated["past.txt"].startswith("0001-01-01T00:00:00")
    assert dated["ok.txt"][:4].isdigit() and dated["ok.txt"] < "9999"
    assert tool("file_search")({"pattern": "*.txt"}, ctx)["count"] == 3
    assert tool("get_file_info")({"path": "future.txt"}, ctx)["modified"].startswith("9999")
