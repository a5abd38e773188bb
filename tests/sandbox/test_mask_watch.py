"""The fork-server's watched look at a large tree (``masks.find(watch=True)``, ``_dirwatch``):
a quiet tree is not walked again, and still the next call never sees a denied file (nor a
link exposing one) that appeared anywhere in the tree before it — deep in a pnpm-like
``node_modules``, in a directory whose listing is replayed, while calls race the changes.

This module lives in tests/sandbox, so test_unprivileged runs it again as the ordinary user
``rtsbx`` (an unprivileged broker).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import masks
from runtime.backends.sandbox.masks import MaskSpec, find
from tests.sandbox.helpers import SHELL, call, run_with_backend

pytestmark = [pytest.mark.sandbox]

SECRET = "CANARY-5d1e-watched"
DEFAULT_MASKS = MaskSpec(
    hide=(".runtime/**", "**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/id_rsa*"),
    readonly=(".git/**", "**/.git/**"),
)


def _pnpm_tree(ws: Path, packages: int = 60, files: int = 6) -> list[Path]:
    """A small pnpm-shaped ``node_modules`` (store, nested packages, links between them);
    returns its deepest directories."""
    store = ws / "node_modules" / ".pnpm"
    deep: list[Path] = []
    for i in range(packages):
        name = f"pkg{i}" if i % 5 else f"@scope/pkg{i}"
        slot = store / f"{name.replace('/', '+')}@1.0.0" / "node_modules"
        lib = slot / name / "lib" / "sub"
        lib.mkdir(parents=True)
        for j in range(files):
            (lib / f"m{j}.js").write_text("x")
        (slot / name / "package.json").write_text("{}")
        dep = f"pkg{(i + 1) % packages or 1}"
        os.symlink(f"../../{dep}@1.0.0/node_modules/{dep}", slot / dep)
        deep.append(lib)
    os.symlink(".pnpm/pkg1@1.0.0/node_modules/pkg1", ws / "node_modules" / "pkg1")
    for path in [ws, *ws.rglob("*")]:
        if not path.is_symlink():
            os.chmod(path, 0o777 if path.is_dir() else 0o666)
    return deep


def _look(ws: Path, spec: MaskSpec = DEFAULT_MASKS) -> list[str]:
    with masks.signature(str(ws), spec) as sig:
        assert sig is not None and sig.key is not None
        return [t.rel for t in sig.key]


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the directories the walk lists (``os.scandir`` on descriptors)."""
    calls: list[int] = []
    real = os.scandir

    def counting(fd: Any) -> Any:
        if isinstance(fd, int):
            calls.append(fd)
        return real(fd)

    monkeypatch.setattr(masks.os, "scandir", counting)
    return calls


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the names the walk opens or stats (every directory a look touches)."""
    calls: list[str] = []
    real_open, real_stat = os.open, os.stat

    def counting_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(path))
        return real_open(path, *args, **kwargs)

    def counting_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(str(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(masks.os, "open", counting_open)
    monkeypatch.setattr(masks.os, "stat", counting_stat)
    return calls


# -- the look itself, in this process ------------------------------------------------------


def test_a_quiet_tree_is_not_walked_again(workspace: Path, opened: list[str]) -> None:
    _pnpm_tree(workspace)
    (workspace / ".env").write_text(SECRET)
    first = _look(workspace)
    assert first == [".env"]
    walked = len(opened)
    opened.clear()
    assert _look(workspace) == first
    # The root, the one masked entry: not the ~400 directories of the tree.
    assert len(opened) < 10 < walked, (len(opened), walked)


def test_a_denied_file_created_anywhere_is_in_the_next_look(
    workspace: Path, later: None, listings: list[int]
) -> None:
    deep = _pnpm_tree(workspace)
    assert _look(workspace) == []
    rng = random.Random(7)
    made: list[str] = []
    for lib in rng.sample(deep, 5):
        for where in (lib, lib.parent.parent, workspace / "node_modules" / ".pnpm"):
            secret = where / ".env"
            if secret.exists():
                continue
            secret.write_text(SECRET)
            made.append(str(secret.relative_to(workspace)))
            listings.clear()
            assert sorted(_look(workspace)) == sorted(made)
            # Only the changed directory is listed again (its parents are replayed).
            assert len(listings) == 1, listings
    for rel in made:
        (workspace / rel).unlink()
    assert _look(workspace) == []


def test_a_new_directory_with_a_denied_file_is_in_the_next_look(workspace: Path) -> None:
    deep = _pnpm_tree(workspace)
    assert _look(workspace) == []
    (deep[3] / "fresh" / "deeper").mkdir(parents=True)
    (deep[3] / "fresh" / "deeper" / "id_rsa").write_text(SECRET)
    rel = str((deep[3] / "fresh" / "deeper" / "id_rsa").relative_to(workspace))
    assert _look(workspace) == [rel]
    # Renamed elsewhere (a directory event): found at its new place, not its old one.
    (deep[3] / "fresh").rename(deep[7] / "moved")
    rel = str((deep[7] / "moved" / "deeper" / "id_rsa").relative_to(workspace))
    assert _look(workspace) == [rel]
    (deep[7] / "moved" / "deeper" / "id_rsa").unlink()
    assert _look(workspace) == []


def test_a_directory_removed_or_renamed_costs_its_parent_not_a_walk(
    workspace: Path, later: None, opened: list[str]
) -> None:
    """A directory removed or renamed away drops what the look knew at and below its path
    and lists its parent again (SANDBOX.md, tenth round); it used to drop everything and
    make the next look a full timestamp walk (every directory opened)."""
    deep = _pnpm_tree(workspace)
    (deep[2] / ".env").write_text(SECRET)
    secret = str((deep[2] / ".env").relative_to(workspace))
    assert _look(workspace) == [secret]
    opened.clear()
    _look(workspace)
    quiet = len(opened)
    shutil.rmtree(deep[3])  # rm -rf of a directory with files
    opened.clear()
    assert _look(workspace) == [secret]
    assert len(opened) < quiet + 40, (len(opened), quiet)
    moved = deep[4].parent / "renamed"
    deep[4].rename(moved)  # renamed within its parent
    opened.clear()
    assert _look(workspace) == [secret]
    assert len(opened) < quiet + 40, (len(opened), quiet)
    # What is below the new path is looked at there, and the old path is free again.
    (moved / ".env").write_text(SECRET)
    deep[4].mkdir()
    (deep[4] / "id_rsa").write_text(SECRET)
    found = sorted(_look(workspace))
    assert found == sorted(
        [
            secret,
            str((moved / ".env").relative_to(workspace)),
            str((deep[4] / "id_rsa").relative_to(workspace)),
        ]
    )
    # The directory holding the masked file, removed: it is gone from the next look.
    shutil.rmtree(deep[2])
    assert secret not in _look(workspace)


def test_a_burst_past_the_queue_read_as_it_comes_is_not_a_walk(
    workspace: Path, later: None, opened: list[str]
) -> None:
    """More changes between two looks than the kernel queues (``max_queued_events``): read
    as they come (``masks.pump``, the fork-server's loop while calls run), nothing is lost,
    and the next look lists the changed directory only; unread, the queue overflows and
    every summary is forgotten (a full walk)."""
    with open("/proc/sys/fs/inotify/max_queued_events", encoding="ascii") as f:
        burst = int(f.read()) + 2000
    deep = _pnpm_tree(workspace)
    assert _look(workspace) == []
    opened.clear()
    _look(workspace)
    quiet = len(opened)
    busy = deep[5]
    for i in range(burst):
        (busy / f"f{i}").write_bytes(b"")
        if i % 2000 == 0:
            masks.pump()
    (busy / "id_rsa").write_text(SECRET)
    opened.clear()
    assert _look(workspace) == [str((busy / "id_rsa").relative_to(workspace))]
    assert len(opened) < quiet + 40, (len(opened), quiet)


def test_the_fork_server_reads_the_watch_queues_as_they_fill(workspace: Path) -> None:
    import selectors

    from runtime.backends.sandbox import zygote

    _look(workspace)  # this process's watches over it
    sel = selectors.DefaultSelector()
    try:
        watching = zygote._watch_queues(sel, {})
        assert watching and watching == masks.watch_fds()
        assert all(sel.get_key(fd).data == "watch" for fd in watching)
        gone = dict.fromkeys(watching, -1)  # tokens of queues closed since: unregistered
        assert zygote._watch_queues(sel, gone) == watching
    finally:
        sel.close()


def _frozen(st: os.stat_result, mtime_ns: int, ctime_ns: int) -> os.stat_result:
    extra = {
        "st_atime_ns": st.st_atime_ns,
        "st_mtime_ns": mtime_ns,
        "st_ctime_ns": ctime_ns,
        "st_blksize": st.st_blksize,
        "st_blocks": st.st_blocks,
        "st_rdev": st.st_rdev,
    }
    return os.stat_result(tuple(st[:10]), extra)


def test_a_change_in_the_same_timestamp_tick_is_not_missed(
    workspace: Path, later: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replayed directory changed twice within one timestamp tick keeps its mtime and
    ctime: the kept listing alone would be replayed (the racy window is defeated here by
    ``later``, the tick by freezing the directory's times as a coarse filesystem would).
    The watch reports the second change all the same."""
    deep = _pnpm_tree(workspace)
    target = deep[11]
    (target / "first.js").write_text("x")  # the first change of the tick
    st = os.stat(target)
    ident, frozen = (st.st_dev, st.st_ino), (st.st_mtime_ns, st.st_ctime_ns)
    real_fstat, real_stat = os.fstat, os.stat

    def fstat(fd: int) -> os.stat_result:
        got = real_fstat(fd)
        return _frozen(got, *frozen) if (got.st_dev, got.st_ino) == ident else got

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        got = real_stat(path, *args, **kwargs)
        return _frozen(got, *frozen) if (got.st_dev, got.st_ino) == ident else got

    monkeypatch.setattr(masks.os, "fstat", fstat)
    monkeypatch.setattr(masks.os, "stat", lstat)
    assert _look(workspace) == []
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        find(fd, DEFAULT_MASKS)  # the timestamp walk keeps the listing too
        (target / ".env").write_text(SECRET)  # the second change, same frozen times
        rel = str((target / ".env").relative_to(workspace))
        # The timestamps alone are fooled (this is the hazard the racy rule exists for)...
        assert [t.rel for t in find(fd, DEFAULT_MASKS)] == []
    finally:
        os.close(fd)
    # ...the watched look is not.
    assert _look(workspace) == [rel]


def test_a_link_planted_deep_in_node_modules_is_refused(workspace: Path) -> None:
    deep = _pnpm_tree(workspace)
    (workspace / "notes.txt").write_text("plain\n")
    assert _look(workspace) == []
    link = deep[17] / ".env"
    link.symlink_to(os.path.relpath(workspace / "notes.txt", deep[17]))
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            find(root, DEFAULT_MASKS, host=str(workspace), watch=True)
        assert info.value.errno == errno.EXDEV
        assert str(link.relative_to(workspace)) in str(info.value)
        # Refused on every look while it stays, quiet tree or not.
        with pytest.raises(OSError):
            find(root, DEFAULT_MASKS, host=str(workspace), watch=True)
    finally:
        os.close(root)
    with masks.signature(str(workspace), DEFAULT_MASKS) as sig:
        assert sig is not None and sig.key is None  # no spare serves this tree
    link.unlink()
    assert _look(workspace) == []


def test_a_hidden_files_second_link_is_seen_on_a_quiet_tree(workspace: Path) -> None:
    """A link count moves without an event on the directory: every look re-checks it."""
    _pnpm_tree(workspace)
    (workspace / ".env").write_text(SECRET)
    (workspace / "outside-tree").mkdir()
    assert _look(workspace) == [".env"]
    os.link(workspace / ".env", workspace.parent / "outside" / "second")
    with masks.signature(str(workspace), DEFAULT_MASKS) as sig:
        assert sig is not None and sig.key is None
    root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            find(root, DEFAULT_MASKS, watch=True)
        assert info.value.errno == errno.EMLINK
    finally:
        os.close(root)


_MOUNT_OVER = """
import os, sys
from runtime.backends.sandbox import masks
from runtime.backends.sandbox.masks import MaskSpec
ws, deep = sys.argv[1], sys.argv[2]
spec = MaskSpec(hide=("**/.env",))
with masks.signature(ws, spec) as sig:
    print(len(sig.key))
os.system("mount -t tmpfs tmpfs " + deep)
open(deep + "/.env", "w").write("x")
with masks.signature(ws, spec) as sig:
    print(sig.key is not None and len(sig.key))
"""


def test_a_mount_over_a_watched_directory_is_seen(workspace: Path) -> None:
    """A mount moves no timestamp and raises no inotify event: the mount table's poll."""
    deep = _pnpm_tree(workspace)
    out = subprocess.run(
        ["unshare", "-Urm", sys.executable, "-c", _MOUNT_OVER, str(workspace), str(deep[5])],
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(Path(__file__).resolve().parents[2]), *sys.path[1:]]
            ),
        },
    )
    # The tmpfs is another filesystem: walked (and its .env found), never summarised.
    assert out.stdout.split() == ["0", "1"], out.stderr


def test_a_forked_copy_does_not_read_the_watches(workspace: Path) -> None:
    """The queue is the owner's: a forked copy (a call's child) walks by timestamps and
    leaves the events where they are."""
    deep = _pnpm_tree(workspace)
    assert _look(workspace) == []
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked copy
        try:
            (deep[2] / ".env").write_text(SECRET)
            ok = masks.signature(str(workspace), DEFAULT_MASKS)
            os.write(write, b"1" if ok is not None and ok.key and len(ok.key) == 1 else b"0")
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    os.close(read)
    # The owner still sees the event the copy's write raised.
    assert _look(workspace) == [str((deep[2] / ".env").relative_to(workspace))]


# -- through the sandbox backend: the fork-server's look before each call ----------------


async def _secrets_seen(b: Any, ws: Path) -> str:
    out = await call(b, SHELL, ws, command="grep -rho 'CANARY-[0-9a-z-]*' . ; echo end")
    text: str = out.result["stdout"]
    return text


def test_a_denied_file_created_between_calls_is_hidden_from_the_next(workspace: Path) -> None:
    deep = _pnpm_tree(workspace)
    os.chmod(workspace, 0o777)
    rng = random.Random(3)
    places = [*rng.sample(deep, 4), workspace / "node_modules", workspace]

    async def fn(b: Any) -> list[str]:
        seen = [await _secrets_seen(b, workspace)]
        for i, where in enumerate(places):
            secret = where / ".env"
            secret.write_text(f"{SECRET}-{i}\n")
            os.chmod(secret, 0o666)
            seen.append(await _secrets_seen(b, workspace))
        # A new directory holding one, and a link exposing nothing (to a hidden name).
        (deep[0] / "newdir").mkdir()
        (deep[0] / "newdir" / "server.pem").write_text(f"{SECRET}-pem\n")
        (deep[1] / "alias.txt").symlink_to(workspace / ".env")
        seen.append(await _secrets_seen(b, workspace))
        out = await call(b, SHELL, workspace, command=f"cat {deep[1] / 'alias.txt'}; echo end")
        seen.append(out.result["stdout"])
        return seen

    seen = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert all(text.strip().endswith("end") for text in seen), seen
    assert not any(SECRET in text for text in seen), seen


def test_changes_racing_the_calls_are_never_missed(workspace: Path) -> None:
    """A writer keeps creating secrets deep in the tree while calls run back to back; every
    secret whose creation returned before a call was sent is hidden from that call (one
    created while the call is being set up may or may not be: no scheme masks a file that
    does not exist yet)."""
    deep = _pnpm_tree(workspace)
    os.chmod(workspace, 0o777)
    done: list[str] = []  # tokens whose write returned, in order
    stop = threading.Event()

    def writer() -> None:
        rng = random.Random(11)
        i = 0
        while not stop.is_set():
            where = rng.choice(deep)
            name = rng.choice([".env", f".env.{i}", f"k{i}.key", f"n{i}.txt"])
            token = f"{SECRET}-{i}"
            path = where / name
            if not path.exists():
                path.write_text(token + "\n")
                os.chmod(path, 0o666)
                if name != f"n{i}.txt":
                    done.append(token)
            i += 1
            time.sleep(rng.random() * 0.01)

    async def fn(b: Any) -> list[tuple[list[str], str]]:
        rounds = []
        for _ in range(15):
            before = list(done)
            rounds.append((before, await _secrets_seen(b, workspace)))
        return rounds

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        rounds = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    finally:
        stop.set()
        thread.join()
    assert sum(len(before) for before, _ in rounds) > 0
    for before, text in rounds:
        assert text.strip().endswith("end"), text
        seen = set(text.split())
        leaked = [token for token in before if token in seen]
        assert not leaked, (leaked, text)


def test_a_link_planted_deep_between_calls_refuses_the_next(workspace: Path) -> None:
    deep = _pnpm_tree(workspace)
    os.chmod(workspace, 0o777)
    (workspace / "notes.txt").write_text("plain\n")

    async def fn(b: Any) -> tuple[Any, Any]:
        first = await call(b, SHELL, workspace, command="echo ok")
        (deep[9] / ".env").symlink_to(workspace / "notes.txt")
        try:
            second: Any = await call(b, SHELL, workspace, command="echo ok")
        except Exception as exc:  # the typed refusal is what is checked
            second = exc
        return first.result["stdout"], second

    from runtime.errors import SandboxError

    first, second = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert first == "ok\n"
    assert isinstance(second, SandboxError), second
    assert second.details["phase"] == "mount_masks"
    assert ".env" in second.message and "symbolic link" in second.message


def test_the_watch_never_reaches_the_tool(workspace: Path) -> None:
    """A tool holding the queue could read the events away from the fork-server."""
    _pnpm_tree(workspace)

    async def fn(b: Any) -> list[str]:
        outs = []
        for _ in range(3):
            res = await call(
                b, SHELL, workspace, command="for f in /proc/self/fd/*; do readlink $f; done"
            )
            outs.append(res.result["stdout"])
        return outs

    outs = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert len(outs) == 3 and all(outs), outs  # the listing worked
    assert not any("inotify" in out for out in outs), outs


# -- the watched look against the reference walk, after random changes ---------------------


def _watched(root: Path, spec: MaskSpec) -> list[tuple[str, str]] | str:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return sorted((t.rel, t.action) for t in find(fd, spec, watch=True))
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            return "refused"
        raise
    finally:
        os.close(fd)


@pytest.mark.parametrize("seed", range(30))
def test_the_watched_look_agrees_with_a_fresh_walk_after_every_change(
    tmp_path: Path, seed: int, later: None
) -> None:
    """Random trees and random changes (files, directories made, removed, renamed, replaced
    by links, touched), a few at a time between looks: the watched look finds what the
    reference walk (``os.walk``, no cache, no watch) finds, every time."""
    from tests.sandbox.test_masks import _GLOBS, _mutate, _reference

    rng = random.Random(seed)
    root = tmp_path / "t"
    root.mkdir()
    for _ in range(rng.randint(5, 30)):
        _mutate(rng, root)
    globs = rng.sample(_GLOBS, rng.randint(1, 5))
    cut = rng.randint(0, len(globs))
    spec = MaskSpec(hide=tuple(globs[:cut]), readonly=tuple(globs[cut:]))
    assert _watched(root, spec) == _reference(root, spec)
    for _ in range(10):
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, root)
            if rng.random() < 0.3:  # a file written in place of a denied name, deep down
                dirs = [p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()]
                if dirs:
                    target = rng.choice(dirs) / rng.choice([".env", "x.pem", "plain"])
                    if not os.path.lexists(target):
                        target.write_text("x")
        assert _watched(root, spec) == _reference(root, spec), (globs, cut)


# -- past the pins' bound (more than 64 masked entries) ------------------------------------


def _many_secrets(ws: Path, count: int = 70) -> list[str]:
    """``count`` test fixtures a glob hides, as a node_modules full of *.pem has them."""
    made = []
    for i in range(count):
        where = ws / "node_modules" / f"pkg{i % 7}" / "test" / "fixtures"
        where.mkdir(parents=True, exist_ok=True)
        (where / f"k{i}.pem").write_text(SECRET)
        made.append(str((where / f"k{i}.pem").relative_to(ws)))
    for path in [ws, *ws.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    return made


def test_past_the_pins_bound_the_calls_own_child_gets_the_targets(workspace: Path) -> None:
    from runtime.backends.sandbox import child, zygote

    made = _many_secrets(workspace)
    raw_plan: dict[str, Any] = {
        "call_id": "c",
        "workspace": str(workspace),
        "access": "ro",
        "exec": False,
        "limits": {},
        "masks": DEFAULT_MASKS.as_plan(),
    }
    plan = child.CallPlan(**raw_plan)
    with masks.signature(str(workspace), DEFAULT_MASKS) as sig:
        assert sig is not None and sig.key is None and sig.found is not None
        stamp = (0, 0, sig)
        raw, handed = zygote._with_targets(raw_plan, plan, stamp, unpinned=True)
        assert sorted("/".join(t[0]) for t in raw["masks"]["targets"]) == sorted(made)
        assert handed.masks == raw["masks"]
        # A spare's stamp must pin what it mounted: none is made, none handed targets.
        assert "targets" not in zygote._with_targets(raw_plan, plan, stamp)[0]["masks"]
        assert not zygote._matchable(plan, stamp)
    with masks.signature(str(workspace), MaskSpec(hide=("**/.env",))) as few:
        assert zygote._matchable(plan, (0, 0, few))


def test_past_the_pins_bound_calls_stay_masked_and_fork_no_useless_spare(
    workspace: Path,
) -> None:
    from tests.sandbox.helpers import call_processes

    made = _many_secrets(workspace)

    async def fn(b: Any) -> tuple[list[str], int]:
        outs = []
        for rel in (made[0], made[-1], made[35]):
            res = await call(b, SHELL, workspace, command=f"cat {rel}; echo ok")
            outs.append(res.result["stdout"])
        assert b.zygote_pid is not None
        import anyio

        await anyio.sleep(1.0)  # a spare, were one asked for, is cloned by now
        return outs, len(call_processes(b.zygote_pid))

    outs, left = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert outs == ["ok\n"] * 3, outs
    assert left == 0


# -- depth ------------------------------------------------------------------------------------


def test_a_tree_250_deep_is_masked_and_past_the_bound_fails_closed(workspace: Path) -> None:
    deep = workspace
    for _ in range(250):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / ".env").write_text(SECRET)
    for path in [workspace, *workspace.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    rel = str((deep / ".env").relative_to(workspace))
    assert _look(workspace) == [rel]

    async def fn(b: Any) -> str:
        res = await call(b, SHELL, workspace, command=f"cat {rel}; echo ok")
        out: str = res.result["stdout"]
        return out

    assert run_with_backend(fn, masks=DEFAULT_MASKS) == "ok\n"
    for _ in range(masks.MAX_DEPTH - 250 + 1):
        deep = deep / "d"
    deep.mkdir(parents=True)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            find(fd, DEFAULT_MASKS)
    finally:
        os.close(fd)
    assert info.value.errno == errno.E2BIG
    assert f"deeper than {masks.MAX_DEPTH}" in str(info.value)
