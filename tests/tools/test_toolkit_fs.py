"""runtime.toolkit_fs: containment, symlink escapes, atomic writes, bounded reads, walking.

Every escape test runs twice: with openat2 and with the O_NOFOLLOW walk that replaces it
when the kernel (or a seccomp filter) answers ENOSYS."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import _fsio, toolkit_fs
from runtime.errors import ToolFailed
from runtime.toolkit_fs import Workspace, read_bytes, read_lines


@pytest.fixture(params=["openat2", "walk"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(_fsio._openat2_state, "works", request.param == "openat2")
    return str(request.param)


def _reason(exc: pytest.ExceptionInfo[ToolFailed]) -> str:
    return str(exc.value.details["reason"])


# ------------------------------------------------------------------------------- parts


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../x", "parent_ref"),
        ("a/../../x", "parent_ref"),
        ("a/..", "parent_ref"),
        ("/etc/passwd", "absolute"),
        ("/workspaceX/a", "absolute"),
        ("a\0b", "control_char"),
        ("a\nb", "control_char"),
        ("a\x7fb", "control_char"),
        ("a\ud800b", "bad_encoding"),
        ("\udcff", "bad_encoding"),
        (".runtime/audit.db", "runtime_state"),
        ("./.runtime", "runtime_state"),
    ],
)
def test_parts_refused(ws: Path, path: str, reason: str) -> None:
    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.parts(path)
    assert _reason(exc) == reason


def test_a_parent_ref_inside_the_workspace_is_refused_for_what_it_is(ws: Path) -> None:
    """``sub/../a`` stays inside the workspace: the refusal says that '..' itself is what
    the tools refuse, and why, not that the path leaves the workspace (it said so)."""
    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.parts("sub/../afile")
    assert _reason(exc) == "parent_ref"
    assert "must stay inside" not in exc.value.message
    assert "refuse even inside the workspace" in exc.value.message


@pytest.mark.parametrize(
    ("path", "parts"),
    [
        ("a/b", ("a", "b")),
        ("./a//b/", ("a", "b")),
        ("/workspace", ()),
        ("/workspace/a", ("a",)),
        (".", ()),
        ("", ()),
        ("%2e%2e%2f", ("%2e%2e%2f",)),  # a legal, odd name
        ("..foo", ("..foo",)),
        ("a\\..\\b", ("a\\..\\b",)),  # backslash is an ordinary byte on Linux
        ("\uff0e\uff0e/x", ("\uff0e\uff0e", "x")),  # fullwidth dots are a name, not '..'
    ],
)
def test_parts_accepted(ws: Path, path: str, parts: tuple[str, ...]) -> None:
    with Workspace(ws) as w:
        assert w.parts(path) == parts


def test_own_absolute_root_accepted(ws: Path) -> None:
    with Workspace(ws) as w:
        assert w.parts(f"{ws}/x/y") == ("x", "y")
        with pytest.raises(ToolFailed):
            w.parts(f"{ws}-evil/x")  # the prefix-sibling bug (CVE-2025-53110)


def test_root_refused_when_asked(ws: Path) -> None:
    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.parts(".", allow_root=False)
    assert _reason(exc) == "root"


def test_fd_closed_sets_minus_one(ws: Path) -> None:
    w = Workspace(ws)
    w.close()
    assert w.fd == -1
    w.close()  # idempotent


# ------------------------------------------------------------------------------- symlinks


def _read(ws: Path, rel: str) -> bytes:
    with Workspace(ws) as w:
        fd, _ = w.open_file(w.parts(rel))
        with fd:
            return read_bytes(fd.fd, 1 << 20)[0]


def test_symlink_file_escape(mode: str, ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "link")
    assert _reason(exc) == "escape"


def test_symlink_relative_escape(mode: str, ws: Path, outside: Path) -> None:
    (ws / "link").symlink_to("../outside/secret.txt")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "link")
    assert _reason(exc) == "escape"


def test_symlink_dir_escape(mode: str, ws: Path, outside: Path) -> None:
    (ws / "d").symlink_to(outside)
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "d/secret.txt")
    assert _reason(exc) == "escape"


def test_symlink_chain_escape(mode: str, ws: Path, outside: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "a").symlink_to("sub/b")
    (ws / "sub" / "b").symlink_to("../c")
    (ws / "c").symlink_to("../outside/secret.txt")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "a")
    assert _reason(exc) == "escape"


def test_symlink_chain_inside_is_followed(mode: str, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "real.txt").write_text("ok")
    (ws / "a").symlink_to("sub/b")
    (ws / "sub" / "b").symlink_to("../c")
    (ws / "c").symlink_to("sub/real.txt")
    assert _read(ws, "a") == b"ok"


def test_symlink_loop(mode: str, ws: Path) -> None:
    (ws / "x").symlink_to("y")
    (ws / "y").symlink_to("x")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "x")
    assert _reason(exc) == "symlink"


def test_magic_link_refused(mode: str, ws: Path) -> None:
    (ws / "me").symlink_to("/proc/self/root/etc/passwd")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "me")
    assert _reason(exc) == "escape"


def test_write_through_parent_symlink_stays_inside(mode: str, ws: Path, outside: Path) -> None:
    (ws / "p").symlink_to(outside)
    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(w.parts("p/new.txt"), iter([b"pwn"]))
    assert _reason(exc) == "escape"
    assert not (outside / "new.txt").exists()


def test_write_to_dangling_symlink_refused(mode: str, ws: Path, outside: Path) -> None:
    (ws / "dangle").symlink_to(outside / "created.txt")
    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(w.parts("dangle"), iter([b"pwn"]))
    assert _reason(exc) == "is_symlink"
    assert not (outside / "created.txt").exists()
    (outside / "created.txt").write_text("now it exists")
    with pytest.raises(ToolFailed):
        _read(ws, "dangle")  # dangling, then created: still outside, still refused


def test_symlinked_dir_inside_is_usable(mode: str, ws: Path) -> None:
    (ws / "real").mkdir()
    (ws / "alias").symlink_to("real")
    with Workspace(ws) as w:
        w.atomic_write(w.parts("alias/f.txt"), iter([b"x"]))
    assert (ws / "real" / "f.txt").read_bytes() == b"x"


def test_fifo_and_device_refused(mode: str, ws: Path) -> None:
    os.mkfifo(ws / "fifo")
    (ws / "zero").symlink_to("/dev/zero")
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "fifo")  # must not block on open
    assert _reason(exc) == "is_other"
    with pytest.raises(ToolFailed):
        _read(ws, "zero")


def test_hardlinked_write_does_not_change_outside(ws: Path, outside: Path) -> None:
    try:
        os.link(outside / "secret.txt", ws / "hl")
    except OSError as exc:  # pragma: no cover - filesystems without hard links
        pytest.skip(f"no hard links here: {exc}")
    with Workspace(ws) as w:
        w.atomic_write(w.parts("hl"), iter([b"changed"]))
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert (ws / "hl").read_bytes() == b"changed"


# ------------------------------------------------------------------------------- property


def _tree(ws: Path, outside: Path) -> set[tuple[int, int]]:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "f.txt").write_text("f")
    (ws / "a" / "b" / "g.txt").write_text("g")
    (ws / "up").symlink_to("..")
    (ws / "a" / "upup").symlink_to("../..")
    (ws / "out").symlink_to(outside)
    (ws / "abs").symlink_to("/etc")
    (ws / "a" / "in").symlink_to("b")
    (ws / "loop").symlink_to("loop")
    inodes = set()
    for dirpath, dirnames, filenames in os.walk(ws):
        for name in [*dirnames, *filenames, "."]:
            st_ = os.stat(os.path.join(dirpath, name), follow_symlinks=False)
            inodes.add((st_.st_dev, st_.st_ino))
    return inodes


_COMPONENTS = st.one_of(
    st.sampled_from(
        [
            "a",
            "b",
            "f.txt",
            "g.txt",
            "up",
            "upup",
            "out",
            "abs",
            "in",
            "loop",
            ".",
            "..",
            "",
            "\uff0e\uff0e",
            "%2e%2e",
            "secret.txt",
            "a\\..",
            "proc",
            "self",
        ]
    ),
    st.text(max_size=6),  # anything else: NUL, controls, surrogates, '/', unicode dots
)


@st.composite
def _hostile(draw: st.DrawFn) -> str:
    comps = draw(st.lists(_COMPONENTS, min_size=0, max_size=6))
    prefix = draw(st.sampled_from(["", "/", "/workspace/", "./"]))
    return prefix + "/".join(comps)


@pytest.fixture(scope="module")
def prop_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[tuple[int, int]]]:
    """Built once: opening with O_PATH never changes the tree."""
    base = tmp_path_factory.mktemp("prop")
    ws, outside = base / "ws", base / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    return ws, _tree(ws, outside)


@pytest.mark.parametrize("use_openat2", [True, False])
@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=_hostile())
def test_property_refused_or_inside(
    prop_tree: tuple[Path, set[tuple[int, int]]], use_openat2: bool, path: str
) -> None:
    """A hostile path is refused, or the file actually opened (fstat of the descriptor, not
    a second lookup) is one of the workspace's own inodes."""
    ws, inodes = prop_tree
    saved = _fsio._openat2_state["works"]
    _fsio._openat2_state["works"] = use_openat2
    try:
        with Workspace(ws) as w:
            try:
                parts = w.parts(path)
                fd = w.open(parts, os.O_PATH)
            except (ToolFailed, OSError):
                return
            with fd:
                st_ = os.fstat(fd.fd)
            assert (st_.st_dev, st_.st_ino) in inodes, path
    finally:
        _fsio._openat2_state["works"] = saved


# ------------------------------------------------------------------------------- atomic


def test_atomic_write_keeps_mode(ws: Path) -> None:
    (ws / "x.sh").write_text("old")
    os.chmod(ws / "x.sh", 0o750)
    with Workspace(ws) as w:
        assert w.atomic_write(w.parts("x.sh"), iter([b"new"])) == 3
    assert (ws / "x.sh").read_text() == "new"
    assert stat.S_IMODE((ws / "x.sh").stat().st_mode) == 0o750


@pytest.mark.parametrize("victim", ["fsync", "rename"])
def test_failed_write_leaves_original(
    ws: Path, monkeypatch: pytest.MonkeyPatch, victim: str
) -> None:
    (ws / "keep.txt").write_text("original")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "simulated I/O error")

    monkeypatch.setattr(toolkit_fs.os, victim, boom)
    with Workspace(ws) as w, pytest.raises(ToolFailed):
        w.atomic_write(w.parts("keep.txt"), iter([b"new content"]))
    monkeypatch.undo()
    assert (ws / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt"]  # no temp file left


def test_failed_chunk_mid_write_leaves_original(ws: Path) -> None:
    (ws / "keep.txt").write_text("original")

    def chunks() -> Iterator[bytes]:
        yield b"half of the new"
        raise OSError(errno.ENOSPC, "disk full")

    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(w.parts("keep.txt"), chunks())
    assert _reason(exc) == "no_space"
    assert (ws / "keep.txt").read_text() == "original"
    assert len(list(ws.iterdir())) == 1


def test_append_is_atomic_copy(ws: Path) -> None:
    (ws / "log").write_text("a\n")
    with Workspace(ws) as w:
        w.atomic_write(w.parts("log"), iter([b"b\n"]), append=True)
    assert (ws / "log").read_text() == "a\nb\n"


def test_append_refused_when_the_file_changes_before_the_rename(ws: Path) -> None:
    """Red team Q4: an append copied the file, extended the copy and renamed it over the
    file; a writer in between (here one without the folder's lock, as a shell's ``>>``)
    lost its write. The target is now checked before the rename: ``changed``, nothing
    written, the other writer's content kept."""
    (ws / "log").write_text("a\n")

    def chunks() -> Iterator[bytes]:
        with open(ws / "log", "a") as f:  # another writer, after the copy
            f.write("other\n")
        yield b"b\n"

    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(w.parts("log"), chunks(), append=True)
    assert _reason(exc) == "changed"
    assert (ws / "log").read_text() == "a\nother\n"
    assert sorted(p.name for p in ws.iterdir()) == ["log"]  # no temp file left


def test_append_refused_when_the_file_appears_meanwhile(ws: Path) -> None:
    def chunks() -> Iterator[bytes]:
        (ws / "new.log").write_text("first\n")
        yield b"b\n"

    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(w.parts("new.log"), chunks(), append=True)
    assert _reason(exc) == "changed"
    assert (ws / "new.log").read_text() == "first\n"


def test_write_with_expect_refused_when_the_file_is_not_the_one_read(ws: Path) -> None:
    """edit_file passes the fstat of what it read: a file replaced (another inode) or
    rewritten since is not overwritten with an edit of the old content."""
    (ws / "e.txt").write_text("one\n")
    read = os.stat(ws / "e.txt")
    (ws / "e.txt.new").write_text("two\n")
    os.replace(ws / "e.txt.new", ws / "e.txt")
    with Workspace(ws) as w:
        with pytest.raises(ToolFailed) as exc:
            w.atomic_write(w.parts("e.txt"), iter([b"edited\n"]), expect=read)
        assert _reason(exc) == "changed"
        assert (ws / "e.txt").read_text() == "two\n"
        w.atomic_write(w.parts("e.txt"), iter([b"edited\n"]), expect=os.stat(ws / "e.txt"))
    assert (ws / "e.txt").read_text() == "edited\n"


def test_write_waits_for_the_folders_lock_then_fails_busy(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write takes the folder's flock (between calls: each runs in its own process);
    another process holding it (a shell's ``flock DIR sleep 600``) makes the write fail
    ``busy`` after LOCK_WAIT_S, not hang until the call's timeout; released in time, the
    write goes on."""
    import fcntl
    import threading

    (ws / "sub").mkdir()
    (ws / "sub/f").write_text("kept\n")
    monkeypatch.setattr(toolkit_fs, "LOCK_WAIT_S", 0.3)
    holder = os.open(ws / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        with Workspace(ws) as w:
            t0 = time.monotonic()
            with pytest.raises(ToolFailed) as exc:
                w.atomic_write(w.parts("sub/f"), iter([b"x\n"]), append=True)
            assert _reason(exc) == "busy"
            assert 0.25 < time.monotonic() - t0 < 5
            assert (ws / "sub/f").read_text() == "kept\n"
            # Another folder is not locked by it.
            w.atomic_write(w.parts("other"), iter([b"o"]))
            timer = threading.Timer(0.1, fcntl.flock, (holder, fcntl.LOCK_UN))
            timer.start()
            w.atomic_write(w.parts("sub/f"), iter([b"x\n"]), append=True)
            timer.join()
    finally:
        os.close(holder)
    assert (ws / "sub/f").read_text() == "kept\nx\n"
    assert sorted(p.name for p in (ws / "sub").iterdir()) == ["f"]


def test_exclusive_holds_the_lock_across_a_read_and_the_write(ws: Path) -> None:
    """``exclusive`` (edit_file's read, change, rewrite) keeps another writer out for the
    whole span, and the write inside it does not wait on its own lock."""
    import fcntl

    (ws / "f").write_text("a")
    with Workspace(ws) as w:
        with w.exclusive(w.parts("f")):
            probe = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
            try:
                with pytest.raises(BlockingIOError):
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(probe)
            st_ = os.stat(ws / "f")
            w.atomic_write(w.parts("f"), iter([b"b"]), expect=st_)
        probe = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
        finally:
            os.close(probe)
    assert (ws / "f").read_text() == "b"


# ------------------------------------------------------------------------------- reading


def _lines(data: bytes, offset: int, limit: int, cap: int) -> tuple[bytes, int, bool]:
    r, wfd = os.pipe()
    try:
        os.write(wfd, data)
        os.close(wfd)
        return read_lines(r, offset, limit, cap)
    finally:
        os.close(r)


@pytest.mark.parametrize(
    ("data", "offset", "limit", "cap", "want"),
    [
        (b"a\nb\nc\n", 1, 10, 100, (b"a\nb\nc\n", 3, False)),
        (b"a\nb\nc", 2, 1, 100, (b"b\n", 1, True)),
        (b"a\nb\nc", 3, 5, 100, (b"c", 1, False)),
        (b"a\nb\n", 5, 5, 100, (b"", 0, False)),
        (b"", 1, 5, 100, (b"", 0, False)),
        (b"aaaa\nbbbb\n", 1, 10, 7, (b"aaaa\n", 1, True)),
        (b"x" * 50, 1, 10, 8, (b"x" * 8, 1, True)),
    ],
)
def test_read_lines(data: bytes, offset: int, limit: int, cap: int, want: object) -> None:
    assert _lines(data, offset, limit, cap) == want


def test_read_lines_big_file_streams(ws: Path) -> None:
    line = b"0123456789" * 10 + b"\n"
    with open(ws / "big", "wb") as f:
        for _ in range(50_000):  # ~5 MB
            f.write(line)
    with Workspace(ws) as w:
        fd, _ = w.open_file(w.parts("big"))
        with fd:
            data, n, truncated = read_lines(fd.fd, 49_999, 10, 1 << 20)
    assert n == 2 and not truncated and data == line * 2


# ------------------------------------------------------------------------------- walking


def test_walk_survives_symlink_loops(mode: str, ws: Path, outside: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "self").symlink_to(".")
    (ws / "d" / "up").symlink_to("..")
    (ws / "out").symlink_to(outside)
    (ws / ".runtime").mkdir()
    (ws / ".runtime" / "state.db").write_text("x")
    with Workspace(ws) as w:
        paths = {e.path: e.type for e in w.walk((), max_depth=-1)}
    assert paths == {"d": "directory", "d/self": "symlink", "d/up": "symlink", "out": "symlink"}


def test_walk_depth_and_entry_cap(ws: Path) -> None:
    (ws / "a" / "b" / "c").mkdir(parents=True)
    with Workspace(ws) as w:
        assert [e.path for e in w.walk((), max_depth=1)] == ["a"]
        assert [e.path for e in w.walk((), max_depth=2)] == ["a", "a/b"]
        assert len(list(w.walk((), max_depth=-1, max_entries=2))) == 2


def _branches(ws: Path) -> None:
    for rel in ("a/b/c/d/f1", "a/b/c/zz", "a/b/zz", "a/y", "x/z"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("")


def test_walk_holding_few_descriptors_lists_the_same(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below its top WALK_HELD_FDS levels a walk lets each level's descriptor go and comes
    back through '..': the same entries, in the same order, as holding them all."""
    _branches(ws)
    with Workspace(ws) as w:
        held = [(e.path, e.depth) for e in w.walk((), max_depth=-1)]
    monkeypatch.setattr(toolkit_fs, "WALK_HELD_FDS", 1)
    with Workspace(ws) as w:
        assert [(e.path, e.depth) for e in w.walk((), max_depth=-1)] == held
        assert not w.walk_cut
    assert len(held) == 10


def test_walk_stops_cut_when_a_released_level_moved_away(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A level whose descriptor was let go is reached again only if '..' of its child is
    that very directory: a child moved elsewhere meanwhile (a shell in the workspace) ends
    the walk as cut (truncated), and nothing of the folder it was moved to is listed as
    the old one's."""
    _branches(ws)
    monkeypatch.setattr(toolkit_fs, "WALK_HELD_FDS", 1)
    with Workspace(ws) as w:
        walk = w.walk((), max_depth=-1)
        for entry in walk:
            if entry.path == "a/b/c/d/f1":
                break
        (ws / "a" / "b" / "c").rename(ws / "x" / "c")
        # d's '..' is still c (the same folder, where it now is); c's is x, not b.
        assert [e.path for e in walk] == ["a/b/c/zz"]
        assert w.walk_cut


# ------------------------------------------------------------------------------- move/delete


def test_move_noreplace_and_overwrite(ws: Path) -> None:
    (ws / "a").write_text("A")
    (ws / "b").write_text("B")
    with Workspace(ws) as w:
        with pytest.raises(ToolFailed) as exc:
            w.move(("a",), ("b",), overwrite=False)
        assert _reason(exc) == "exists"
        assert (ws / "b").read_text() == "B"
        w.move(("a",), ("b",), overwrite=True)
    assert (ws / "b").read_text() == "A" and not (ws / "a").exists()


def test_move_out_through_symlink_refused(mode: str, ws: Path, outside: Path) -> None:
    (ws / "a").write_text("A")
    (ws / "o").symlink_to(outside)
    with Workspace(ws) as w, pytest.raises(ToolFailed):
        w.move(("a",), ("o", "a"), overwrite=False)
    assert not (outside / "a").exists()


def test_delete_never_follows(ws: Path, outside: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "o").symlink_to(outside)
    with Workspace(ws) as w:
        assert w.delete(("d",), recursive=True) == "directory"
    assert (outside / "secret.txt").exists()
    assert not (ws / "d").exists()


def test_enosys_switches_to_the_walk(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def no_openat2(dirfd: int, path: str, flags: int, mode: int) -> int:
        calls.append(path)
        raise OSError(errno.ENOSYS, "seccomp says no")

    monkeypatch.setattr(_fsio, "_openat2", no_openat2)
    monkeypatch.setitem(_fsio._openat2_state, "works", True)
    (ws / "f").write_text("inside")
    (ws / "o").symlink_to(outside)
    assert _read(ws, "f") == b"inside"
    assert _fsio._openat2_state["works"] is False and calls == ["f"]
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "o/secret.txt")
    assert _reason(exc) == "escape" and calls == ["f"]  # not asked again


def test_eagain_is_retried_then_walked(
    ws: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openat2 answers EAGAIN when a '..' step races with a rename or mount anywhere on the
    host: a few more tries, then the hand walk for that one open, with the same rule."""
    real = _fsio._openat2
    calls: list[str] = []

    def racing(fails: int) -> object:
        def openat2(dirfd: int, path: str, flags: int, mode: int) -> int:
            calls.append(path)
            if len(calls) <= fails:
                raise OSError(errno.EAGAIN, "racing rename")
            return real(dirfd, path, flags, mode)

        return openat2

    monkeypatch.setitem(_fsio._openat2_state, "works", True)
    (ws / "src").mkdir()
    (ws / "src" / "f").write_text("inside")
    (ws / "out").mkdir()
    (ws / "out" / "s").symlink_to("../src")
    (ws / "out" / "o").symlink_to("../../outside")
    monkeypatch.setattr(_fsio, "_openat2", racing(2))
    assert _read(ws, "out/s/f") == b"inside" and len(calls) == 3
    calls.clear()
    monkeypatch.setattr(_fsio, "_openat2", racing(10**6))
    assert _read(ws, "out/s/f") == b"inside" and len(calls) == _fsio._EAGAIN_TRIES
    with pytest.raises(ToolFailed) as exc:
        _read(ws, "out/o/secret.txt")
    assert _reason(exc) == "escape"
    assert _fsio._openat2_state["works"] is True  # a race is not a missing syscall


def test_open_beneath_survives_renames_elsewhere(ws: Path, tmp_path: Path) -> None:
    """The real race: another process renames files in an unrelated directory while we open
    through a '..' symlink. The kernel's global rename count moves under some of our
    lookups (EAGAIN); every open must still succeed."""
    (ws / "src").mkdir()
    (ws / "src" / "f").write_text("inside")
    (ws / "out").mkdir()
    (ws / "out" / "s").symlink_to("../src")
    spin = tmp_path / "spin"
    spin.mkdir()
    real = _fsio._openat2
    raced = 0
    argv = [sys.executable, "-c", _RENAMER, str(spin)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE) as renamer, Workspace(ws) as w:
        try:
            assert renamer.stdout is not None and renamer.stdout.readline() == b"go\n"
            parts = w.parts("out/s/f")
            deadline = time.monotonic() + 5
            opens = 0
            while time.monotonic() < deadline and (opens < 3000 or not raced):
                opens += 1
                with contextlib.suppress(BlockingIOError):
                    os.close(real(w.fd, "out/s/f", os.O_RDONLY, 0))
                    continue
                raced += 1
                fd = _fsio.open_beneath(w.fd, parts, os.O_RDONLY)
                assert os.pread(fd, 16, 0) == b"inside"
                os.close(fd)
            for _ in range(3000):
                os.close(_fsio.open_beneath(w.fd, parts, os.O_RDONLY))
        finally:
            renamer.kill()
    if not raced:
        pytest.skip("this kernel never raced a '..' lookup with a rename here")


_RENAMER = """
import os, sys
os.chdir(sys.argv[1])
open("a", "w").close()
print("go", flush=True)
while True:
    os.rename("a", "b")
    os.rename("b", "a")
"""


def test_symlink_swap_race(mode: str, ws: Path, outside: Path) -> None:
    """A6: another process flips 'd' between a real directory and a symlink to the outside
    while we read and write through it. Whatever wins each round, nothing outside is read or
    written."""
    import threading

    (ws / "real").mkdir()
    (ws / "real" / "secret.txt").write_text("inside")
    (ws / "d").symlink_to("real")  # exists from the start: a missing parent would be created
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            for target in ("real", str(outside)):
                tmp = ws / "d.tmp"
                tmp.unlink(missing_ok=True)
                tmp.symlink_to(target)
                os.replace(tmp, ws / "d")

    t = threading.Thread(target=flipper)
    t.start()
    seen = set()
    try:
        with Workspace(ws) as w:
            for i in range(400):
                try:
                    fd, _ = w.open_file(("d", "secret.txt"))
                    with fd:
                        seen.add(read_bytes(fd.fd, 100)[0])
                except ToolFailed:
                    pass
                with contextlib.suppress(ToolFailed):
                    w.atomic_write(("d", f"w{i}"), iter([b"x"]))
    finally:
        stop.set()
        t.join()
    assert seen <= {b"inside"}
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"


def _reference_lines(data: bytes, offset: int, limit: int, cap: int) -> tuple[bytes, int, bool]:
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    out, taken = b"", 0
    for line in lines[offset - 1 : offset - 1 + limit]:
        if len(out) + len(line) > cap:
            return (line[:cap], 1, True) if taken == 0 else (out, taken, True)
        out, taken = out + line, taken + 1
    return out, taken, len(lines) > offset - 1 + limit


@settings(max_examples=500, deadline=None)
@given(
    data=st.binary(max_size=60).map(lambda b: b.replace(b"\0", b"\n")),
    offset=st.integers(1, 8),
    limit=st.integers(1, 8),
    cap=st.integers(1, 40),
    block=st.integers(1, 9),
)
def test_read_lines_matches_reference(
    data: bytes, offset: int, limit: int, cap: int, block: int
) -> None:
    """Block boundaries anywhere (tiny blocks) give the same answer as splitting in memory."""
    saved = _fsio._BLOCK
    _fsio._BLOCK = block
    try:
        assert _lines(data, offset, limit, cap) == _reference_lines(data, offset, limit, cap)
    finally:
        _fsio._BLOCK = saved


# -- deny globs on the resolved path (the sandbox passes the policy's paths.deny) ------------


def test_symlink_to_a_denied_path_is_refused_by_where_it_resolved(ws: Path, mode: str) -> None:
    (ws / ".env").write_text("SECRET")
    (ws / "sub").mkdir()
    (ws / "sub" / "Server.PEM").write_text("SECRET")
    (ws / "envlink").symlink_to(".env")
    (ws / "dirlink").symlink_to("sub")
    (ws / "ok.txt").write_text("fine")
    with Workspace(ws, deny=["**/.env", "**/*.pem"]) as w:
        for path in ("envlink", "dirlink/Server.PEM", ".env"):
            with pytest.raises(ToolFailed) as info:
                w.open_file(w.parts(path))
            assert _reason(info) == "path_denied"
            assert "SECRET" not in info.value.message
        assert info.value.details["resolved"] == ".env"
        fd, _ = w.open_file(w.parts("ok.txt"))
        fd.close()
        w.open_dir(w.parts("dirlink")).close()
    # Without deny globs (no policy passed) the same open succeeds: the check is the globs.
    with Workspace(ws) as w:
        fd, _ = w.open_file(w.parts("envlink"))
        fd.close()


def test_for_call_takes_the_deny_globs_from_the_call_options(ws: Path) -> None:
    from runtime.toolkit import ToolContext

    (ws / "id_rsa").write_text("SECRET")
    (ws / "k").symlink_to("id_rsa")
    ctx = ToolContext(workspace=ws, options={"path_deny": ["**/id_rsa*"]})
    with Workspace.for_call(ctx) as w, pytest.raises(ToolFailed) as info:
        w.open_file(w.parts("k"))
    assert _reason(info) == "path_denied"
    with Workspace.for_call(ToolContext(workspace=ws)) as w:
        w.open_file(w.parts("k"))[0].close()


def test_open_dir_refuses_to_create_a_tree_deeper_than_the_mask_walk_checks(ws: Path) -> None:
    """Creating 300 levels left a tree no later sandboxed call could mask (each failed
    closed). The refusal comes before the first mkdir: nothing is left behind."""
    from runtime._depth import CREATE_MAX_DEPTH

    with Workspace(ws) as w, pytest.raises(ToolFailed) as exc:
        w.atomic_write(("a",) * 300 + ("x",), iter([b"deep"]))
    assert _reason(exc) == "too_deep"
    assert not (ws / "a").exists()
    with Workspace(ws) as w:
        w.atomic_write(("b",) * (CREATE_MAX_DEPTH - 1) + ("x",), iter([b"ok"]))
        with pytest.raises(ToolFailed) as exc:
            w.open_dir(("b",) * CREATE_MAX_DEPTH, create=True)
    assert _reason(exc) == "too_deep"
