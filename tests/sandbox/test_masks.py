"""Kernel masks over policy-denied workspace paths (issue #6): the security corpus's last six
attacks reproduced through the broker, the attacker's follow-ups (move, link, overwrite the
mask; swap a symlink in during the walk; a tree past the bound), benign work next to masked
files, and spares that must not serve a tree whose secrets changed since they were forked.

This module lives in tests/sandbox, so test_unprivileged runs it again as the ordinary user
``rtsbx`` (an unprivileged broker).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import masks
from runtime.backends.sandbox.masks import MaskSpec, _Matcher, _reopen, find
from runtime.errors import SandboxError
from tests.sandbox.helpers import SHELL, call, run_with_backend

pytestmark = [pytest.mark.sandbox]

SECRET = "CANARY-7f3a-secret"
DEFAULT_MASKS = MaskSpec(
    hide=(".runtime/**", "**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/id_rsa*"),
    readonly=(".git/**", "**/.git/**"),
)


@pytest.fixture
def secrets_ws(workspace: Path) -> Path:
    """The corpus's fixture, roughly: secrets, a repository, a symlink to a secret."""
    (workspace / ".env").write_text(f"TOKEN={SECRET}\n")
    (workspace / "id_rsa").write_text(f"-----BEGIN {SECRET}-----\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "server.pem").write_text(SECRET)
    (workspace / "sub" / "notes.txt").write_text("plain notes\n")
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (workspace / "envlink").symlink_to(".env")
    for path in workspace.rglob("*"):
        if not path.is_symlink():
            os.chmod(path, 0o777 if path.is_dir() else 0o666)
    return workspace


def _git_state(ws: Path) -> dict[str, str]:
    return {str(p.relative_to(ws)): p.read_text() for p in (ws / ".git").rglob("*") if p.is_file()}


def _shell(workspace: Path, *commands: str, **backend: Any) -> list[dict[str, Any]]:
    async def fn(b: Any) -> list[dict[str, Any]]:
        return [(await call(b, SHELL, workspace, command=c)).result for c in commands]

    backend.setdefault("masks", DEFAULT_MASKS)
    result: list[dict[str, Any]] = run_with_backend(fn, **backend)
    return result


# -- the six attacks, through the broker on the built-in default policy ----------------


@pytest.mark.parametrize(
    "calls",
    [
        [("read_file", {"path": "envlink"})],  # A9-004
        [("shell_exec", {"command": "cat .env"})],  # G1-022
        [("shell_exec", {"command": "cp id_rsa key.txt"}), ("read_file", {"path": "key.txt"})],
        [
            ("shell_exec", {"command": "ln -s .env notsecret.txt"}),  # G1-024
            ("read_file", {"path": "notsecret.txt"}),
        ],
        [("shell_exec", {"command": "printf '#!/bin/sh\\n' > .git/hooks/pre-commit"})],
        [("shell_exec", {"command": "git config --file .git/config core.hooksPath /tmp/x"})],
    ],
    ids=["A9-004", "G1-022", "G1-023", "G1-024", "G1-009", "G1-010"],
)
def test_corpus_attacks_are_contained_by_the_broker(
    secrets_ws: Path, calls: list[tuple[str, dict[str, Any]]]
) -> None:
    from runtime.broker import SyncBroker

    before = _git_state(secrets_ws)
    outputs: list[str] = []
    with SyncBroker(workspace=secrets_ws) as broker:
        for tool, args in calls:
            result = broker.call({"tool": tool, "arguments": args})
            outputs.append(json.dumps(result.model_dump(mode="json")))
    assert not any(SECRET in out for out in outputs), outputs
    assert _git_state(secrets_ws) == before
    assert not (secrets_ws / ".git" / "hooks" / "pre-commit").exists()
    # The secrets themselves are untouched on the host.
    assert SECRET in (secrets_ws / ".env").read_text()


def test_read_file_through_a_symlink_is_refused_by_name(secrets_ws: Path) -> None:
    from runtime.broker import SyncBroker

    with SyncBroker(workspace=secrets_ws) as broker:
        result = broker.call({"tool": "read_file", "arguments": {"path": "envlink"}})
        plain = broker.call({"tool": "read_file", "arguments": {"path": "sub/notes.txt"}})
    assert result.error is not None
    assert result.error.details["reason"] == "path_denied"
    assert result.error.details["resolved"] == ".env"
    assert plain.success and plain.result["content"] == "plain notes\n"


def test_benign_work_next_to_masked_files(secrets_ws: Path) -> None:
    (out,) = _shell(
        secrets_ws,
        "ls -a | tr '\\n' ' '; cat sub/notes.txt; cat .git/config; "
        "echo new > made.txt && cat made.txt; find . -name notes.txt",
    )
    assert out["exit_code"] == 0, out
    assert ".env" in out["stdout"] and "id_rsa" in out["stdout"]  # names stay visible
    assert "plain notes" in out["stdout"] and "bare = false" in out["stdout"]
    assert "new\n" in out["stdout"] and "./sub/notes.txt" in out["stdout"]
    assert SECRET not in out["stdout"]
    assert (secrets_ws / "made.txt").read_text() == "new\n"


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_status_reads_a_read_only_repository(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".env").write_text(SECRET)
    for path in workspace.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    (out,) = _shell(workspace, "git -c safe.directory='*' status --porcelain; cat .env")
    assert out["exit_code"] == 0, out
    assert "hello.txt" in out["stdout"]
    assert SECRET not in out["stdout"]


# -- what an attacker tries next -------------------------------------------------------


def test_a_mask_cannot_be_moved_linked_removed_or_written(secrets_ws: Path) -> None:
    (out,) = _shell(
        secrets_ws,
        "mv .env moved; ln .env hard; rm -f .env; echo x > .env; cp /dev/null .env; "
        "mv sub/server.pem sub/s.txt; mv .git g2; rm -rf .git; cat .env moved hard; true",
    )
    assert SECRET not in out["stdout"]
    assert "busy" in out["stderr"].lower()  # rename/unlink of a mount point
    assert "cross-device" in out["stderr"].lower()  # link() through a mount point
    for name in ("moved", "hard", "g2", "sub/s.txt"):
        assert not (secrets_ws / name).exists(), name
    assert (secrets_ws / ".env").read_text() == f"TOKEN={SECRET}\n"
    assert (secrets_ws / ".git" / "config").exists()


def test_secret_in_a_case_variant_and_in_a_deep_directory(workspace: Path) -> None:
    deep = workspace / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "tls.KEY").write_text(SECRET)
    (workspace / ".ENV").write_text(SECRET)
    for path in workspace.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    (out,) = _shell(workspace, "cat a/b/c/tls.KEY .ENV; cat hello.txt")
    assert SECRET not in out["stdout"]
    assert out["stdout"] == "hello\n"


def test_files_the_tool_creates_are_its_own_until_the_next_call(workspace: Path) -> None:
    os.chmod(workspace, 0o777)
    first, second = _shell(workspace, "echo mine > .env; cat .env", "cat .env; echo end")
    assert first["stdout"] == "mine\n"  # created by this call: not a secret of the host's
    assert second["stdout"] == "end\n"  # pre-existing for the next call: masked


def test_a_spare_does_not_serve_a_tree_whose_secrets_changed(workspace: Path) -> None:
    """Spares mask the tree when they are forked: one made before a secret appeared must
    be thrown away, not activated."""

    async def fn(b: Any) -> list[str]:
        outs = [(await call(b, SHELL, workspace, command="cat .env; echo ok")).result["stdout"]]
        (workspace / ".env").write_text(SECRET)  # the spare for the next call exists now
        os.chmod(workspace / ".env", 0o666)
        for _ in range(2):
            res = await call(b, SHELL, workspace, command="cat .env; echo ok")
            outs.append(res.result["stdout"])
        # Deleted and re-created: the inode number is often reused at once, and the spare's
        # mount sat on the deleted entry (gone with it).
        for _ in range(2):
            (workspace / ".env").unlink()
            (workspace / ".env").write_text(SECRET)
            os.chmod(workspace / ".env", 0o666)
            res = await call(b, SHELL, workspace, command="cat .env; echo ok")
            outs.append(res.result["stdout"])
        return outs

    outs = run_with_backend(fn, masks=DEFAULT_MASKS, pool=4)
    assert outs == ["ok\n"] * 5, outs


def test_a_spare_does_not_serve_a_re_created_read_only_directory(workspace: Path) -> None:
    os.chmod(workspace, 0o777)

    def fresh_git() -> None:
        shutil.rmtree(workspace / ".git", ignore_errors=True)
        (workspace / ".git").mkdir()
        (workspace / ".git" / "config").write_text("[core]\n")
        os.chmod(workspace / ".git", 0o777)
        os.chmod(workspace / ".git" / "config", 0o666)

    async def fn(b: Any) -> list[int]:
        codes = []
        for _ in range(3):
            fresh_git()  # a spare for this call was forked before: its .git mount is gone
            res = await call(b, SHELL, workspace, command="echo x >> .git/config")
            codes.append(res.result["exit_code"])
        return codes

    fresh_git()
    codes = run_with_backend(fn, masks=DEFAULT_MASKS, pool=4)
    assert all(code != 0 for code in codes), codes
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_signature_pins_what_it_saw(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".env").write_text(SECRET)
    (workspace / ".runtime").mkdir()
    with masks.signature(str(workspace), DEFAULT_MASKS) as a:
        with masks.signature(str(workspace), DEFAULT_MASKS) as same:
            assert a == same
        # Busy state directories (the audit log) do not make a spare stale.
        (workspace / ".runtime" / "audit.db-wal").write_text("x")
        with masks.signature(str(workspace), DEFAULT_MASKS) as busy:
            assert a == busy
        for remake in (
            lambda: ((workspace / ".git").rmdir(), (workspace / ".git").mkdir()),
            lambda: ((workspace / ".env").unlink(), (workspace / ".env").write_text(SECRET)),
        ):
            remake()
            with masks.signature(str(workspace), DEFAULT_MASKS) as after:
                assert a != after
    assert masks.signature(str(workspace / "missing"), DEFAULT_MASKS) != masks.signature(
        str(workspace / "missing"), DEFAULT_MASKS
    )
    assert masks.signature(str(workspace), MaskSpec()) is None


def test_past_the_bound_the_call_fails_closed(workspace: Path) -> None:
    for i in range(60):
        (workspace / f"f{i}.txt").write_text("x")
    (workspace / ".env").write_text(SECRET)

    async def fn(b: Any) -> Any:
        return await call(b, SHELL, workspace, command="cat .env")

    with pytest.raises(SandboxError) as info:
        run_with_backend(fn, masks=MaskSpec(hide=("**/.env",), max_entries=50))
    assert info.value.details["phase"] == "mount_masks"
    assert "more than 50 entries" in info.value.message
    assert SECRET not in info.value.message


def test_many_masked_entries_never_size_a_control_packet(workspace: Path) -> None:
    """10,000 masked files (what one shell call can plant): their list once travelled in
    the clone request and, past the socket's one-packet bound (EMSGSIZE), every later call
    on the tree failed in every broker. Now the child walks the tree itself past a bound,
    and the masks still apply in full, the deepest one too."""
    from runtime.broker import SyncBroker

    d = workspace / "d"
    (d / "x" / "y").mkdir(parents=True)
    for i in range(10_000):
        (d / f"k{i}.pem").touch()
    (d / "x" / "y" / "deep.pem").write_text(SECRET)
    (d / "plain.txt").write_text("plain\n")
    (workspace / "hello.txt").write_text("hello\n")
    with SyncBroker(workspace=workspace) as broker:
        read = broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}})
        command = "e=pem; cat d/x/y/deep.$e; ls d | wc -l"
        cat = broker.call({"tool": "shell_exec", "arguments": {"command": command}})
        listed = broker.call({"tool": "list_files", "arguments": {"path": "d/x"}})
        rm = broker.call({"tool": "shell_exec", "arguments": {"command": "rm -rf d"}})
    assert read.success and read.result["content"] == "hello\n", read.error
    assert cat.success, cat.error
    assert SECRET not in cat.result["stdout"] and cat.result["stdout"].split() == ["10002"]
    assert listed.success, listed.error
    # It runs: what is not masked goes; a masked file cannot be removed from inside.
    assert rm.success, rm.error
    assert not (d / "plain.txt").exists()
    assert (d / "x" / "y" / "deep.pem").read_text() == SECRET


def test_a_long_target_list_is_left_for_the_child_to_walk(workspace: Path) -> None:
    for i in range(2_000):
        (workspace / f"{'k' * 150}{i}.pem").touch()
    (workspace / "one.key").touch()
    spec = MaskSpec(hide=("**/*.pem", "**/*.key"))
    with masks.signature(str(workspace), spec) as sig:  # type: ignore[union-attr]
        assert sig.found is not None and len(sig.found) == 2_001
        assert "targets" not in masks.with_targets(spec.as_plan(), sig, unpinned=True)
    for p in workspace.glob("*.pem"):
        p.unlink()
    with masks.signature(str(workspace), spec) as sig:  # type: ignore[union-attr]
        plan = masks.with_targets(spec.as_plan(), sig, unpinned=True)
        assert [t[0] for t in plan["targets"]] == [["one.key"]]


def test_literal_globs_prune_the_walk(workspace: Path) -> None:
    """``.git/**`` costs a look-up, not a walk: a huge tree elsewhere is not counted."""
    (workspace / ".git").mkdir()
    big = workspace / "node_modules"
    big.mkdir()
    for i in range(80):
        (big / f"m{i}").write_text("x")
    spec = MaskSpec(hide=(".runtime/**",), readonly=(".git/**",), max_entries=10)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        targets = find(fd, spec)
    finally:
        os.close(fd)
    assert [(t.rel, t.action) for t in targets] == [(".git", "readonly")]
    matcher = _Matcher(spec)
    assert not matcher.may_hold_match(("node_modules",))
    assert matcher.may_hold_match((".GIT",))  # case-insensitive, like the glob
    assert _Matcher(DEFAULT_MASKS).may_hold_match(("node_modules", "x"))


def test_the_compiled_globs_are_reused_for_an_equal_spec(workspace: Path) -> None:
    # The fork-server and every call's tool walk the same spec on every call: its globs are
    # compiled once (and inherited by the calls), not once per walk.
    spec = MaskSpec(hide=("**/.env",), readonly=(".git/**",))
    again = MaskSpec.from_plan(spec.as_plan())
    assert masks._matcher(again) is masks._matcher(spec)
    assert masks._matcher(MaskSpec(hide=("**/.npmrc",))) is not masks._matcher(spec)
    (workspace / ".env").write_text(SECRET)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        first, second = find(fd, spec), find(fd, again)
    finally:
        os.close(fd)
    assert [t.rel for t in first] == [t.rel for t in second] == [".env"]


def test_glob_translation_is_shared_with_the_file_toolkit() -> None:
    # The file toolkit builds a GlobSet of the same deny globs in every call's tool process:
    # their translation comes from the cache the fork-server filled for its masks.
    from runtime import _globs

    pattern = "**/translated-once-*.secret"
    _globs.GlobSet([pattern], casefold=True)
    hits = _globs._translate.cache_info().hits
    again = _globs.GlobSet([pattern], casefold=True)
    assert _globs._translate.cache_info().hits >= hits + 2  # each glob, and the alternation
    assert again.match("a/translated-once-1.SECRET") == pattern


def test_the_walk_never_follows_symlinks(workspace: Path) -> None:
    outside = workspace.parent / "outside"
    (outside / ".env").write_text(SECRET)
    (workspace / "linkdir").symlink_to(outside)
    (workspace / "envlink").symlink_to(outside / ".env")
    # A matching symlink is not mounted on (it resolves inside the new root), and one that
    # leads out of the workspace is left alone...
    (workspace / ".env").symlink_to(outside / ".env")
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert find(fd, DEFAULT_MASKS) == []
        # ...but one leading to an unhidden file inside refuses the call: a secret the user
        # saves to .env would land in hello.txt (tests/sandbox/test_mask_links.py).
        (workspace / ".env").unlink()
        (workspace / ".env").symlink_to("hello.txt")
        with pytest.raises(OSError) as info:
            find(fd, DEFAULT_MASKS)
        assert info.value.errno == errno.EXDEV
    finally:
        os.close(fd)


def test_a_symlink_swapped_in_after_the_walk_cannot_redirect_a_mount(workspace: Path) -> None:
    """The mount lands on a descriptor re-opened O_NOFOLLOW and checked to be the inode the
    walk saw: a directory swapped for a symlink (to outside) fails the call closed."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".env").write_text(SECRET)
    outside = workspace.parent / "outside"
    (outside / ".env").write_text("outside")
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        (target,) = find(fd, DEFAULT_MASKS)
        assert target.rel == "sub/.env"
        os.rename(workspace / "sub", workspace / "sub-old")
        (workspace / "sub").symlink_to(outside)
        with pytest.raises(OSError) as info:
            _reopen(fd, target)
        assert info.value.errno == errno.EAGAIN
        # A real directory with a different file at the same name: refused as well.
        (workspace / "sub").unlink()
        (workspace / "sub").mkdir()
        (workspace / "sub" / ".env").write_text("decoy")
        with pytest.raises(OSError):
            _reopen(fd, target)
        # The original back in place: the same inode, so the mount may go there.
        shutil.rmtree(workspace / "sub")
        os.rename(workspace / "sub-old", workspace / "sub")
        os.close(_reopen(fd, target))
    finally:
        os.close(fd)


def test_a_tree_changed_during_the_walk_is_walked_again_then_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rename during the walk could hide a directory from it: a changed directory means
    walk again, and a tree that keeps changing fails the call closed."""
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".env").write_text(SECRET)
    real = os.scandir
    changes = iter(range(1000))

    def racing(fd: int) -> Any:
        it = real(fd)
        n = next(changes)
        if n < limit:
            (workspace / f"new{n}").write_text("x")  # a concurrent call at work
        return it

    monkeypatch.setattr(masks.os, "scandir", racing)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        limit = 1000
        with pytest.raises(OSError) as info:
            masks.find_settled(fd, DEFAULT_MASKS)
        assert info.value.errno == errno.EAGAIN
        assert "changed while" in str(info.value)
        changes, limit = iter(range(1000)), 1  # one change, then quiet: the retry settles
        assert [t.rel for t in masks.find_settled(fd, DEFAULT_MASKS)] == ["sub/.env"]
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any directory")
def test_an_unlistable_directory_fails_closed(workspace: Path) -> None:
    locked = workspace / "locked"
    locked.mkdir()
    os.chmod(locked, 0o311)  # searchable by name, not listable: could hide a secret
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as info:
            find(fd, DEFAULT_MASKS)
        assert info.value.errno == errno.EACCES and "locked" in str(info.value)
    finally:
        os.close(fd)
        os.chmod(locked, 0o755)


# -- mechanism reporting ---------------------------------------------------------------


def test_fingerprint_says_whether_paths_are_masked(workspace: Path) -> None:
    async def fingerprint(b: Any) -> Any:
        return b.fingerprint()

    on = run_with_backend(fingerprint, masks=DEFAULT_MASKS)
    assert "path_masks" in on.mechanisms
    none = run_with_backend(fingerprint)
    assert "path_masks" not in none.mechanisms and "path_masks" not in none.missing
    off = run_with_backend(fingerprint, masks=DEFAULT_MASKS, disable=frozenset({"mountns"}))
    assert "path_masks" in off.missing


def test_without_masks_the_secret_is_readable(secrets_ws: Path) -> None:
    """The control: the same command leaks with no masks, so the tests above test them."""
    (out,) = _shell(secrets_ws, "cat .env", masks=MaskSpec())
    assert SECRET in out["stdout"]


# -- the pruned walk finds exactly what the unpruned one finds -------------------------

_NAMES = ["a", "B", ".env", ".ENV.local", ".git", "k.pem", "id_rsa", "src", "x.key", "hooks"]
_GLOBS = [
    "**/.env",
    "**/.env.*",
    "**/*.pem",
    "**/*.KEY",
    "**/id_rsa*",
    ".git/**",
    "**/.git/**",
    "src/*.pem",
    "a/**/hooks",
    "*/b",
    "**/src/**",
    ".runtime/**",
    "a/B/**",
]


def _reference(root: Path, spec: MaskSpec) -> list[tuple[str, str]] | str:
    """Every entry, whole-path matched, no pruning: what find() must agree with. "refused"
    when a symbolic link on a denied path leads into the tree, unhidden (test_mask_links)."""
    from runtime._globs import GlobSet

    hide, ro = GlobSet(spec.hide, casefold=True), GlobSet(spec.readonly, casefold=True)
    out: list[tuple[str, str]] = []
    links: list[str] = []
    covered: list[str] = []  # links inside hidden directories: on a denied path by place

    def visit(d: Path, rel: str, under_ro: bool) -> None:
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            sub = f"{rel}/{entry.name}" if rel else entry.name
            action = "hide" if hide.match(sub) else "readonly" if ro.match(sub) else None
            if action == "readonly" and under_ro:
                action = None
            if entry.is_symlink():
                action = None
                links.append(sub)
            if action is not None:
                out.append((sub, action))
                if action == "hide":
                    if entry.is_dir(follow_symlinks=False):  # its links (test_mask_links)
                        inner = [p for p in Path(entry.path).rglob("*") if p.is_symlink()]
                        covered.extend(p.relative_to(root).as_posix() for p in inner)
                    continue
            if entry.is_dir(follow_symlinks=False):
                visit(Path(entry.path), sub, under_ro or action == "readonly")

    visit(root, "", False)
    hidden = [rel for rel, action in out if action == "hide"]
    if any(_link_exposes(root, rel, hide, hidden) for rel in links) or any(
        _link_exposes(root, rel, hide, hidden, on_path=True) for rel in covered
    ):
        return "refused"
    return sorted(out)


def _kernel_landing(path: str, hops: int = 0) -> str | None:
    """Where a write through the link at ``path`` lands, by path strings: the target's
    directory part must resolve whole (the kernel walks ``a/..`` only through an existing
    ``a``, unlike ``realpath``'s non-strict mode), its last part is created if missing and
    followed if it is a link. None when the write fails."""
    if hops > 40:
        return None
    target = os.readlink(path)
    full = target if target.startswith("/") else os.path.join(os.path.dirname(path), target)
    head, tail = os.path.split(full)
    try:
        where = os.path.realpath(head or "/", strict=True)
    except OSError:
        return None
    if not os.path.isdir(where):
        return None
    if tail in ("", "."):
        return where
    if tail == "..":
        return os.path.dirname(where)
    landing = os.path.join(where, tail)
    if os.path.islink(landing):
        return _kernel_landing(landing, hops + 1)
    return landing


def _link_exposes(
    root: Path, rel: str, hide: Any, hidden: list[str], *, on_path: bool = False
) -> bool:
    """The rule, by brute force over the test's names and by path strings (the trees here
    hold only relative links inside them): the link at ``rel`` is on a denied path when a
    hide glob matches it, or matches some path below it in a way that depends on its names
    (not when any prefix of any depth would do, as a leading ``**`` allows); it exposes when
    a write through it lands inside the tree, on nothing hidden."""
    import itertools

    probes = [n for k in (1, 2) for n in itertools.product([*_NAMES, "zz"], repeat=k)]

    def absorbed(rest: str) -> bool:
        return all(hide.match("/".join([*(["q"] * depth), rest])) for depth in range(4))

    on_path = (
        on_path
        or hide.match(rel) is not None
        or any(hide.match(f"{rel}/{'/'.join(p)}") and not absorbed("/".join(p)) for p in probes)
    )
    if not on_path:
        return False
    found = _kernel_landing(str(root / rel))
    if found is None:
        return False  # a loop, a missing directory, a file used as one: nothing lands
    landing = Path(found)
    try:
        where = landing.relative_to(root.resolve()).as_posix()
    except ValueError:
        return False  # outside the tree
    if where == ".":
        return True
    if not os.path.lexists(landing) and hide.match(where):
        return False  # hidden by the next walk once written
    return not any(where == h or where.startswith(h + "/") for h in hidden)


@pytest.mark.parametrize("seed", range(40))
def test_pruned_walk_agrees_with_the_whole_walk(tmp_path: Path, seed: int) -> None:
    import random

    rng = random.Random(seed)
    root = tmp_path / "t"
    root.mkdir()
    dirs = [root]
    for _ in range(rng.randint(5, 40)):
        parent = rng.choice(dirs)
        path = parent / rng.choice(_NAMES)
        if os.path.lexists(path) or len(path.relative_to(root).parts) > 4:
            continue
        if rng.random() < 0.5:
            path.mkdir()
            dirs.append(path)
        elif rng.random() < 0.85:
            path.write_text("x")
        else:
            path.symlink_to(_link_target(rng, root))
    globs = rng.sample(_GLOBS, rng.randint(1, 5))
    cut = rng.randint(0, len(globs))
    spec = MaskSpec(hide=tuple(globs[:cut]), readonly=tuple(globs[cut:]))
    assert _find(root, spec) == _reference(root, spec), (globs, cut)


def _link_target(rng: Any, root: Path) -> str:
    """A link's target as tools write them: a sibling's name, a path with ``..`` (inside,
    or out of the tree and back in through its parent), the tree's absolute path, outside,
    or nowhere."""
    name = rng.choice(_NAMES)
    return rng.choice(
        [
            name,
            name,
            f"../{name}",
            f"a/../{name}",
            f"../../t/{name}",
            f"{root}/{name}",
            f"{root}/src/{name}",
            "/dev/null",
            f"missing/{name}",
        ]
    )


# -- kept listings: the walk replays unchanged directories -----------------------------


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the directories the walk lists (``os.scandir`` calls on descriptors: the patch
    is process-wide, and the reference walk lists paths)."""
    calls: list[int] = []
    real = os.scandir

    def counting(fd: Any) -> Any:
        if isinstance(fd, int):
            calls.append(fd)
        return real(fd)

    monkeypatch.setattr(masks.os, "scandir", counting)
    return calls


def _find(root: Path, spec: MaskSpec = DEFAULT_MASKS) -> list[tuple[str, str]] | str:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return sorted((t.rel, t.action) for t in find(fd, spec))
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            return "refused"  # a denied-path link into the tree (test_mask_links)
        raise
    finally:
        os.close(fd)


def _mutate(rng: Any, root: Path) -> None:
    """One change a tool or a concurrent call could make: add, remove, rename, replace a
    directory with a symlink, or touch (which must not matter)."""
    every = [root, *root.rglob("*")]
    dirs = [p for p in every if p.is_dir() and not p.is_symlink()]
    others = [p for p in every if p != root]
    op = rng.choice(["file", "file", "mkdir", "remove", "rename", "symlink", "touch"])
    parent = rng.choice(dirs)
    name = parent / rng.choice(_NAMES)
    if op in ("file", "mkdir") and not os.path.lexists(name):
        if len(name.relative_to(root).parts) <= 4:
            name.mkdir() if op == "mkdir" else name.write_text("x")
    elif op == "remove" and others:
        victim = rng.choice(others)
        if victim.is_dir() and not victim.is_symlink():
            shutil.rmtree(victim)
        elif os.path.lexists(victim):
            victim.unlink()
    elif op == "rename" and others:
        victim = rng.choice(others)
        if os.path.lexists(victim) and not os.path.lexists(name) and victim not in name.parents:
            victim.rename(name)
    elif op == "symlink" and len(dirs) > 1:
        victim = rng.choice(dirs[1:])
        if os.path.lexists(victim):
            shutil.rmtree(victim)
            victim.symlink_to(".")
    elif op == "touch" and others:
        victim = rng.choice(others)
        if os.path.lexists(victim):
            os.utime(victim, (0, 0), follow_symlinks=False)


@pytest.mark.parametrize("seed", range(25))
def test_kept_listings_agree_with_a_fresh_walk_after_every_change(
    tmp_path: Path, seed: int, later: None, listings: list[int]
) -> None:
    import random

    rng = random.Random(seed)
    root = tmp_path / "t"
    root.mkdir()
    for _ in range(rng.randint(5, 30)):
        _mutate(rng, root)
    globs = rng.sample(_GLOBS, rng.randint(1, 5))
    cut = rng.randint(0, len(globs))
    spec = MaskSpec(hide=tuple(globs[:cut]), readonly=tuple(globs[cut:]))
    assert _find(root, spec) == _reference(root, spec)
    listings.clear()
    assert _find(root, spec) == _reference(root, spec)
    assert listings == []  # an unchanged tree is replayed, not listed: the cache is in use
    for _ in range(6):
        for _ in range(rng.randint(1, 3)):
            _mutate(rng, root)
        assert _find(root, spec) == _reference(root, spec), (globs, cut)


def test_a_change_deep_down_relists_only_that_directory(
    workspace: Path, later: None, listings: list[int]
) -> None:
    deep = workspace / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (workspace / "z").mkdir()
    assert _find(workspace) == []
    (deep / ".env").write_text(SECRET)
    listings.clear()
    assert _find(workspace) == [("a/b/c/.env", "hide")]
    assert len(listings) == 1
    (deep / ".env").rename(deep / "plain.txt")
    assert _find(workspace) == []


def test_a_recent_directory_is_never_kept(workspace: Path, listings: list[int]) -> None:
    """The racy rule: a directory changed within RACY_NS of the walk could change again in
    the same timestamp tick without moving its times, so it is listed on every walk."""
    (workspace / "sub").mkdir()
    _find(workspace)
    first = len(listings)
    listings.clear()
    _find(workspace)
    assert len(listings) == first == 2


def test_the_racy_window_boundary(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = os.stat(workspace)
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    for now, kept in ((newest + masks.RACY_NS, False), (newest + masks.RACY_NS + 1, True)):
        masks._matcher.cache_clear()
        monkeypatch.setattr(masks, "_now_ns", lambda now=now: now)
        _find(workspace)
        assert bool(masks._matcher(DEFAULT_MASKS).kept) is kept


def test_nothing_is_kept_on_other_filesystems(
    workspace: Path, later: None, listings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(masks._linux, "fs_magic", lambda fd: 0x6969)  # NFS
    (workspace / "sub").mkdir()
    _find(workspace)
    listings.clear()
    _find(workspace)
    assert len(listings) == 2


def test_kept_listings_count_toward_the_bound(
    workspace: Path, later: None, listings: list[int]
) -> None:
    big, small = workspace / "big", workspace / "small"
    big.mkdir()
    small.mkdir()
    for i in range(40):
        (big / f"f{i}").write_text("x")
    spec = MaskSpec(hide=("**/.env",), max_entries=50)
    assert _find(workspace, spec) == []  # 4 + 40 entries
    for i in range(10):
        (small / f"f{i}").write_text("x")
    listings.clear()
    with pytest.raises(OSError) as info:
        _find(workspace, spec)
    assert info.value.errno == errno.E2BIG
    assert len(listings) == 1  # only `small` was listed; `big` counted from its kept listing


def test_a_kept_directory_replaced_by_a_symlink_is_not_followed(
    workspace: Path, later: None
) -> None:
    (workspace / "sub").mkdir()
    (workspace / "elsewhere").mkdir()
    (workspace / "elsewhere" / ".env").write_text(SECRET)
    assert _find(workspace) == [("elsewhere/.env", "hide")]
    shutil.rmtree(workspace / "elsewhere")
    (workspace / "elsewhere").symlink_to("/tmp")
    assert _find(workspace) == []


_BELOW_A_MOUNT = """
import os, sys
from runtime.backends.sandbox import masks
from runtime.backends.sandbox.masks import MaskSpec, find
ws = sys.argv[1]
os.mkdir(ws + "/mnt")
os.system("mount -t tmpfs tmpfs " + ws + "/mnt")
real, listed = os.scandir, []
masks.os.scandir = lambda fd: (listed.append(fd), real(fd))[1]
now = masks._now_ns
masks._now_ns = lambda: now() + 10_000_000_000
fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
spec = MaskSpec(hide=("**/.env",))
find(fd, spec)
listed.clear()
find(fd, spec)
print(len(listed))
"""


def test_nothing_below_another_mount_is_kept(workspace: Path, later: None) -> None:
    """A filesystem mounted inside the workspace may be of any kind: its directories are
    listed on every walk (here a tmpfs in a mount namespace of the test's own)."""
    out = subprocess.run(
        ["unshare", "-Urm", sys.executable, "-c", _BELOW_A_MOUNT, str(workspace)],
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
    assert out.stdout.split() == ["1"]  # the tmpfs root, listed again; the workspace kept


def test_the_bound_comes_from_the_policy(workspace: Path) -> None:
    """``[paths] mask_max_entries``: a workspace past it fails closed, naming the bound; the
    built-in default is the walk's own default."""
    import re

    from runtime.broker import SyncBroker
    from runtime.policy import Policy, default_policy_path
    from runtime.policy.schema import PathsSection

    assert PathsSection().mask_max_entries == masks.DEFAULT_MAX_ENTRIES
    for i in range(60):
        (workspace / f"f{i}.txt").write_text("x")
    text = default_policy_path().read_text(encoding="utf-8")
    text = re.sub(r"(?m)^\[paths\]$", "[paths]\nmask_max_entries = 50", text)
    policy = Policy.from_toml(text, "<bound 50>")
    with SyncBroker(workspace=workspace, policy=policy) as broker:
        result = broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}})
    assert result.error is not None and result.error.type == "sandbox_error"
    assert "more than 50 entries" in result.error.message
    with SyncBroker(workspace=workspace) as broker:  # the default bound: 50,000
        assert broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}}).success


def test_the_generation_moves_with_the_kept_listings(workspace: Path, later: None) -> None:
    spec = MaskSpec(hide=("**/.gen-test",))
    (workspace / "sub").mkdir()
    start = masks.generation(spec)
    _find(workspace, spec)
    filled = masks.generation(spec)
    assert filled > start
    _find(workspace, spec)
    assert masks.generation(spec) == filled  # replayed: nothing kept anew
    (workspace / "sub" / "new").write_text("x")
    _find(workspace, spec)
    assert masks.generation(spec) > filled
