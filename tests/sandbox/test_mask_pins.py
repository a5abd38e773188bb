"""Which directories a writing call pins (``_pins``), derived from the globs: the shapes the
policy uses, a brute-force check that every path the pins still allow stays matched, and the
pins travelling with a look (``masks.signature``) and a walk (``masks.find_settled``)."""

from __future__ import annotations

import errno
import itertools
import os
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime._globs import GlobSet
from runtime.backends.sandbox import _pins, masks
from runtime.backends.sandbox.masks import MaskSpec

pytestmark = [pytest.mark.sandbox]


@pytest.mark.parametrize(
    ("hide", "readonly", "target", "action", "pins"),
    [
        # A '**/name' glob matches wherever the entry's directories go: nothing to pin.
        (("**/.env",), (), "a/b/.env", "hide", []),
        (("**/*.pem",), (), "node_modules/x/y/k.pem", "hide", []),
        (("**/.env",), (), ".env", "hide", []),
        # Anchored: every directory on the way (here the target is 'config/secrets').
        (("config/secrets/**",), (), "config/secrets", "hide", ["config"]),
        (("a/b/c/**",), (), "a/b/c", "hide", ["a", "a/b"]),
        (("a/*/b.key",), (), "a/x/b.key", "hide", ["a", "a/x"]),
        # Partly anchored: the pin's own mount keeps what is below it inside (EXDEV).
        (("vendor/**/*.pem",), (), "vendor/a/b/x.pem", "hide", ["vendor"]),
        (("**/secrets/*.env",), (), "a/b/secrets/p.env", "hide", ["a/b/secrets"]),
        (("*/secret.key",), (), "a/secret.key", "hide", ["a"]),
        # Read-only targets: a hide glob keeps one protected too.
        ((), ("tools/hooks/**",), "tools/hooks", "readonly", ["tools"]),
        (("**/hooks",), ("tools/hooks/**",), "tools/hooks", "readonly", []),
        ((), (".git/**", "**/.git/**"), "sub/.git", "readonly", []),
        # ... but a read-only glob never keeps a hidden one hidden.
        (("cfg/k",), ("**/k",), "cfg/k", "hide", ["cfg"]),
        # Case-insensitive, like the masks.
        (("Config/**",), (), "CONFIG/x/y", "hide", ["CONFIG"]),
    ],
)
def test_pins_derived_from_the_glob(
    hide: tuple[str, ...], readonly: tuple[str, ...], target: str, action: str, pins: list[str]
) -> None:
    parts = tuple(target.split("/"))
    got = _pins.needed(hide, readonly, [(parts, action, False)])
    assert ["/".join(p) for p in got] == pins


def test_pins_once_each_parents_first_and_none_below_a_read_only_target() -> None:
    hide = ("a/b/**/*.key", "a/*/c/d.pem", "ro/x/**/k.pem")
    readonly = ("ro/x/**",)
    targets = [
        (("a", "b", "q", "1.key"), "hide", False),
        (("a", "b", "r", "s", "2.key"), "hide", False),
        (("a", "b", "c", "d.pem"), "hide", False),
        (("ro", "x"), "readonly", True),
        (("ro", "x", "y", "k.pem"), "hide", False),  # below a read-only mount: EROFS
    ]
    got = ["/".join(p) for p in _pins.needed(hide, readonly, targets)]
    assert got == ["a", "ro", "a/b", "a/b/c"]


# -- soundness, by brute force: what the pins allow keeps the target matched -------------

_NAMES = ["a", "b", "k.pem", ".env", "x"]
_SEGMENTS = ["**", "*", "a", "b", "*.pem", ".env", "x", "[ab]"]


def _relocations(parts: tuple[str, ...], pinned: set[int]) -> list[str]:
    """Every path the target can reach, with each run of unpinned directories replaced by
    1-2 names from a small alphabet (as a tool's renames inside the enclosing mount can)."""
    runs: list[list[tuple[str, ...]]] = []
    fixed: list[str] = []
    out_shape: list[object] = []
    i = 0
    n = len(parts)
    while i < n:
        if i == n - 1 or i in pinned:
            out_shape.append(parts[i])
            fixed.append(parts[i])
            i += 1
            continue
        j = i
        while j < n - 1 and j not in pinned:
            j += 1
        choices = [(x,) for x in _NAMES] + [(x, y) for x in _NAMES[:3] for y in _NAMES[:3]]
        runs.append(choices)
        out_shape.append(len(runs) - 1)
        i = j
    paths = []
    for combo in itertools.product(*runs) if runs else [()]:
        path: list[str] = []
        for item in out_shape:
            path.extend(combo[item] if isinstance(item, int) else [item])
        paths.append("/".join(path))
    return paths


# No example database: as the unprivileged user the worktree is not writable (a warning,
# an error under filterwarnings).
@settings(max_examples=300, deadline=None, database=None)
@given(
    glob=st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=4),
    parts=st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4),
)
def test_every_path_the_pins_allow_is_still_matched(glob: list[str], parts: list[str]) -> None:
    pattern = "/".join(glob)
    target = tuple(parts)
    if GlobSet([pattern], casefold=True).match("/".join(target)) is None:
        return  # not a target
    pins = _pins.needed((pattern,), (), [(target, "hide", False)])
    pinned = {len(p) - 1 for p in pins}
    matcher = GlobSet([pattern], casefold=True)
    for path in _relocations(target, pinned):
        assert matcher.match(path) is not None, (pattern, target, pins, path)


# -- the pins in a look and a walk ----------------------------------------------------------


@pytest.fixture
def pinned_ws(workspace: Path) -> Path:
    (workspace / "config" / "secrets").mkdir(parents=True)
    (workspace / "config" / "secrets" / "prod.env").write_text("k")
    (workspace / "x.pem").write_text("k")
    return workspace


def test_a_look_pins_only_for_a_writing_call(pinned_ws: Path) -> None:
    spec = MaskSpec(hide=("config/secrets/**", "**/*.pem"))
    with masks.signature(str(pinned_ws), spec) as ro:
        assert ro.key is not None
        assert sorted((t.rel, t.action) for t in ro.key) == [
            ("config/secrets", "hide"),
            ("x.pem", "hide"),
        ]
    with masks.signature(str(pinned_ws), replace(spec, pin=True)) as rw:
        assert rw.key is not None
        pin = rw.key[-1]
        st_ = os.stat(pinned_ws / "config")
        assert (pin.rel, pin.action, pin.dev, pin.ino) == ("config", "pin", st_.st_dev, st_.st_ino)
        assert rw.found == rw.key
        # The stamp tells a replaced directory apart though the hidden entry is the same.
        (pinned_ws / "config").rename(pinned_ws / "old")
        (pinned_ws / "config").mkdir()
        (pinned_ws / "old" / "secrets").rename(pinned_ws / "config" / "secrets")
        with masks.signature(str(pinned_ws), replace(spec, pin=True)) as later:
            assert later != rw
            assert [t for t in later.key or () if t.action != "pin"] == [
                t for t in rw.key if t.action != "pin"
            ]
    # Not compared: both kinds of call share one matcher and its kept listings.
    assert replace(spec, pin=True) == spec
    assert MaskSpec.from_plan(replace(spec, pin=True).as_plan()).pin is True


def test_a_walk_of_its_own_pins_too(pinned_ws: Path) -> None:
    spec = MaskSpec(hide=("config/secrets/**",), pin=True)
    fd = os.open(pinned_ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        got = [(t.rel, t.action) for t in masks.find_settled(fd, spec)]
    finally:
        os.close(fd)
    assert got == [("config/secrets", "hide"), ("config", "pin")]


def test_past_the_bound_a_writing_call_fails_closed(
    pinned_ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("a", "b"):
        (pinned_ws / name).mkdir()
        (pinned_ws / name / "k.key").write_text("k")
    spec = MaskSpec(hide=("*/k.key",), pin=True)
    monkeypatch.setattr(masks, "MAX_PINS", 1)
    fd = os.open(pinned_ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError, match="directories pinned") as info:
            masks.find_settled(fd, spec)
        assert info.value.errno == errno.E2BIG
        # A call that cannot write needs none: unaffected.
        assert len(masks.find_settled(fd, replace(spec, pin=False))) == 2
    finally:
        os.close(fd)
    with masks.signature(str(pinned_ws), spec) as sig:
        assert sig.key is None  # no spare is reused; the call's own child fails closed
