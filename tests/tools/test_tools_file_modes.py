"""The file tools and a file's permission bits: write_file (overwrite and append) and
edit_file refuse a file the sandbox user may not write, as ``echo x > f`` does; move_file
and delete_file act on the folder's entries, as ``mv -f`` and ``rm -f`` do.

Root writes any file whatever its mode, so as root each body runs in a forked child that
has become an ordinary user (the sandbox runs tools as one)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.errors import ToolFailed
from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests._forked import in_a_forked_child
from tests.tools.helpers import Load

_NOBODY = 65534


def _as_a_user(ws: Path, body: Callable[[ToolContext], object]) -> object:
    """``body(ctx)`` (its tools loaded already: the interpreter's own files may be closed to
    that user) in a forked child running as an ordinary user who owns ``ws`` (as the
    sandbox user owns the workspace); its result, or ``{"reason": ...}`` of the ToolFailed
    it raised. The child enters ``ws`` first: pytest's temporary folders are closed to other
    users, so the workspace is named by the working directory it holds."""

    def child() -> str:
        os.chdir(ws)
        if os.geteuid() == 0:
            os.setgroups([])
            os.setgid(_NOBODY)
            os.setuid(_NOBODY)
        ctx = ToolContext(workspace=Path("."), limits=Limits(timeout_s=10, output_bytes=65536))
        try:
            out = body(ctx)
        except ToolFailed as exc:
            out = {"reason": exc.details.get("reason"), "message": exc.message}
        return json.dumps(out)

    if os.geteuid() == 0:
        for path in (ws, *ws.rglob("*")):
            os.chown(path, _NOBODY, _NOBODY, follow_symlinks=False)
    report = in_a_forked_child(child)
    try:
        return json.loads(report)
    except ValueError:
        raise AssertionError(report) from None


@pytest.mark.parametrize("mode", [0o444, 0o000])
@pytest.mark.parametrize(
    "args",
    [
        {"tool": "write_file", "content": "over\n"},
        {"tool": "write_file", "content": "more\n", "mode": "append"},
        {"tool": "edit_file", "old_string": "hello", "new_string": "bye"},
    ],
    ids=["overwrite", "append", "edit"],
)
def test_a_read_only_file_is_not_rewritten(
    tool: Load, ws: Path, mode: int, args: dict[str, str]
) -> None:
    """Hunt M2: the rename over the target needs only the folder's write permission, so a
    0444 or 0000 file was silently replaced by write_file and edit_file."""
    target = ws / "ro.txt"
    target.write_text("hello\n")
    target.chmod(mode)
    fn, rest = tool(args["tool"]), {k: v for k, v in args.items() if k != "tool"}
    out = _as_a_user(ws, lambda ctx: fn({"path": "ro.txt", **rest}, ctx))
    assert isinstance(out, dict) and out["reason"] == "permission", out
    assert "permission denied" in out["message"]
    target.chmod(0o644)
    assert target.read_text() == "hello\n"
    assert target.stat().st_mode & 0o777 == 0o644


def test_a_writable_file_in_the_same_folder_is_still_written(tool: Load, ws: Path) -> None:
    (ws / "rw.txt").write_text("hello\n")
    (ws / "rw.txt").chmod(0o644)

    write, edit = tool("write_file"), tool("edit_file")

    def body(ctx: ToolContext) -> object:
        write({"path": "rw.txt", "content": "hello there\n"}, ctx)
        write({"path": "new.txt", "content": "n"}, ctx)
        return edit({"path": "rw.txt", "old_string": "there", "new_string": "x"}, ctx)

    assert _as_a_user(ws, body) == {"path": "rw.txt", "replacements": 1}
    assert (ws / "rw.txt").read_text() == "hello x\n" and (ws / "new.txt").read_text() == "n"


def test_move_file_replaces_a_read_only_destination_as_mv_f_does(tool: Load, ws: Path) -> None:
    """rename(2) replaces a name in a folder, checked against the folder's permissions
    only, as unlink(2) (delete_file) is: ``mv -f src ro`` replaces a 0444 ``ro``, and the
    file's content is not written, it is let go. move_file with overwrite=true does the
    same; the file's mode guards its content, which write_file and edit_file change."""
    (ws / "src.txt").write_text("new\n")
    (ws / "ro.txt").write_text("old\n")
    (ws / "ro.txt").chmod(0o444)
    args = {"source": "src.txt", "destination": "ro.txt", "overwrite": True}
    move = tool("move_file")
    out = _as_a_user(ws, lambda ctx: move(args, ctx))
    assert out == {"source": "src.txt", "destination": "ro.txt", "moved": True}
    assert (ws / "ro.txt").read_text() == "new\n"
