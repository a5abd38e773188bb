"""Fuzzing path resolution (runtime/toolkit_fs.py) with hostile paths and symlink graphs
built on disk. Property: a path is refused, or the file opened is a file inside the
workspace, identified by (st_dev, st_ino) — never the canary outside, whatever the links say.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

toolkit_fs = pytest.importorskip("runtime.toolkit_fs")
from runtime.errors import ToolFailed  # noqa: E402

Workspace = toolkit_fs.Workspace

NAMES = ["a", "b", "d", "l1", "l2", "l3", "f.txt"]
SEGMENTS = [
    "..",
    ".",
    "",
    "a",
    "b",
    "d",
    "l1",
    "l2",
    "l3",
    "f.txt",
    "secret",
    "outside",
    "\uff0e\uff0e",
    "\u2025",
    "%2e%2e",
    "..\\..",
    "...",
    "..;",
    "\x00",
    "a\x00b",
    "\n",
    "proc",
    "self",
    "root",
    "/",
    "//",
    "\u202e",
    ".\u0307.",
]


def _targets(outside: str, ws: str) -> list[str]:
    return [
        f"{outside}/secret",
        outside,
        "../outside/secret",
        "../outside",
        "..",
        ".",
        "/",
        "l1",
        "l2",
        "l3",
        "d",
        "d/f.txt",
        "f.txt",
        "missing",
        f"{ws}/f.txt",
        "/workspace/f.txt",
        "/proc/self/root" + outside + "/secret",
        "/proc/self/cwd",
        "../../..",
        "d/../..",
    ]


@st.composite
def trees(draw):
    links = draw(
        st.lists(
            st.tuples(st.sampled_from(NAMES), st.integers(0, 19)),
            max_size=6,
            unique_by=lambda t: t[0],
        )
    )
    segs = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6))
    absolute = draw(st.sampled_from(["", "/", "/workspace/", "WS/", "OUT/", "/proc/self/root"]))
    return links, segs, absolute


def _build(tmp: Path, links):
    ws, outside = tmp / "ws", tmp / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("CANARY\n")
    (ws / "d").mkdir()
    (ws / "d/f.txt").write_text("inside d\n")
    (ws / "f.txt").write_text("inside\n")
    targets = _targets(str(outside), str(ws))
    for name, t in links:
        p = ws / name
        if p.exists() or p.is_symlink():
            continue
        os.symlink(targets[t], p)
    return ws, outside


def _inside_inodes(ws: Path) -> set[tuple[int, int]]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(ws):  # never follows links
        for n in dirnames + filenames:
            st_ = os.lstat(os.path.join(dirpath, n))
            if stat.S_ISREG(st_.st_mode) or stat.S_ISDIR(st_.st_mode):
                found.add((st_.st_dev, st_.st_ino))
    st_ = os.stat(ws)
    found.add((st_.st_dev, st_.st_ino))
    return found


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees())
def test_refused_or_the_opened_file_is_inside(tree):
    links, segs, absolute = tree
    with tempfile.TemporaryDirectory() as tmp:
        ws, outside = _build(Path(tmp), links)
        prefix = absolute.replace("WS/", f"{ws}/").replace("OUT/", f"{outside}/")
        path = prefix + "/".join(segs)
        canary = os.stat(outside / "secret")
        inside = _inside_inodes(ws)
        with Workspace(ws) as w:
            try:
                parts = w.parts(path)
                fd, st_ = w.open_file(parts)
            except ToolFailed:
                return
            with fd:
                opened = os.fstat(fd.fd)
                assert (opened.st_dev, opened.st_ino) == (st_.st_dev, st_.st_ino)
                assert (opened.st_dev, opened.st_ino) != (canary.st_dev, canary.st_ino), path
                assert (opened.st_dev, opened.st_ino) in inside, path
                real = os.readlink(f"/proc/self/fd/{fd.fd}")
                assert real == str(ws) or real.startswith(str(ws) + "/"), (path, real)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.binary(min_size=1, max_size=32))
def test_writes_never_land_outside(tree, data):
    links, segs, absolute = tree
    with tempfile.TemporaryDirectory() as tmp:
        ws, outside = _build(Path(tmp), links)
        prefix = absolute.replace("WS/", f"{ws}/").replace("OUT/", f"{outside}/")
        path = prefix + "/".join(segs)
        before = sorted(os.listdir(outside)), (outside / "secret").read_bytes()
        with Workspace(ws) as w:
            try:
                parts = w.parts(path, allow_root=False)
                written = w.atomic_write(parts, iter([data]))
            except ToolFailed:
                written = None
            if written is not None:
                # a write that succeeded landed inside: the file it names holds the data
                fd, _ = w.open_file(parts)
                with fd:
                    assert os.pread(fd.fd, len(data) + 1, 0) == data
        assert (sorted(os.listdir(outside)), (outside / "secret").read_bytes()) == before, path
        assert sorted(os.listdir(Path(tmp))) == ["outside", "ws"], path


def test_the_property_is_not_vacuous(tmp_path):
    # the same harness opens and writes ordinary inside paths, and refuses a link outside
    ws, _ = _build(tmp_path, [("l1", 0), ("l2", 12)])
    with Workspace(ws) as w:
        fd, _ = w.open_file(w.parts("d/f.txt"))
        fd.close()
        fd, _ = w.open_file(w.parts("l2"))  # l2 -> f.txt, inside
        fd.close()
        assert w.atomic_write(w.parts("new.txt"), iter([b"x"])) == 1
        with pytest.raises(ToolFailed):
            w.open_file(w.parts("l1"))  # l1 -> the canary
    assert (ws / "new.txt").read_bytes() == b"x"


# -- the policy's path check (lexical, the broker's early refusal) ---------------------------

policy_mod = pytest.importorskip("runtime.policy")


@pytest.fixture(scope="module")
def read_decision():
    from runtime.catalogue import Catalogue
    from runtime.models import ToolCall

    policy = policy_mod.Policy.default()
    specs = {n: Catalogue().get(n) for n in ("read_file", "write_file")}

    def decide(tool: str, path: str) -> str:
        args = {"path": path} if tool == "read_file" else {"path": path, "content": "x"}
        return str(policy.decide(ToolCall(tool=tool, arguments=args), specs[tool]).action)

    return decide


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["", "/", "/workspace/", "/etc/", "/proc/self/root/"]),
    st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6),
    st.sampled_from(["read_file", "write_file"]),
)
def test_policy_never_allows_a_lexical_escape(read_decision, prefix, segs, tool):
    path = prefix + "/".join(segs)
    if read_decision(tool, path) != "allow":
        return
    rel = path
    if rel.startswith("/workspace/") or rel == "/workspace":
        rel = rel[len("/workspace") :].lstrip("/")
    assert not rel.startswith("/"), path
    depth = 0
    for comp in rel.split("/"):
        if comp == "..":
            depth -= 1
            assert depth >= 0, path
        elif comp not in ("", "."):
            depth += 1
    # and the secrets the default policy denies are never allowed, in any spelling
    norm = [c for c in rel.split("/") if c not in ("", ".")]
    assert not (norm and norm[-1] in (".env", "id_rsa")), path
