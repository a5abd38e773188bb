"""A file name that is not UTF-8 (any byte string is a valid Linux name) must not break the
listing of its directory. Before, ``list_files``, ``file_search`` and ``code_query`` of a
directory holding one returned ``tool_error: result is not serialisable:
UnicodeEncodeError``: one odd name (made by a tool, an archive, an attacker) hid every file.
Such a name is shown with its bad bytes as ``\\xNN`` escapes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runtime.toolkit import ToolContext

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]

BAD = b"bad\xffname.txt"


def _encodable(result: dict[str, Any]) -> None:
    json.dumps(result, ensure_ascii=False).encode("utf-8")  # what the child's frame does


def test_list_files_with_a_non_utf8_name(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "ok.txt").write_text("x")
    os.mkdir(os.path.join(os.fsencode(ws), b"dir\xfe"))
    with open(os.path.join(os.fsencode(ws), b"dir\xfe", BAD), "wb") as fh:
        fh.write(b"y")
    r = tool("list_files")({"path": ".", "recursive": True}, ctx)
    _encodable(r)
    assert [f["path"] for f in r["files"]] == [
        "dir\\xfe",
        "dir\\xfe/bad\\xffname.txt",
        "ok.txt",
    ]
    assert r["files"][1]["name"] == "bad\\xffname.txt"


def test_file_search_with_a_non_utf8_name(tool: Load, ctx: ToolContext, ws: Path) -> None:
    with open(os.path.join(os.fsencode(ws), BAD), "wb") as fh:
        fh.write(b"y")
    (ws / "good.txt").write_text("x")
    r = tool("file_search")({"pattern": "*.txt"}, ctx)
    _encodable(r)
    assert sorted(m["name"] for m in r["matches"]) == ["bad\\xffname.txt", "good.txt"]


def test_code_query_with_a_non_utf8_name(tool: Load, ctx: ToolContext, ws: Path) -> None:
    with open(os.path.join(os.fsencode(ws), b"m\xff.py"), "wb") as fh:
        fh.write(b"def handler():\n    return 1\n")
    r = tool("code_query")({"query": "handler"}, ctx)
    _encodable(r)
    assert [(m["file"], m["name"]) for m in r["matches"]] == [("m\\xff.py", "handler")]


def test_get_file_info_of_a_symlink_to_a_non_utf8_target(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    os.symlink(b"t\xff", os.path.join(os.fsencode(ws), b"link"))
    r = tool("get_file_info")({"path": "link"}, ctx)
    _encodable(r)
    assert r["target"] == "t\\xff"
