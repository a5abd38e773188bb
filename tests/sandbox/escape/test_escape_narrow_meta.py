"""Narrow write globs bind metadata too: a call whose write globs are narrowed gets its
workspace mounted read-only, with each write prefix bound read-write on top
(``_narrow.write_binds``, ``newroot``'s ``mount_writable``). Landlock governs content and
entries, not a file's mode, owner, times or extended attributes; the mount flag does, for
every program: outside the prefixes chmod, chown, utimes, setxattr and truncate are EROFS.

Each attempt is shown to succeed where the call may write (inside ``out``), and outside it
in a call whose globs are not narrowed, so no assertion passes because the attempt was
broken. This module lives in tests/sandbox: test_unprivileged runs it again as ``rtsbx``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox.masks import MaskSpec
from tests.sandbox.helpers import PROBE_RW, SHELL, call, run_with_backend

pytestmark = [pytest.mark.sandbox, pytest.mark.escape]

#: read = src/** and out/**, write = out/** (what SandboxBackend gets from the policy).
ALLOW = (("src/**", "out/**"), ("out/**",))
WHOLE = (None, None)
EROFS = "Read-only file system"

#: Metadata changes, each a command on the file ``F`` (a shell variable): it prints nothing
#: and exits 0 when it worked. In this order, so that each leaves its mark (mode 000 would
#: stop the others, a truncate would move the time touch set). Extended attributes are not
#: among them: the seccomp filter refuses every call that sets or removes one (ENOSYS),
#: narrowed or not.
CHANGES = {
    "chown": 'chown 1000:1000 "$F"',
    "truncate": 'truncate -s 0 "$F"',
    "touch -d": 'touch -d 2000-01-01 "$F"',
    "chmod": 'chmod 000 "$F"',
}


@pytest.fixture
def tree(workspace: Path) -> Path:
    os.chmod(workspace, 0o777)  # so that plain permissions do not stop what is tried
    for name in ("src", "secrets", "out"):
        (workspace / name).mkdir()
        os.chmod(workspace / name, 0o777)
    for rel in ("secrets/x.txt", "top.txt", "src/a.txt"):
        (workspace / rel).write_text("KEEP\n")
        os.chmod(workspace / rel, 0o666)
    return workspace


def _shell(ws: Path, commands: list[str], allow: Any = ALLOW, **kwargs: Any) -> list[Any]:
    async def fn(backend: Any) -> list[Any]:
        out = []
        for command in commands:
            result = (await call(backend, SHELL, ws, command=command)).result
            out.append((result["exit_code"], result["stdout"], result["stderr"]))
        return out

    return list(run_with_backend(fn, allow=allow, **kwargs))


def _meta(path: Path) -> tuple[Any, ...]:
    st = os.stat(path)
    return (st.st_mode, st.st_uid, st.st_gid, st.st_mtime_ns, st.st_size, os.listxattr(path))


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("disable", [frozenset(), frozenset({"narrow_mounts"})], ids=["on", "off"])
def test_no_metadata_changes_outside_the_write_globs(
    tree: Path, change: str, disable: frozenset[str]
) -> None:
    """The red team's finding: ``chmod 000 secrets/x.txt`` from a call whose write globs were
    ``out/**``. Now EROFS for each kind of change, on a file and on the workspace root. With
    the read-only mount switched off (TEST-ONLY) each attempt works, truncate excepted (that
    is content: Landlock refuses it)."""
    targets: tuple[str, ...] = ("secrets/x.txt", "top.txt", "src/a.txt")
    if change != "truncate":
        targets += (".",)  # the workspace's root (the red team made it 0777)
    before = {rel: _meta(tree / rel) for rel in targets}
    commands = [f"cd /workspace; F={rel}; {CHANGES[change]}" for rel in targets]
    got = _shell(tree, commands, disable=disable)
    for rel, (code, _out, err) in zip(targets, got, strict=True):
        if disable:
            assert (code == 0) is (change != "truncate"), (rel, err)
        else:
            assert code != 0 and EROFS in err, (rel, err)
            assert _meta(tree / rel) == before[rel], rel


def test_the_same_changes_work_inside_the_write_globs(tree: Path) -> None:
    """Inside ``out`` the call may change what it wrote, metadata included; ``out`` itself
    is a mount point but not read-only."""
    script = "cd /workspace && echo made > out/y.txt && F=out/y.txt && " + " && ".join(
        CHANGES.values()
    )
    script += " && chmod 700 out && mkdir out/d && mv out/d out/e && stat -c %a out/y.txt"
    ((code, out, err),) = _shell(tree, [script])
    assert (code, out) == (0, "0\n"), err
    made = tree / "out" / "y.txt"
    st = made.stat()
    assert (st.st_size, st.st_mtime, st.st_mode & 0o777) == (0, 946684800.0, 0)
    assert os.stat(tree / "out").st_mode & 0o777 == 0o700
    assert (tree / "out" / "e").is_dir()


def test_a_call_whose_globs_are_not_narrow_still_changes_anything(tree: Path) -> None:
    """The mechanism matters: with write = ** the same commands change the same files."""
    commands = [f"cd /workspace; F=secrets/x.txt; {c}" for c in CHANGES.values()]
    commands.append("chmod 700 /workspace")
    got = _shell(tree, commands, allow=WHOLE)
    assert [code for code, _, _ in got] == [0] * len(commands), got
    st = os.stat(tree / "secrets" / "x.txt")
    assert (st.st_mode & 0o777, st.st_size, st.st_mtime) == (0, 0, 946684800.0)
    assert os.stat(tree).st_mode & 0o777 == 0o700


def test_stat_outside_the_globs_is_still_allowed(tree: Path) -> None:
    """Neither wall hides an entry's metadata from ``stat`` (the policy README says so)."""
    ((code, out, _err),) = _shell(tree, ["stat -c %a /workspace/secrets/x.txt"])
    assert (code, out) == (0, "666\n")


def test_the_mounts_are_the_wall(tree: Path) -> None:
    """The call's own mount table: the workspace read-only, ``out`` read-write on top; a
    call whose globs are not narrow gains no mount (its workspace is one writable mount)."""
    show = (
        "while read -r _ _ _ _ at opts _; do case $at in /workspace*) echo $at ${opts%%,*};;"
        " esac; done < /proc/self/mountinfo"
    )
    ((_, narrowed, _),) = _shell(tree, [show])
    ((_, whole, _),) = _shell(tree, [show], allow=WHOLE)
    assert narrowed.split("\n")[:2] == ["/workspace ro", "/workspace/out rw"]
    assert whole.split("\n")[0] == "/workspace rw"
    assert len(narrowed.splitlines()) == len(whole.splitlines()) + 1


@pytest.mark.parametrize("target", ["..", "/etc", ".", "secrets", "OUTSIDE"])
def test_a_symlinked_write_prefix_grants_nothing(tree: Path, target: str) -> None:
    """``out`` a symlink: to the workspace's parent (before the new root is pivoted to, the
    path the bind resolves would lead there), to the host's ``/etc``, to a host folder
    outside the workspace, to the workspace's root, to another folder in it. Nothing is
    bound (mountops.c resolves the prefix with RESOLVE_NO_SYMLINKS and RESOLVE_BENEATH): the
    call's mount table has no ``/workspace/out``, and writes and chmod through it fail."""
    outside = tree.parent / "outside"
    (tree / "out").rmdir()
    (tree / "out").symlink_to(outside if target == "OUTSIDE" else target)
    watched = {tree: (".", "secrets", "secrets/x.txt"), outside: (".", "canary.txt")}
    before = {(d, rel): _meta(d / rel) for d, rels in watched.items() for rel in rels}
    got = _shell(
        tree,
        [
            "grep -c ' /workspace/out ' /proc/self/mountinfo",
            "echo x > /workspace/out/planted",
            "chmod 700 /workspace/out/",
            "chmod 000 /workspace/out/x.txt /workspace/out/canary.txt",
        ],
    )
    assert got[0][:2] == (1, "0\n"), got[0]
    assert all(code != 0 for code, _, _ in got[1:]), got
    assert not any((d / "planted").exists() for d in (tree, tree / "secrets", outside))
    assert {key: _meta(key[0] / key[1]) for key in before} == before


@pytest.mark.parametrize(
    ("link", "write"),
    [
        (".", "deep/secrets/**"),
        ("..", "deep/workspace/secrets/**"),  # the new root's /workspace, before the pivot
        ("/tmp/workspace", "deep/secrets/**"),  # the workspace's path before the pivot
    ],
)
def test_a_symlink_on_the_way_to_a_write_prefix_grants_nothing(
    tree: Path, link: str, write: str
) -> None:
    """``deep`` a symlink, the write prefix below it: followed, each would bind ``secrets``
    writable (the bind is made before the pivot, where ``/tmp/workspace`` is the
    workspace). Resolved with RESOLVE_NO_SYMLINKS and RESOLVE_BENEATH, nothing is bound."""
    (tree / "deep").symlink_to(link)
    before = _meta(tree / "secrets" / "x.txt")
    got = _shell(
        tree,
        ["chmod 000 /workspace/secrets/x.txt"],
        allow=(("**",), (write,)),
    )
    assert got[0][0] != 0 and EROFS in got[0][2], got[0]
    assert _meta(tree / "secrets" / "x.txt") == before


def test_a_file_prefix_is_bound_alone(tree: Path) -> None:
    """``write = ["notes.txt"]``: that file (a regular file, no symlink) is writable, metadata
    included; its siblings are not."""
    (tree / "notes.txt").write_text("a\n")
    os.chmod(tree / "notes.txt", 0o666)
    got = _shell(
        tree,
        [
            "echo b >> /workspace/notes.txt && chmod 600 /workspace/notes.txt",
            "chmod 600 /workspace/top.txt",
        ],
        allow=(None, ("notes.txt",)),
    )
    assert got[0][0] == 0, got[0]
    assert got[1][0] != 0 and EROFS in got[1][2]
    assert (tree / "notes.txt").read_text() == "a\nb\n"
    assert os.stat(tree / "notes.txt").st_mode & 0o777 == 0o600
    assert os.stat(tree / "top.txt").st_mode & 0o777 == 0o666


def test_masks_inside_a_write_prefix_still_hold(tree: Path) -> None:
    """The masks are mounted after the writable bind, on top of it: a denied file inside
    ``out`` stays hidden, a deny_write one read-only (content and metadata), and the pin
    above a denied folder still stops its rename."""
    (tree / "out" / "secret.env").write_text("KEY=CANARY\n")
    (tree / "out" / "locked").mkdir()
    (tree / "out" / "locked" / "f").write_text("KEEP\n")
    (tree / "out" / "config" / "secrets").mkdir(parents=True)
    (tree / "out" / "config" / "secrets" / "prod.env").write_text("KEY=CANARY\n")
    for path in (tree / "out").rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    spec = MaskSpec(hide=("out/secret.env", "out/config/secrets/**"), readonly=("out/locked/**",))
    locked = _meta(tree / "out" / "locked" / "f")
    got = _shell(
        tree,
        [
            "cat /workspace/out/secret.env",
            "echo x > /workspace/out/locked/f",
            "chmod 000 /workspace/out/locked/f",
            "mv /workspace/out/config /workspace/out/cfg",
            "echo ok > /workspace/out/ok.txt && chmod 600 /workspace/out/ok.txt",
        ],
        masks=spec,
    )
    assert got[0][:2] == (0, "")
    assert got[1][0] != 0 and got[2][0] != 0 and EROFS in got[2][2]
    assert got[3][0] != 0 and (tree / "out" / "config" / "secrets" / "prod.env").exists()
    assert got[4][0] == 0, got[4]
    assert _meta(tree / "out" / "locked" / "f") == locked
    assert (tree / "out" / "secret.env").read_text() == "KEY=CANARY\n"


def test_a_pin_above_a_write_prefix_does_not_cover_it(tree: Path) -> None:
    """``work/*/k.key`` denied pins ``work`` and ``work/out`` (a rename there would carry a key
    out of its glob). A pin is a clone of its folder without the mounts below it: mounted
    over ``work`` it would cover the writable ``work/out`` with the read-only workspace. Such
    pins are left out (``newroot._unshadowing``): outside the binds no rename is possible at
    all, and nothing leaves a bind."""
    (tree / "work" / "out").mkdir(parents=True)
    (tree / "work" / "out" / "k.key").write_text("KEY=CANARY\n")
    for path in (tree / "work", tree / "work" / "out"):
        os.chmod(path, 0o777)
    got = _shell(
        tree,
        [
            "echo ok > /workspace/work/out/new.txt",
            "cat /workspace/work/out/k.key",
            "mv /workspace/work /workspace/w2",
        ],
        allow=(("work/**",), ("work/out/**",)),
        masks=MaskSpec(hide=("work/*/k.key",)),
    )
    assert got[0][0] == 0, got[0]
    assert got[1][:2] == (0, "")
    assert got[2][0] != 0 and (tree / "work" / "out" / "k.key").exists()
    assert (tree / "work" / "out" / "new.txt").read_text() == "ok\n"


def test_a_python_tool_that_is_not_the_toolkit_is_bound_too(tree: Path) -> None:
    """A Python tool that is not the built-in toolkit (a folder tool's code) gets the same
    read-only workspace: its own chmod of a file outside ``out`` is EROFS."""

    async def fn(backend: Any) -> list[Any]:
        return [
            (await call(backend, PROBE_RW, tree, action="chmod", rel=True, path=p)).result
            for p in ("top.txt", "out")
        ]

    outside, inside = run_with_backend(fn, allow=ALLOW)
    assert (outside["ok"], outside.get("error")) == (False, "EROFS")
    assert inside["ok"] is True
    assert os.stat(tree / "top.txt").st_mode & 0o777 == 0o666


#: The red team's policy (finding K2) with the write glob in each spelling it tried.
_K2_POLICY = """
default = "deny"
[categories]
file = "allow"
shell = "allow"
[paths]
read = ["**"]
write = ["{write}"]
deny = [".runtime/**", "**/.env", "{deny}"]
"""


@pytest.mark.parametrize("write", ["out/**", "./out/**", "/workspace/out/**", "out//./**"])
def test_every_spelling_of_a_write_glob_narrows_the_mounts(tree: Path, write: str) -> None:
    """``write = ["./out/**"]`` (or ``/workspace/out/**``) left the whole workspace one
    writable mount: the sandbox read the glob's empty literal head as "anywhere", and
    ``touch /workspace/pub/evil`` or ``echo x > ../pub/evil2`` from ``out`` wrote outside
    it. Loaded from the policy text as the broker loads it, every spelling now gives the
    read-only workspace with ``out`` bound writable; a dotted deny glob masks its folder."""
    from runtime.policy import Policy
    from runtime.policy.paths import allow_globs, mask_globs

    (tree / "pub").mkdir()
    os.chmod(tree / "pub", 0o777)
    paths = Policy.from_toml(_K2_POLICY.format(write=write, deny="./secrets/**")).document.paths
    hide, readonly = mask_globs(paths)
    show = (
        "while read -r _ _ _ _ at opts _; do case $at in /workspace*) echo $at ${opts%%,*};;"
        " esac; done < /proc/self/mountinfo"
    )
    got = _shell(
        tree,
        [
            "cd /workspace/out && touch /workspace/pub/evil; echo x > ../pub/evil2",
            "cd /workspace/out && echo made > w.txt && chmod 600 w.txt",
            show,
            "cat /workspace/secrets/x.txt",
        ],
        allow=allow_globs(paths),
        masks=MaskSpec(hide=hide, readonly=readonly),
    )
    assert got[0][0] != 0 and EROFS in got[0][2], got[0]
    assert sorted(os.listdir(tree / "pub")) == []
    assert got[1][0] == 0, got[1]
    assert (tree / "out" / "w.txt").read_text() == "made\n"
    assert got[2][1].split("\n")[:2] == ["/workspace ro", "/workspace/out rw"], got[2]
    assert got[3][:2] != (0, "KEEP\n"), got[3]
