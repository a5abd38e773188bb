"""Which directories above the masked entries a call that may write must not rename: the
kernel wall against moving a protected entry out from under its glob, derived from the globs.

The masks (``masks``) cover entries, and a mount follows its dentry: in the call, a hidden
file stays hidden wherever its directory goes. The next call's look finds entries by *path*,
though: ``mv config cfg`` when ``config/secrets/**`` is denied leaves ``cfg/secrets/prod.env``,
which no glob matches, for the next call to read (likewise ``tools/hooks/**`` made writable by
``mv tools t``). The kernel refuses to rename a mount point of the caller's mount namespace
(EBUSY: ``vfs_rename``'s ``is_local_mountpoint``) and to rename across mounts (EXDEV). So the
call's child binds chosen directories onto themselves ("pins", ``masks.apply``) before the
tool exists: a pinned directory cannot be renamed, and nothing below it can leave it.

Which ones. With a set of pins, what a tool can still do to a target's path is: keep every
pinned name and the target's own (a mount point too) where they are, and replace each run of
unpinned directories between two of them (or between the workspace's root, itself a mount, and
the first) by any non-empty sequence of names — they move freely inside the mount that holds
them, but cannot leave it, and cannot drop out of the path (the pinned directory or the
target below them cannot move). The pins suffice when one glob of the target's kind (a hide
glob for a hidden entry; hide or read-only for a read-only one) matches every such path. That
is checked one segment at a time with each run as a gap only a ``**`` segment may take, which
is sound (a ``**`` takes any run) and conservative (``*/**`` could take one too: one pin more).
From the deepest directory up, each is left unpinned when the check still holds without it:
``**/.env`` pins nothing, ``config/secrets/**`` pins ``config`` (the target is the directory
``config/secrets``), ``vendor/**/*.pem`` pins only ``vendor`` (inside it a ``.pem`` file can
move anywhere and stay matched), ``a/*/b.key`` pins ``a`` and ``a/x``.

Directories at or below a read-only target are never pinned: a rename there is EROFS, and the
read-only target is a mount point. A call with a read-only workspace needs no pins at all
(every rename is EROFS); ``masks.MaskSpec.pin`` says whether a call may write.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from runtime._globs import compile_segments, star_closure, step_segments

__all__ = ["needed"]

_Segs = tuple[re.Pattern[str] | None, ...]
#: A run of directories the tool may rename: only a ``**`` segment takes it.
_GAP = None


@functools.lru_cache(maxsize=32)
def _globs(hide: tuple[str, ...], readonly: tuple[str, ...]) -> tuple[tuple[_Segs, ...], ...]:
    """The globs that keep a hidden target hidden, and those that keep a read-only one
    protected, one segment at a time (matched case-insensitively, like the masks)."""
    h = tuple(compile_segments(p, casefold=True) for p in hide)
    r = tuple(compile_segments(p, casefold=True) for p in readonly)
    return h, h + r


def _accepts(segs: _Segs, tokens: list[str | None]) -> bool:
    states = star_closure(segs, {0})
    for tok in tokens:
        states = step_segments(segs, states, tok)
        if not states:
            return False
    return len(segs) in states


def _tokens(parts: tuple[str, ...], pinned: set[int], fixed_from: int) -> list[str | None]:
    out: list[str | None] = []
    for i, name in enumerate(parts):
        if i >= fixed_from or i in pinned:
            out.append(name)
        elif not out or out[-1] is not _GAP:
            out.append(_GAP)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _pins_of(
    hide: tuple[str, ...],
    readonly: tuple[str, ...],
    parts: tuple[str, ...],
    action: str,
    fixed_from: int,
) -> tuple[int, ...]:
    """The indices in ``parts`` of the directories to pin for one target (``fixed_from``:
    from this index on, nothing can move). Cached: the fork-server's look finds the same
    targets call after call, and the calls inherit what it computed."""
    globs = _globs(hide, readonly)[0 if action == "hide" else 1]

    def holds(pinned: set[int]) -> bool:
        tokens = _tokens(parts, pinned, fixed_from)
        return any(_accepts(segs, tokens) for segs in globs)

    pinned: set[int] = set()
    if holds(pinned):
        return ()
    pinned = set(range(fixed_from))
    for i in reversed(range(fixed_from)):
        pinned.discard(i)
        if not holds(pinned):
            pinned.add(i)
    return tuple(sorted(pinned))


def needed(
    hide: tuple[str, ...],
    readonly: tuple[str, ...],
    targets: Iterable[tuple[tuple[str, ...], str, bool]],
) -> list[tuple[str, ...]]:
    """The directories (workspace-relative parts) to pin for ``targets`` — each (parts,
    action, is a directory), as ``masks.find`` lists them — once each, parents first (a bind
    of a directory does not carry the mounts below it: the outer one is made first)."""
    listed = list(targets)
    ro_dirs = {parts for parts, action, is_dir in listed if action == "readonly" and is_dir}
    out: set[tuple[str, ...]] = set()
    for parts, action, _ in listed:
        fixed_from = len(parts) - 1
        if ro_dirs:
            for i in range(fixed_from):
                if parts[: i + 1] in ro_dirs:
                    fixed_from = i  # the outermost read-only directory above it
                    break
        for i in _pins_of(hide, readonly, parts, action, fixed_from):
            out.add(parts[: i + 1])
    return sorted(out, key=lambda p: (len(p), p))
