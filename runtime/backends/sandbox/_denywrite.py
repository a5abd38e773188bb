"""What a call created on a path ``paths.deny_write`` covers: found when the call has ended,
moved aside before its result is returned.

The masks (``masks``) bind every *existing* match of a ``deny_write`` glob read-only; a
match that does not exist yet — ``.git/**`` in a workspace with no ``.git``, ``**/.git/**``
below any directory — has nothing to bind, and Landlock grants by hierarchy, not by name.
A call could create it, hooks and config and all, and the user's own ``git`` would later
run what it planted (``core.fsmonitor``, ``core.hooksPath``, a hook): code on the host.

No wall at creation exists on this kernel without touching the user's tree: a mount needs
an existing mount point (the name would have to be created in the workspace on the host);
Landlock cannot refuse one name in a directory whose other entries the call may create;
seccomp sees path pointers, not paths (a check of them races); an overlay over the
workspace forbids the host's concurrent changes to its layers and changes every inode's
device. So the fork-server checks after the call instead (benchmarks/SANDBOX.md, tenth
round):

* before the call, its look (``masks.signature``) records what exists on a denied path:
  every target's identity (``st_dev``, ``st_ino``; the signature's descriptors pin the
  inodes, so a number cannot come back on an entry the call makes) and every link a
  ``deny_write`` glob matches (a link at ``.git`` is a repository for ``git`` too);
* when the call's pid 1 is reaped — however it ended: result, error, early exit, timeout,
  kill; every process of its pid namespace is gone by then — :func:`sweep` looks again (the
  same watched walk, so a quiet tree costs a few system calls) and every ``deny_write``
  match, or link to one, whose identity is new is renamed in place to
  ``<name>.quarantined-<call>`` (``renameat2(RENAME_NOREPLACE)`` from a parent opened
  component by component ``O_NOFOLLOW``, after checking the name still holds the inode
  found). A new directory the masks hide is searched for matches too (the look does not
  descend into hidden directories);
* the exit report names what was moved, and the broker turns it into the call's error
  (``policy_denied``, :class:`runtime.errors.DeniedPathWritten`) with the paths in its
  details and in the audit record's usage.

Why in place, not under the state directory: a concurrent call whose working directory is
inside the new ``.git`` would follow it there, and ``..`` from it would reach the broker's
state (``.runtime/audit.db``), which every call's mounts hide by name only. Renamed in the
same directory it stays where that call could reach it anyway, and a name that git never
reads (``.git.quarantined-…``) plants nothing. A rename cannot cross filesystems either.

What this does not cover (SANDBOX.md, known gaps): while the call runs, the entry exists,
and a host process using it *then* (an editor's git integration polling the workspace)
can run what was planted; a call that creates and removes it within its run leaves nothing
to find; an entry the user creates on a denied path while a call runs is moved too (it
cannot be told from the call's); a best-effort sandbox without a pid namespace may leave
processes writing after the sweep.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import NamedTuple

from runtime._fsio import renameat2_noreplace
from runtime.backends.sandbox import masks

__all__ = ["Baseline", "Swept", "baseline", "sweep"]

_SUFFIX = ".quarantined-"
_ATTEMPTS = 3
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Characters a call's tag keeps in the new name (the rest become ``_``).
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: Names tried for one entry before giving up (``.quarantined-c1``, ``-c1-2``, …).
_NAMES = 100


class Baseline:
    """What existed on a denied path when the fork-server looked, just before one call.

    ``known``: (st_dev, st_ino) of every mask target and of every link a ``deny_write``
    glob matched. ``state``: the runtime's state directories that were directories then
    (hidden in the call; what appears in them is the broker's). ``pins``: the look's
    signature, kept for its descriptors (the targets' inodes stay allocated)."""

    __slots__ = ("known", "pins", "root", "spec", "state", "workspace")

    def __init__(
        self,
        workspace: str,
        spec: masks.MaskSpec,
        known: frozenset[tuple[int, int]],
        state: tuple[str, ...],
        *,
        pins: object = None,
        root: tuple[int, int] | None = None,
    ) -> None:
        self.workspace = workspace
        self.spec = spec
        self.known = known
        self.state = state
        self.pins = pins
        #: (st_dev, st_ino) of the workspace directory the call was given: a directory put
        #: at its path meanwhile was never the call's to write, and is not checked.
        self.root = root


class Swept(NamedTuple):
    """What :func:`sweep` did: the entries moved (old, new workspace-relative paths), and
    why the check could not finish (None when it did)."""

    moved: tuple[tuple[str, str], ...] = ()
    error: str | None = None


def baseline(
    workspace: str | None,
    spec: masks.MaskSpec,
    sig: object,
    state_dirs: tuple[str, ...],
) -> Baseline | None:
    """The record :func:`sweep` compares with, from the look ``sig`` (``masks.signature``)
    made just before a call that may write ``workspace``. None when ``spec`` denies no
    writes. Raises OSError when the tree cannot be looked at: the call must not run, since
    nothing it creates could then be told from what was there."""
    if not workspace or not spec.readonly:
        return None
    found: tuple[masks.MaskTarget, ...] | None = None
    links: frozenset[tuple[int, int]] = frozenset()
    if isinstance(sig, masks.Signature) and sig.found is not None:
        found, links = sig.found, sig.ro_links
    else:
        # The look refused the tree (a linked hidden file, a denied-path link: the call's
        # own set-up refuses it too) or raced a concurrent call: walked again, leniently.
        found, links = _lenient(workspace, spec)
    # A pinned directory (``masks.pinned``) is not a denied path: it vouches for nothing.
    known = frozenset({(t.dev, t.ino) for t in found if t.action != "pin"} | links)
    top = os.stat(workspace)
    state: list[str] = []
    for name in state_dirs:
        try:
            if stat.S_ISDIR(os.stat(os.path.join(workspace, name), follow_symlinks=False).st_mode):
                state.append(name)
        except OSError:
            pass
    return Baseline(workspace, spec, known, tuple(state), pins=sig, root=(top.st_dev, top.st_ino))


def _lenient(
    workspace: str, spec: masks.MaskSpec
) -> tuple[tuple[masks.MaskTarget, ...], frozenset[tuple[int, int]]]:
    root = os.open(workspace, _DIR_FLAGS)
    try:
        for attempt in range(_ATTEMPTS):
            paths: list[tuple[str, ...]] = []
            try:
                targets = masks.find(
                    root, spec, host=workspace, watch=True, ro_links=paths, lenient=True
                )
                return tuple(targets), masks.link_identities(root, paths)
            except OSError as exc:
                if exc.errno != errno.EAGAIN or attempt == _ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        os.close(root)


def sweep(base: Baseline, tag: str) -> Swept:
    """Find what the call that ``base`` was taken for created on a ``deny_write`` path, and
    rename each such entry in place (``<name>.quarantined-<tag>``). Run once the call's
    processes are all gone. Never raises: what it could not do is in ``Swept.error``."""
    try:
        root = os.open(base.workspace, _DIR_FLAGS)
    except OSError as exc:
        # The workspace itself is gone or replaced: nothing of it is left to check.
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return Swept()
        return Swept(error=f"cannot open the workspace: {exc.strerror or exc}")
    moved: list[tuple[str, str]] = []
    try:
        st = os.fstat(root)
        if base.root is not None and (st.st_dev, st.st_ino) != base.root:
            return Swept()
        safe_tag = _UNSAFE.sub("_", tag)[:64] or "call"
        for attempt in range(_ATTEMPTS):
            try:
                fresh = _created(root, base)
                for parts, ident in fresh:
                    moved.append(_quarantine(root, parts, ident, safe_tag))
                return Swept(tuple(moved))
            except OSError as exc:
                if exc.errno == errno.EAGAIN and attempt < _ATTEMPTS - 1:
                    continue  # a concurrent call changed the tree under the walk: again
                return Swept(tuple(moved), _why(exc))
        raise AssertionError("unreachable")  # pragma: no cover
    finally:
        os.close(root)


def _why(exc: OSError) -> str:
    return str(exc.strerror or exc) if exc.filename is None else f"{exc.filename}: {exc.strerror}"


def _created(root: int, base: Baseline) -> list[tuple[tuple[str, ...], tuple[int, int]]]:
    """The new ``deny_write`` matches (and links), outermost only, parents first."""
    paths: list[tuple[str, ...]] = []
    targets = masks.find(
        root, base.spec, host=base.workspace, watch=True, ro_links=paths, lenient=True
    )
    out: list[tuple[tuple[str, ...], tuple[int, int]]] = []
    budget = [base.spec.max_entries]
    for target in targets:
        ident = (target.dev, target.ino)
        if ident in base.known or target.parts[0] in base.state:
            continue
        if target.action == "readonly":
            out.append((target.parts, ident))
        elif target.is_dir:
            # A hidden directory the call made: the look never enters one, and what is in
            # it is writable by the call (its mask is made only for the next call).
            out.extend(_inside_hidden(root, target.parts, base.spec, budget))
    for parts in paths:
        if parts[0] in base.state:
            continue
        parent = _open_parent(root, parts)
        try:
            st = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise _gone(parts) from None
        finally:
            os.close(parent)
        ident = (st.st_dev, st.st_ino)
        if stat.S_ISLNK(st.st_mode) and ident not in base.known:
            out.append((parts, ident))
    out.sort(key=lambda item: item[0])
    outer: list[tuple[tuple[str, ...], tuple[int, int]]] = []
    for parts, ident in out:
        if not any(parts[: len(p)] == p for p, _ in outer):
            outer.append((parts, ident))
    return outer


def _inside_hidden(
    root: int, top: tuple[str, ...], spec: masks.MaskSpec, budget: list[int]
) -> list[tuple[tuple[str, ...], tuple[int, int]]]:
    """Every ``deny_write`` match below the new hidden directory ``top`` (outermost)."""
    out: list[tuple[tuple[str, ...], tuple[int, int]]] = []
    stack = [top]
    while stack:
        parts = stack.pop()
        if len(parts) > masks.MAX_DEPTH:
            if spec.pruned(parts):
                continue  # removed whole by the call (masks.MaskSpec.prune)
            raise OSError(errno.E2BIG, f"{'/'.join(parts[:8])}/… is nested too deep to check")
        dfd = _open_dir(root, parts)
        try:
            with os.scandir(dfd) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False), e.inode()) for e in it]
            dev = os.fstat(dfd).st_dev
        finally:
            os.close(dfd)
        budget[0] -= len(entries)
        if budget[0] < 0:
            raise OSError(errno.E2BIG, "too many entries to check")
        for name, is_dir, ino in entries:
            sub = (*parts, name)
            if masks.write_denied(spec, "/".join(sub)):
                out.append((sub, (dev, ino)))
            elif is_dir:
                stack.append(sub)
    return out


def _open_dir(root: int, parts: tuple[str, ...]) -> int:
    return masks.open_components(root, parts, _DIR_FLAGS, _gone)


def _open_parent(root: int, parts: tuple[str, ...]) -> int:
    """An O_PATH descriptor of ``parts``' directory, each component O_NOFOLLOW: a rename
    lands where the walk looked, never through a link a concurrent call swapped in."""
    cur = os.dup(root)
    try:
        for comp in parts[:-1]:
            nxt = os.open(comp, _PATH_DIR, dir_fd=cur)
            os.close(cur)
            cur = nxt
    except OSError as exc:
        os.close(cur)
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise _gone(parts) from exc
        raise
    return cur


def _gone(parts: tuple[str, ...]) -> OSError:
    return OSError(errno.EAGAIN, f"{'/'.join(parts)} changed while it was checked")


def _quarantine(
    root: int, parts: tuple[str, ...], ident: tuple[int, int], tag: str
) -> tuple[str, str]:
    """Rename ``parts`` (still the inode ``ident``) to ``<name>.quarantined-<tag>`` in its
    own directory; (old, new) workspace-relative paths."""
    parent = _open_parent(root, parts)
    try:
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise _gone(parts) from None
        if (st.st_dev, st.st_ino) != ident:
            raise _gone(parts)
        for n in range(1, _NAMES + 1):
            new = f"{name}{_SUFFIX}{tag}" if n == 1 else f"{name}{_SUFFIX}{tag}-{n}"
            try:
                _rename(parent, name, new)
            except FileExistsError:
                continue
            rel = "/".join(parts)
            return rel, "/".join((*parts[:-1], new))
        raise OSError(errno.EEXIST, f"no free name to move {'/'.join(parts)} aside")
    finally:
        os.close(parent)


def _rename(parent: int, name: str, new: str) -> None:
    try:
        renameat2_noreplace(parent, name, parent, new)
    except OSError as exc:
        if exc.errno == errno.EACCES and _owned_dir(parent):
            # The call may have made its own directory read-only (``chmod a-w sub`` after
            # planting ``sub/.git``): its owner is this process's user, who may write it
            # again; put back as it was after the move.
            mode = os.fstat(parent).st_mode
            os.chmod(f"/proc/self/fd/{parent}", stat.S_IMODE(mode) | stat.S_IWUSR | stat.S_IXUSR)
            try:
                renameat2_noreplace(parent, name, parent, new)
            finally:
                os.chmod(f"/proc/self/fd/{parent}", stat.S_IMODE(mode))
            return
        if exc.errno != errno.EINVAL:
            raise
        # A filesystem without RENAME_NOREPLACE: the name was just found free; a concurrent
        # call racing to take it gains nothing (what it puts there is its own).
        try:
            os.stat(new, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(name, new, src_dir_fd=parent, dst_dir_fd=parent)
            return
        raise FileExistsError(errno.EEXIST, "taken", new) from exc


def _owned_dir(parent: int) -> bool:
    try:
        return os.fstat(parent).st_uid == os.geteuid()
    except OSError:
        return False
