"""The file tools, called as the fork-server would call them: ordinary use, edges, bad input."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ToolFailed
from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests._forked import in_a_forked_child
from tests.tools.helpers import Load
from tests.tools.helpers import fails as _fails

# ------------------------------------------------------------------------------- read_file


def test_read_file_ranges(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    read = tool("read_file")
    r = read({"path": "f.txt"}, ctx)
    assert r["lines"] == 10 and not r["truncated"] and r["size"] == (ws / "f.txt").stat().st_size
    r = read({"path": "f.txt", "offset": 3, "limit": 2}, ctx)
    assert r["content"] == "line 3\nline 4\n" and r["truncated"]
    r = read({"path": "/workspace/f.txt", "offset": 10}, ctx)
    assert r["content"] == "line 10\n" and not r["truncated"]
    r = read({"path": "f.txt", "offset": 50}, ctx)
    assert r["content"] == "" and r["lines"] == 0


def test_read_file_output_cap(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "big.txt").write_text("x" * 100 + "\n" + "y" * 100 + "\n")
    # The cap bounds the whole result (its JSON), not the content alone: 150 bytes could
    # not hold even the first line's result, which the sandbox then refused. (450: the
    # result's byte_offset and next_byte_offset take room too.)
    small = ToolContext(workspace=ws, limits=Limits(output_bytes=450))
    r = tool("read_file")({"path": "big.txt"}, small)
    assert r["content"] == "x" * 100 + "\n" and r["truncated"]


def test_read_file_binary(tool: Load, ctx: ToolContext, ws: Path) -> None:
    blob = bytes(range(256))
    (ws / "b.bin").write_bytes(blob)
    err = _fails(tool("read_file"), {"path": "b.bin"}, ctx, "binary")
    assert "base64" in err.message
    r = tool("read_file")({"path": "b.bin", "encoding": "base64"}, ctx)
    assert base64.b64decode(r["content"]) == blob and not r["truncated"]
    (ws / "latin.txt").write_bytes("café".encode("latin-1"))
    _fails(tool("read_file"), {"path": "latin.txt"}, ctx, "binary")


def test_read_file_cut_multibyte_at_cap(tool: Load, ws: Path) -> None:
    (ws / "u.txt").write_text("é" * 100)  # one line of 200 bytes
    # The cap bounds the whole result's JSON (it used to bound the content alone, which
    # 51 bytes did): an odd and an even room, so one of them cuts inside a character.
    for cap in (400, 401):  # the room a result's other fields leave, plus 89 or 90
        small = ToolContext(workspace=ws, limits=Limits(output_bytes=cap))
        r = tool("read_file")({"path": "u.txt"}, small)
        assert r["content"] and r["content"] == "é" * len(r["content"]) and r["truncated"]
        assert _result_size(r) <= cap


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("missing.txt", "not_found"),
        ("d", "is_directory"),
        ("../etc/passwd", "parent_ref"),
        ("/etc/passwd", "absolute"),
        (".", "root"),
        (".runtime/x", "runtime_state"),
    ],
)
def test_read_file_bad_paths(
    tool: Load, ctx: ToolContext, ws: Path, path: str, reason: str
) -> None:
    (ws / "d").mkdir()
    _fails(tool("read_file"), {"path": path}, ctx, reason)


# ------------------------------------------------------------------------------- write_file


def test_write_file_create_overwrite_append(tool: Load, ctx: ToolContext, ws: Path) -> None:
    write = tool("write_file")
    r = write({"path": "deep/new/f.txt", "content": "héllo"}, ctx)
    assert r == {"path": "deep/new/f.txt", "bytes_written": 6, "mode": "overwrite", "created": True}
    write({"path": "deep/new/f.txt", "content": " world", "mode": "append"}, ctx)
    assert (ws / "deep/new/f.txt").read_text() == "héllo world"
    r = write({"path": "deep/new/f.txt", "content": "x"}, ctx)
    assert not r["created"] and (ws / "deep/new/f.txt").read_text() == "x"
    write({"path": "fresh.log", "content": "a", "mode": "append"}, ctx)
    assert (ws / "fresh.log").read_text() == "a"


def _race(worker: Callable[[str], None], tags: str = "ab") -> None:
    """Run ``worker(tag)`` for each tag in its own thread, all at once; re-raise the first
    error."""
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(len(tags))

    def run(tag: str) -> None:
        try:
            start.wait()
            worker(tag)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in tags]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_concurrent_appends_lose_no_line(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """Red team Q4: two appends at once each copied the file, added a line and renamed the
    copy over it, and the second rename dropped the first's line; both said done. Each
    thread has its own Workspace (its own descriptor of the folder), as each sandboxed call
    has its own process."""
    write = tool("write_file")
    (ws / "log.txt").write_text("")
    done: list[str] = []

    def worker(tag: str) -> None:
        for i in range(60):
            write({"path": "log.txt", "content": f"{tag}{i}\n", "mode": "append"}, ctx)
            done.append(f"{tag}{i}")

    _race(worker, "abc")
    lines = (ws / "log.txt").read_text().split()
    assert sorted(lines) == sorted(done) and len(done) == 180
    assert sorted(p.name for p in ws.iterdir()) == ["log.txt"]


def test_concurrent_edits_lose_no_edit(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """Red team Q4: edit_file is read, replace, rewrite; two at once on one file (each
    replacing its own token) dropped one another's edits."""
    edit = tool("edit_file")
    (ws / "e.txt").write_text("".join(f"<a{i}> <b{i}> <c{i}>\n" for i in range(40)))

    def worker(tag: str) -> None:
        for i in range(40):
            args = {"path": "e.txt", "old_string": f"<{tag}{i}>", "new_string": f"<{tag}{i}!>"}
            assert edit(args, ctx) == {"path": "e.txt", "replacements": 1}

    _race(worker, "abc")
    text = (ws / "e.txt").read_text()
    assert text == "".join(f"<a{i}!> <b{i}!> <c{i}!>\n" for i in range(40))


def test_append_and_edit_retry_after_an_unlocked_writer(
    tool: Load, ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that takes no lock (a shell's ``>>``) changing the file between the tool's
    read and its rename makes that attempt write nothing (``changed``); the tool reads the
    file again and retries, so neither write is lost. One that never stops changing it
    leaves the call failed ``changed``, the file as that writer left it."""
    from runtime import toolkit_fs

    real = toolkit_fs.Workspace.atomic_write
    meddle = {"left": 1}

    def meddling(self: toolkit_fs.Workspace, parts: tuple[str, ...], chunks: Any, **kw: Any) -> int:
        def interfered() -> Any:
            if meddle["left"]:
                meddle["left"] -= 1
                with open(ws / "f.txt", "a") as f:
                    f.write("shell\n")
            yield from chunks

        return real(self, parts, interfered(), **kw)

    monkeypatch.setattr(toolkit_fs.Workspace, "atomic_write", meddling)
    (ws / "f.txt").write_text("x = 1\n")
    r = tool("write_file")({"path": "f.txt", "content": "tool\n", "mode": "append"}, ctx)
    assert r["bytes_written"] == 5
    assert (ws / "f.txt").read_text() == "x = 1\nshell\ntool\n"
    meddle["left"] = 1
    r = tool("edit_file")({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 2"}, ctx)
    assert r["replacements"] == 1
    assert (ws / "f.txt").read_text() == "x = 2\nshell\ntool\nshell\n"
    meddle["left"] = 100
    _fails(tool("write_file"), {"path": "f.txt", "content": "t", "mode": "append"}, ctx, "changed")
    assert (ws / "f.txt").read_text() == "x = 2\nshell\ntool\nshell\n" + "shell\n" * 5


def test_write_file_base64(tool: Load, ctx: ToolContext, ws: Path) -> None:
    blob = os.urandom(1000)
    r = tool("write_file")(
        {"path": "b.bin", "content": base64.b64encode(blob).decode(), "encoding": "base64"}, ctx
    )
    assert r["bytes_written"] == 1000 and (ws / "b.bin").read_bytes() == blob
    _fails(
        tool("write_file"),
        {"path": "c.bin", "content": "not base64!", "encoding": "base64"},
        ctx,
        "bad_base64",
    )
    assert not (ws / "c.bin").exists()


def test_write_file_refusals(tool: Load, ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "d").mkdir()
    (ws / "file").write_text("f")
    write = tool("write_file")
    _fails(write, {"path": "d", "content": "x"}, ctx, "is_directory")
    _fails(write, {"path": "file/child", "content": "x"}, ctx, "not_a_directory")
    _fails(write, {"path": ".runtime/state.db", "content": "x"}, ctx, "runtime_state")
    (ws / "esc").symlink_to(outside)
    _fails(write, {"path": "esc/new.txt", "content": "x"}, ctx, "escape")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_write_file_fault_keeps_original(
    tool: Load, ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "keep.txt").write_text("original")
    from runtime import toolkit_fs

    def boom(*a: object, **k: object) -> None:
        raise OSError(5, "EIO")

    monkeypatch.setattr(toolkit_fs.os, "fsync", boom)
    with pytest.raises(ToolFailed):
        tool("write_file")({"path": "keep.txt", "content": "new", "mode": "append"}, ctx)
    monkeypatch.undo()
    assert (ws / "keep.txt").read_text() == "original"
    assert [p.name for p in ws.iterdir()] == ["keep.txt"]


# ------------------------------------------------------------------------------- edit_file


def test_edit_file(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\nb = 1\nc = 2\n")
    edit = tool("edit_file")
    assert edit({"path": "m.py", "old_string": "c = 2", "new_string": "c = 3"}, ctx) == {
        "path": "m.py",
        "replacements": 1,
    }
    err = _fails(
        edit, {"path": "m.py", "old_string": "= 1", "new_string": "= 9"}, ctx, "not_unique"
    )
    assert err.details["occurrences"] == 2 and "2 times" in err.message
    assert (ws / "m.py").read_text() == "a = 1\nb = 1\nc = 3\n"  # nothing changed
    r = edit({"path": "m.py", "old_string": "= 1", "new_string": "= 9", "replace_all": True}, ctx)
    assert r["replacements"] == 2 and (ws / "m.py").read_text() == "a = 9\nb = 9\nc = 3\n"
    err = _fails(edit, {"path": "m.py", "old_string": "zzz", "new_string": "y"}, ctx, "not_found")
    assert err.details["occurrences"] == 0
    _fails(edit, {"path": "m.py", "old_string": "a", "new_string": "a"}, ctx, "no_change")
    _fails(edit, {"path": "nope.py", "old_string": "a", "new_string": "b"}, ctx, "not_found")
    (ws / "bin").write_bytes(b"\xff\xfe")
    _fails(edit, {"path": "bin", "old_string": "a", "new_string": "b"}, ctx, "binary")


def test_edit_keeps_mode(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "run.sh").write_text("echo a\n")
    os.chmod(ws / "run.sh", 0o755)
    tool("edit_file")({"path": "run.sh", "old_string": "a", "new_string": "b"}, ctx)
    assert (ws / "run.sh").stat().st_mode & 0o777 == 0o755


# ------------------------------------------------------------------------------- list/search


def _tree(ws: Path) -> None:
    (ws / "src" / "pkg").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("a")
    (ws / "src" / "pkg" / "b.py").write_text("bb")
    (ws / "README.md").write_text("r")
    (ws / "src" / "loop").symlink_to("..")
    (ws / ".runtime").mkdir()


def test_list_files(tool: Load, ctx: ToolContext, ws: Path) -> None:
    _tree(ws)
    ls = tool("list_files")
    r = ls({}, ctx)
    assert [f["name"] for f in r["files"]] == ["README.md", "src"] and not r["truncated"]
    assert {"name", "path", "type", "size", "modified"} <= set(r["files"][0])
    r = ls({"path": "src", "recursive": True}, ctx)
    assert [f["path"] for f in r["files"]] == ["src/a.py", "src/loop", "src/pkg", "src/pkg/b.py"]
    assert r["files"][1]["type"] == "symlink"
    r = ls({"recursive": True, "pattern": "*.py"}, ctx)
    assert [f["path"] for f in r["files"]] == ["src/a.py", "src/pkg/b.py"]
    r = ls({"recursive": True, "pattern": "src/pkg/*"}, ctx)
    assert [f["path"] for f in r["files"]] == ["src/pkg/b.py"]
    r = ls({"recursive": True, "limit": 2}, ctx)
    assert len(r["files"]) == 2 and r["truncated"]
    _fails(ls, {"path": "README.md"}, ctx, "not_a_directory")
    _fails(ls, {"path": "nope"}, ctx, "not_found")


def test_file_search(tool: Load, ctx: ToolContext, ws: Path) -> None:
    _tree(ws)
    search = tool("file_search")
    r = search({"pattern": "*.py"}, ctx)
    assert [m["path"] for m in r["matches"]] == ["src/a.py", "src/pkg/b.py"]
    assert search({"pattern": "*", "type": "dir"}, ctx)["matches"][0]["path"] == "src"
    assert [m["path"] for m in search({"pattern": "*.py", "max_depth": 2}, ctx)["matches"]] == [
        "src/a.py"
    ]
    assert search({"pattern": "*.py", "path": "src/pkg"}, ctx)["count"] == 1
    for i in range(30):
        (ws / f"n{i}.txt").write_text("")
    r = search({"pattern": "n*.txt"}, ctx)
    assert r["count"] == 20 and r["truncated"]


# ------------------------------------------------------------------------------- delete/move


def test_delete_file(tool: Load, ctx: ToolContext, ws: Path, outside: Path) -> None:
    _tree(ws)
    rm = tool("delete_file")
    assert rm({"path": "README.md"}, ctx)["deleted"]
    _fails(rm, {"path": "src"}, ctx, "is_directory")
    for root in (".", "", "/workspace", "./"):
        _fails(rm, {"path": root}, ctx, "root")
    _fails(rm, {"path": ".runtime"}, ctx, "runtime_state")
    _fails(rm, {"path": "gone"}, ctx, "not_found")
    (ws / "src" / "out").symlink_to(outside)
    assert rm({"path": "src/out"}, ctx)["type"] == "symlink"
    assert rm({"path": "src", "recursive": True}, ctx)["type"] == "directory"
    assert not (ws / "src").exists() and (outside / "secret.txt").exists()


def test_move_file(tool: Load, ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "a.txt").write_text("A")
    (ws / "b.txt").write_text("B")
    mv = tool("move_file")
    _fails(mv, {"source": "a.txt", "destination": "b.txt"}, ctx, "exists")
    assert (ws / "b.txt").read_text() == "B"
    assert mv({"source": "a.txt", "destination": "sub/dir/c.txt"}, ctx)["moved"]
    assert (ws / "sub/dir/c.txt").read_text() == "A"
    mv({"source": "sub/dir/c.txt", "destination": "b.txt", "overwrite": True}, ctx)
    assert (ws / "b.txt").read_text() == "A"
    _fails(mv, {"source": "missing", "destination": "x"}, ctx, "not_found")
    _fails(mv, {"source": "sub", "destination": "sub/inner"}, ctx, "into_itself")
    _fails(mv, {"source": "b.txt", "destination": "/tmp/x"}, ctx, "absolute")
    _fails(mv, {"source": "b.txt", "destination": ".runtime/x"}, ctx, "runtime_state")
    (ws / "o").symlink_to(outside)
    _fails(mv, {"source": "o/secret.txt", "destination": "stolen"}, ctx, "escape")
    _fails(mv, {"source": "b.txt", "destination": "o/planted"}, ctx, "escape")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


# ------------------------------------------------------------------------------- info


def test_get_file_info(tool: Load, ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "f").write_text("abc")
    os.chmod(ws / "f", 0o640)
    info = tool("get_file_info")
    r = info({"path": "f"}, ctx)
    assert r["exists"] and r["type"] == "file" and r["size"] == 3 and r["mode"] == "0640"
    assert info({"path": "nope"}, ctx) == {
        "path": "nope",
        "exists": False,
        "type": None,
        "size": None,
        "modified": None,
        "mode": None,
    }
    assert info({"path": "nope/deeper"}, ctx)["exists"] is False
    assert info({"path": "."}, ctx)["type"] == "directory"
    (ws / "l").symlink_to(outside / "secret.txt")
    r = info({"path": "l"}, ctx)
    assert r["type"] == "symlink" and r["target"] == str(outside / "secret.txt")
    (ws / "o").symlink_to(outside)
    _fails(info, {"path": "o/secret.txt"}, ctx, "escape")


def test_get_file_info_below_a_file_does_not_exist(tool: Load, ctx: ToolContext, ws: Path) -> None:
    """A path below a regular file (ENOTDIR on a component) is missing, as one below a
    missing folder is: "a missing path is not an error: exists=false". It was a tool error
    (not_a_directory), so the caller had to tell the two apart."""
    (ws / "a.txt").write_text("hi")
    (ws / "alink").symlink_to("a.txt")
    info = tool("get_file_info")
    for path in ("a.txt/x", "a.txt/x/y", "alink/x"):
        r = info({"path": path}, ctx)
        assert r["exists"] is False and r["path"] == path and r["type"] is None


def test_list_files_respects_output_budget(tool: Load, ws: Path) -> None:
    for i in range(200):
        (ws / f"{'n' * 100}{i:03d}").write_text("")
    small = ToolContext(workspace=ws, limits=Limits(output_bytes=10_000))
    r = tool("list_files")({}, small)
    assert r["truncated"] and 0 < len(r["files"]) < 200


def test_setuid_bits_dropped_on_rewrite(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "s").write_text("x")
    os.chmod(ws / "s", 0o4755)
    tool("write_file")({"path": "s", "content": "y"}, ctx)
    assert (ws / "s").stat().st_mode & 0o7777 == 0o755


# ------------------------------------------------------------------------------- warm-ups


@pytest.mark.parametrize(
    ("name", "expect"),
    [
        ("read_file", lambda r: r["content"] == "one\ntwo\n" and r["lines"] == 2),
        ("list_files", lambda r: [e["name"] for e in r["files"]] == ["sample.txt"]),
        ("get_file_info", lambda r: r["type"] == "file" and r["size"] == 8),
    ],
)
def test_the_warm_ups_run_the_whole_tool_successfully(
    tool: Load, tmp_path: Path, name: str, expect: Callable[[dict[str, Any]], bool]
) -> None:
    # A warm-up that failed early would warm only the first lines of the tool: each runs
    # the tool to a real result on its scratch workspace (a spare's /tmp in the sandbox).
    from runtime.toolkit import warm_up

    func = tool(name)
    prepare = warm_up(func)
    assert prepare is not None
    result = func(prepare(tmp_path), ToolContext(workspace=tmp_path, limits=Limits()))
    assert expect(result), result


# ------------------------------------------------------------------------- undecodable names


def _json_safe(result: dict[str, Any]) -> None:
    # The child sends results as msgpack/JSON text: a lone surrogate (how Python spells a
    # name's non-UTF-8 bytes) cannot be encoded, and the whole call failed with it.
    json.dumps(result, ensure_ascii=False).encode("utf-8")


def test_non_utf8_names_do_not_break_listings(tool: Load, ctx: ToolContext, ws: Path) -> None:
    (ws / "ok.txt").write_text("def ok():\n    pass\n")
    sub = os.fsencode(ws) + b"/sub\xff"
    os.mkdir(sub)
    with open(sub + b"/bad\xfe.py", "w") as f:
        f.write("def bad():\n    pass\n")
    os.symlink(b"target\xfd", os.fsencode(ws) + b"/link")
    r = tool("list_files")({"recursive": True}, ctx)
    _json_safe(r)
    assert {e["path"] for e in r["files"]} == {"ok.txt", "sub\\xff", "sub\\xff/bad\\xfe.py", "link"}
    r = tool("file_search")({"pattern": "*.py"}, ctx)
    _json_safe(r)
    assert [m["path"] for m in r["matches"]] == ["sub\\xff/bad\\xfe.py"]
    r = tool("code_query")({"query": "bad"}, ctx)
    _json_safe(r)
    assert {(m["file"], m["kind"]) for m in r["matches"]} >= {("sub\\xff/bad\\xfe.py", "function")}
    r = tool("get_file_info")({"path": "link"}, ctx)
    _json_safe(r)
    assert r["target"] == "target\\xfd"


def _result_size(result: dict[str, Any]) -> int:
    """The size the output cap applies to: the result as (canonical, compact) JSON."""
    return len(json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


@pytest.mark.parametrize(
    ("data", "encoding"),
    [
        (b"a" * 10_000, "utf-8"),  # one long line
        (b"line\n" * 5_000, "utf-8"),  # a newline takes two bytes of JSON
        (b'"\\' * 5_000, "utf-8"),  # so do quotes and backslashes
        (b"\x01\t" * 5_000, "utf-8"),  # a control byte takes six
        ("é€".encode() * 2_000, "utf-8"),
        (bytes(range(256)) * 40, "base64"),
    ],
)
def test_read_file_result_fits_the_cap(tool: Load, ws: Path, data: bytes, encoding: str) -> None:
    """A file larger than the output cap is read truncated (truncated=true), as documented:
    before, the content alone was cut at the cap and the result around it overflowed, so
    the call failed with output_too_large."""
    (ws / "f").write_bytes(data)
    cap = 4096
    small = ToolContext(workspace=ws, limits=Limits(output_bytes=cap))
    r = tool("read_file")({"path": "f", "encoding": encoding}, small)
    assert r["truncated"] and _result_size(r) <= cap
    assert _result_size(r) > cap // 2  # the room is used
    got = base64.b64decode(r["content"]) if encoding == "base64" else r["content"].encode()
    assert data.startswith(got)
    if encoding == "utf-8" and b"\n" in data:
        assert got.endswith(b"\n") and r["lines"] == got.count(b"\n")


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("file_search", {"pattern": "*.txt", "limit": 100}),
        ("list_files", {"recursive": True}),
        ("list_files", {"path": "ctl"}),
        ("file_search", {"path": "ctl", "limit": 100}),
    ],
)
def test_listing_results_fit_the_cap(tool: Load, ws: Path, name: str, args: dict[str, Any]) -> None:
    """Listings stop (truncated=true) before their result outgrows the output cap: file_search
    had no byte budget at all (100 deep paths overflowed it), and list_files counted a name's
    characters, not its JSON (a control character takes 6 bytes), so both failed the call
    with output_too_large instead."""
    deep = ws.joinpath(*[f"directory_level_{i:02d}" for i in range(20)])
    deep.mkdir(parents=True)
    for i in range(60):
        (deep / f"file_{i:03d}.txt").write_text("x")
    (ws / "ctl").mkdir()
    for i in range(60):
        (ws / "ctl" / (f"{i:02d}" + "\x01" * 200)).write_text("x")
    cap = 16384
    small = ToolContext(workspace=ws, limits=Limits(output_bytes=cap))
    r = tool(name)(args, small)
    entries = r["files" if name == "list_files" else "matches"]
    assert r["truncated"] and entries and _result_size(r) <= cap


@pytest.mark.parametrize("name", ["list_files", "file_search"])
def test_listing_a_file_says_it_is_not_a_directory(
    tool: Load, ctx: ToolContext, ws: Path, name: str
) -> None:
    """Listing a regular file said "a parent of directory 'notes.txt' is not a directory",
    sending the caller to look for a problem in the parents."""
    (ws / "notes.txt").write_text("x")
    args: dict[str, Any] = {"path": "notes.txt"}
    if name == "file_search":
        args["pattern"] = "*"
    err = _fails(tool(name), args, ctx, "not_a_directory")
    assert "parent" not in err.message and "'notes.txt' is a file, not a directory" in err.message
    err = _fails(tool(name), {**args, "path": "notes.txt/sub"}, ctx, "not_a_directory")
    assert "'notes.txt' is a file, not a directory" in err.message  # the culprit, named


def _glob_tree(ws: Path) -> None:
    for rel in ("src/a.py", "src/sub/deep.py", "src/sub/x/deeper.py", "top.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x\n")


_GLOBS = [
    ("src/*.py", ["src/a.py"]),
    ("*/*.py", ["src/a.py"]),
    ("src/?.py", ["src/a.py"]),
    ("src/**/*.py", ["src/a.py", "src/sub/deep.py", "src/sub/x/deeper.py"]),
    ("**/*.py", ["src/a.py", "src/sub/deep.py", "src/sub/x/deeper.py", "top.py"]),
    # '**' is zero or more names, so 'src/**' covers src itself (as the policy's '.git/**').
    (
        "src/**",
        ["src", "src/a.py", "src/sub", "src/sub/deep.py", "src/sub/x", "src/sub/x/deeper.py"],
    ),
    ("src/s[a-z]b/*.py", ["src/sub/deep.py"]),
    ("*.py", ["src/a.py", "src/sub/deep.py", "src/sub/x/deeper.py", "top.py"]),  # names
    ("SRC/*.py", []),  # case-sensitive, as documented
]


@pytest.mark.parametrize(("pattern", "expected"), _GLOBS)
@pytest.mark.parametrize("name", ["list_files", "file_search"])
def test_path_globs_match_one_segment_per_star(
    tool: Load, ctx: ToolContext, ws: Path, name: str, pattern: str, expected: list[str]
) -> None:
    """A pattern with '/' is the project's path glob (runtime._globs): '*' and '?' stay
    within one name, '**' is zero or more folders. fnmatch on the whole path let 'src/*.py'
    match src/sub/x/deeper.py, and 'src/**/*.py' miss src/a.py."""
    _glob_tree(ws)
    if name == "list_files":
        r = tool(name)({"pattern": pattern, "recursive": True}, ctx)
        got = [f["path"] for f in r["files"]]
    else:
        r = tool(name)({"pattern": pattern, "limit": 100}, ctx)
        got = [m["path"] for m in r["matches"]]
    assert got == expected


def test_path_globs_are_relative_to_the_listed_folder(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    _glob_tree(ws)
    r = tool("file_search")({"pattern": "sub/*.py", "path": "src"}, ctx)
    assert [m["path"] for m in r["matches"]] == ["src/sub/deep.py"]
    r = tool("list_files")({"pattern": "*/*.py", "path": "src", "recursive": True}, ctx)
    assert [f["path"] for f in r["files"]] == ["src/sub/deep.py"]


def _deep_tree(ws: Path, levels: int) -> str:
    """``levels`` folders ``a`` nested (made by descriptor: the path is long), a file in the
    deepest; its workspace-relative path."""
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir("a", dir_fd=fd)
        nxt = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open("leaf_target.txt", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd))
    os.close(fd)
    return "/".join(["a"] * levels + ["leaf_target.txt"])


def test_walks_of_a_tree_deeper_than_the_descriptor_limit(tool: Load, ws: Path) -> None:
    """A walk held one descriptor per level: a tree 250 levels deep (the sandbox accepts
    256) against the sandbox's 256 open files failed file_search, list_files and code_query
    with an unclassified OSError EMFILE. Here 64 descriptors are left free, the tree is 250
    deep."""
    leaf = _deep_tree(ws, 250)
    ctx = ToolContext(workspace=ws, limits=Limits(output_bytes=1 << 20))  # 251 long paths

    def body() -> str:
        import resource

        # 64 above the highest descriptor this child inherited (a test worker has opened
        # many: a flat limit of 64 failed in the full suite, not alone).
        free = max(int(fd) for fd in os.listdir("/proc/self/fd")) + 1 + 64
        resource.setrlimit(resource.RLIMIT_NOFILE, (free, free))
        r = tool("file_search")({"pattern": "leaf_target.txt"}, ctx)
        got = [[m["path"] for m in r["matches"]], r["truncated"]]
        r = tool("list_files")({"recursive": True, "limit": 10000}, ctx)
        got.append([r["count"], r["files"][-1]["path"], r["truncated"]])
        r = tool("code_query")({"query": "leaf_target", "type": "file"}, ctx)
        got.append([[m["file"] for m in r["matches"]], r["truncated"]])
        return json.dumps(got)

    report = in_a_forked_child(body, timeout_s=60)
    assert report == json.dumps([[leaf], False, [251, leaf, False], [[leaf], False]])
