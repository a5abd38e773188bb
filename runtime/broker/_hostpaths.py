"""The host paths the broker trusts, kept out of the workspace that its calls may write.

Why: every sandboxed call may write the workspace (the write tools, ``shell_exec``), and its
files belong to the broker's own uid on the host (the sandbox user maps back to it). Anything
the broker later *loads* from a path inside the workspace is then the call's to choose:

- the runtime's cache (``$XDG_CACHE_HOME/runtime``, or its ``/tmp/runtime-<uid>``
  fallback) holds native code the broker loads into itself (the C accelerator, the wasm
  host's native helper, the sandbox's helpers; its fork-server is sent the broker's files,
  never finding a cache of its own: ``_speedups.adopt``) and compiled wasm modules that wasmtime
  deserialises without checking (a ``.cwasm`` is native code). Their checks (owner, mode)
  stop other users, not a call running as the same uid: a ``write_file`` of a library to
  ``~/.cache/runtime/wasm/native/…/_native.so`` in a workspace that holds the home
  directory ran its constructor in the next broker;
- the runtime's own code, the built-in tools (imported by the fork-server, outside every
  wall), the wasm guests' sources, the Python installation (its prefixes; a venv's ``bin``,
  ``lib`` and ``include``, the standard library and site-packages as trees), every
  ``sys.path`` entry (a module planted there is imported by the next broker), Python's
  bytecode cache when ``PYTHONPYCACHEPREFIX`` moves it out of the ``__pycache__`` beside
  each module, and, where this interpreter reads it, the user's site base (``~/.local``)
  and site-packages as a tree, even before it exists (a ``.pth`` file made there runs at
  start-up);
- the audit log (a call could rewrite or delete what it says of earlier calls, or append
  forged lines to a journal that recovery would chain), the policy file (a call could grant
  the next broker's calls more), and the folders of the catalogue's own tools.

So a workspace that holds one of these where this user may write (the path itself, or a
directory between it and the workspace: a call writes as this user, and renaming any of
them changes what the path names; one this user owns counts whatever its mode, since a call
may chmod it, unless it is on a read-only mount), or holds a symlink on the way to one (in a
directory so written: a call may replace it, and the next broker follows the call's link),
or a directory the path passes through and leaves by ``..`` (``ws/sub/../../cache``: a call
may replace ``sub`` by a symlink, and the same string then names a directory of the call's
choosing; one not made yet alike), or (for those loaded from below a directory) lies inside
one, is refused when the broker opens, with a typed error saying which and what to do: a
ConfigError (exit 64). Paths in the workspace's state directory (``.runtime``, where the
default audit log lives) are fine: every call's mounts hide it (``backends/sandbox``).

Judged by the kernel's identities, not by strings: each path is resolved a component at a
time as the kernel resolves it (``lstat``, each symlink followed where it is met, as the
broker follows them when it opens the file), and the resolved path's components, and each
symlink's own directory, are compared with the workspace by ``(st_dev, st_ino)``, so a
workspace reachable under two names (a bind mount of it or of a directory above it, a
symlinked parent) is recognised under either.

Hazards left: the check is made once, when the broker opens; moving the cache or the code
into the workspace afterwards is the user's doing, not a call's (a call cannot create a
directory outside the workspace). Nor is a mount *inside* the workspace recognised: a bind
mount of the cache at ``ws/sub`` makes the cache writable as ``ws/sub``, but the cache's
own path and ancestors never meet the workspace (seeing it would take mapping every path
through ``/proc/self/mountinfo``). Mounting takes a privilege no call has: it is the user's
doing too, and the README says not to.
"""

from __future__ import annotations

import functools
import os
import site
import stat
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runtime._fsio import cache_home, tmp_cache_home
from runtime.errors import ConfigError

__all__ = ["HostPath", "check_workspace", "runtime_paths"]


@dataclass(frozen=True)
class HostPath:
    """A path the broker trusts. ``what`` names it in the error ("the runtime's cache"),
    ``fix`` says what to do; ``tree``: what lies below it is loaded too, so a workspace
    inside it is refused as well as one that holds it."""

    path: Path
    what: str
    fix: str
    tree: bool = True


_MOVE = "choose a workspace that does not hold it"


def runtime_paths() -> list[HostPath]:
    """What every broker trusts: its caches, its code and the interpreter's."""
    import runtime
    from runtime.toolkit import builtin_tools_dir, guests_source_dir

    cache_fix = f"set XDG_CACHE_HOME to a directory outside the workspace, or {_MOVE}"
    code_fix = f"install the runtime outside the workspace, or {_MOVE}"
    paths = [
        HostPath(cache_home(), "the runtime's cache (native code and compiled modules)", cache_fix),
        HostPath(tmp_cache_home(), "the runtime's fallback cache", cache_fix),
        HostPath(Path(runtime.__file__).parent, "the runtime's own code", code_fix),
        HostPath(builtin_tools_dir(), "the built-in tools' code", code_fix),
        HostPath(guests_source_dir(), "the wasm guests' sources", code_fix),
    ]
    if sys.pycache_prefix:
        # PYTHONPYCACHEPREFIX: Python reads every module's bytecode from this tree instead of
        # __pycache__ beside it, and runs a cached .pyc whose header matches its source.
        paths.append(
            HostPath(
                Path(sys.pycache_prefix),
                "Python's bytecode cache (PYTHONPYCACHEPREFIX)",
                f"set PYTHONPYCACHEPREFIX to a directory outside the workspace, or {_MOVE}",
            )
        )
    python_fix = f"use a Python environment (venv) outside the workspace, or {_MOVE}"
    paths.extend(_python_installation(python_fix))
    if site.ENABLE_USER_SITE:
        # The user's site-packages is put on sys.path at start-up only once it exists, so
        # sys.path below does not name it before then: a call could create it, with a .pth
        # file that the next broker's start-up runs. Its base also holds the user's scripts
        # (``pip install --user`` puts the ``runtime`` command there).
        paths.append(
            HostPath(
                Path(site.getuserbase()),
                "the user's Python base (its site-packages is imported at start-up)",
                python_fix,
                tree=False,
            )
        )
        # And that site-packages as a tree, made or not: a workspace between it and the base
        # (``~/.local/lib/python3.X``) holds it, one below it would hold what it imports.
        paths.append(
            HostPath(
                Path(site.getusersitepackages()),
                "the user's site-packages (imported at start-up, its .pth files run)",
                python_fix,
            )
        )
    for entry in sys.path:
        # '' is the current directory (python -c, the REPL). Zip files and missing entries
        # are judged by their path all the same: a call could create one.
        paths.append(
            HostPath(
                Path(entry or "."),
                "a directory Python imports modules from (sys.path)",
                python_fix,
                tree=False,
            )
        )
    return paths


def _python_installation(fix: str) -> list[HostPath]:
    """The interpreter's prefixes, which a workspace may not hold, and below them what Python
    loads modules from, which a workspace may not lie inside either (a call could add a
    module, or a ``.pth`` file that start-up runs): the standard library (``lib-dynload`` in
    it), the site-packages directories, a venv's own directories (``_venv_dirs``).

    Not a prefix as a whole, a base installation's (often a shared root, ``/usr``,
    ``/usr/local``, where a workspace such as ``/usr/src/app`` is loaded from by nobody) nor
    a venv's (made in the project's directory, ``python -m venv .``, or Docker's ``/app``, it
    holds ``./workspace``, whose calls reach none of what the venv loads). Nor every
    ``sys.path`` entry (``runtime_paths``): the current directory, or the source checkout of
    an editable install, holds ``./workspace``, the default workspace."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    trees = set(_library_dirs())
    trees.update(site.getsitepackages())
    if sys.prefix != sys.base_prefix:
        trees.update(_venv_dirs())
    what = "the Python installation"
    return [HostPath(Path(p), what, fix, tree=p in trees) for p in sorted(prefixes | trees)]


def _venv_dirs() -> list[str]:
    """A venv's directories that hold what it loads or runs, made or not: ``bin`` (the
    interpreter, the ``runtime`` command's script), ``lib`` and ``lib64`` (site-packages,
    ``.pth`` files), ``include`` (headers a build compiles against)."""
    found = {sysconfig.get_path("scripts")}
    for prefix in {sys.prefix, sys.exec_prefix}:
        found.update(os.path.join(prefix, name) for name in ("bin", "lib", "lib64", "include"))
    return sorted(found)


@functools.cache
def _library_dirs() -> frozenset[str]:
    """The standard library's and site-packages' directories by sysconfig's scheme. Kept:
    working them out takes a third of a millisecond, at every broker open, and sysconfig
    keeps the variables it expands from its first call on anyway."""
    found = sysconfig.get_paths()
    return frozenset(found[name] for name in ("stdlib", "platstdlib", "purelib", "platlib"))


def check_workspace(workspace: Path, paths: Iterable[HostPath], *, hidden: str) -> None:
    """Raise ConfigError when ``workspace`` holds one of ``paths`` (other than inside its
    ``hidden`` state directory), or a symlink on the way to one, or, for a ``tree`` path,
    lies inside it. A workspace that does not exist yet (the broker makes it) is judged by
    its path: all of it will be the calls' to write."""
    lstat = _Lstat()
    ws = _Workspace.of(workspace, lstat)
    for item in paths:
        found = _resolve(str(item.path), lstat)
        if ws.exposes(found.chain, hidden, entry_itself=True):
            raise _refusal(workspace, item, "holds", item.fix, "trusted_path_in_workspace")
        for link in found.links:
            if ws.exposes(link, hidden, entry_itself=False):
                raise _way_refusal(workspace, item, link[-1].path, dotdot=False)
        for left in found.left:
            if ws.exposes(left, hidden, entry_itself=False):
                raise _way_refusal(workspace, item, left[-1].path, dotdot=True)
        if item.tree and ws.is_inside(found.chain):
            fix = _MOVE.replace("hold it", "lie inside it")
            raise _refusal(workspace, item, "is inside", fix, "workspace_in_trusted_path")


def _refusal(workspace: Path, item: HostPath, relation: str, fix: str, reason: str) -> ConfigError:
    return ConfigError(
        f"the workspace {workspace} {relation} {item.what} ({item.path}): a sandboxed call "
        "may write the workspace, and so could change what the broker loads or keeps "
        f"there; {fix}",
        path=str(item.path),
        workspace=str(workspace),
        reason=reason,
    )


def _way_refusal(workspace: Path, item: HostPath, entry: str, *, dotdot: bool) -> ConfigError:
    """A workspace entry on the way to ``item`` that a call may replace: a symlink followed
    there, or a directory the path passes through and leaves by '..' (which a call may
    replace with a symlink)."""
    if dotdot:  # a call may replace the directory with a symlink
        held = (
            f"a directory ({entry}) that the path to {item.what} ({item.path}) passes "
            "through and leaves by '..'"
        )
        how, name = (
            "with a symlink",
            "a path without '..' (or one that does not pass through the workspace)",
        )
    else:
        held = f"a symlink ({entry}) on the way to {item.what} ({item.path})"
        how, name = "", "a path that does not pass through the workspace"
    return ConfigError(
        f"the workspace {workspace} holds {held}: a sandboxed call may replace it"
        f"{' ' + how if how else ''}, and so choose what the broker loads or keeps there; "
        f"name it by {name}, or {item.fix}",
        path=str(item.path),
        workspace=str(workspace),
        reason="dotdot_through_workspace" if dotdot else "symlink_to_trusted_path_in_workspace",
        **({"passes": entry} if dotdot else {"link": entry}),
    )


_MAX_LINKS = 40  # the kernel's bound (ELOOP): past it a path names nothing


class _Lstat:
    """``os.lstat``, None for a path that is not there, remembered for one check: the paths
    judged share most of their ancestors."""

    def __init__(self) -> None:
        self._seen: dict[str, os.stat_result | None] = {}

    def __call__(self, path: str) -> os.stat_result | None:
        if path not in self._seen:
            try:
                self._seen[path] = os.lstat(path)
            except OSError:
                self._seen[path] = None
        return self._seen[path]


@dataclass(frozen=True)
class _Entry:
    """A component of a resolved path, with its lstat (None: not there)."""

    path: str
    st: os.stat_result | None

    @property
    def ident(self) -> tuple[int, int] | None:
        return None if self.st is None else (self.st.st_dev, self.st.st_ino)


_Chain = tuple[_Entry, ...]


@dataclass(frozen=True)
class _Resolved:
    """A path resolved as the kernel resolves it, a component at a time. ``chain``: the
    resolved path from the root, each component with its lstat (no symlink among them);
    ``links``: each symlink followed on the way, as the chain to its own entry (the
    symlink last); ``left``: each component a ``..`` left, as the chain to it (``a`` in
    ``a/..``, whether or not it is there). A call that may replace one of those changes
    what the path names (``a`` made a symlink, ``a/..`` is the link target's parent), so
    judging the resolved path alone (``realpath``) is not enough."""

    chain: _Chain
    links: tuple[_Chain, ...]
    left: tuple[_Chain, ...]


def _resolve(path: str, lstat: _Lstat) -> _Resolved:
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)  # getcwd has no symlink in it
    chain = [_Entry("/", lstat("/"))]
    links: list[_Chain] = []
    left: list[_Chain] = []
    todo = path.split("/")[::-1]
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if len(chain) > 1:
                # The chain has no symlink: its parent is the real one, today. Kept to be
                # judged as a symlink's entry is: replaced by one, ``..`` leads elsewhere.
                left.append(tuple(chain))
                chain.pop()
            continue
        here = os.path.join(chain[-1].path, name)
        st = lstat(here) if chain[-1].st is not None else None
        target = _link_target(here, st) if len(links) < _MAX_LINKS else None
        if target is None:
            chain.append(_Entry(here, st))
            continue
        links.append((*chain, _Entry(here, st)))
        if target.startswith("/"):
            del chain[1:]
        todo.extend(target.split("/")[::-1])
    return _Resolved(tuple(chain), tuple(links), tuple(left))


def _link_target(path: str, st: os.stat_result | None) -> str | None:
    if st is None or not stat.S_ISLNK(st.st_mode):
        return None
    try:
        return os.readlink(path)
    except OSError:
        return None  # replaced since its lstat: judged as what it was


@dataclass(frozen=True)
class _Workspace:
    """The workspace as the kernel knows it: ``real``, its resolved path; ``ident``, its
    identity (None: not made yet); ``chain``, its resolved path's components."""

    real: str
    ident: tuple[int, int] | None
    chain: _Chain

    @classmethod
    def of(cls, workspace: Path, lstat: _Lstat) -> _Workspace:
        chain = _resolve(str(workspace), lstat).chain
        return cls(chain[-1].path, chain[-1].ident, chain)

    def exposes(self, chain: _Chain, hidden: str, *, entry_itself: bool) -> bool:
        """Whether the last entry of ``chain`` lies in the workspace, outside ``hidden``,
        where a call could change it: this user may write (``_writable``) the entry
        itself, when ``entry_itself`` (a symlink's own mode does not count: replacing it
        is writing its directory), or a directory between it and the workspace, the
        workspace included (renaming one changes what the path names). A workspace this user may
        only read (someone else's checkout, one on a read-only mount, run with
        ``--audit`` elsewhere) exposes nothing."""
        if self.ident is None:  # not made yet: all of it will be the calls'
            parts = _parts_below(chain[-1].path, self.real)
            if parts is None or (not parts and not entry_itself):
                return False  # not in it, or the workspace itself (replacing it is not theirs)
            return not parts or parts[0] != hidden
        at = _deepest(chain, self.ident)
        if at is None:
            return False
        rest = chain[at + 1 :]
        if rest and os.path.basename(rest[0].path) == hidden:
            return False
        mutable = chain[at:] if entry_itself else chain[at:-1]
        return any(e.st is not None and _writable(e.path, e.st) for e in mutable)

    def is_inside(self, chain: _Chain) -> bool:
        """Whether the path ``chain`` resolves to is the workspace or one of its ancestors.
        A path not made yet (the user's site-packages before its first install) is judged
        all the same, by its deepest existing directory's identity and the names of the
        rest below it: a workspace not made yet may lie inside it, and once either is made
        the other would be the workspace's."""
        known = max(at for at, e in enumerate(chain) if e.ident is not None)  # "/" is there
        tail = [os.path.basename(e.path) for e in chain[known + 1 :]]
        for at, entry in enumerate(self.chain):
            if entry.ident == chain[known].ident:
                below = self.chain[at + 1 : at + 1 + len(tail)]
                if [os.path.basename(e.path) for e in below] == tail:
                    return True
        return False


def _deepest(chain: _Chain, ident: tuple[int, int]) -> int | None:
    for at in range(len(chain) - 1, -1, -1):
        if chain[at].ident == ident:
            return at
    return None


def _parts_below(path: str, top: str) -> tuple[str, ...] | None:
    """``path``'s components below ``top`` (both resolved), None when it is not there."""
    if path == top:
        return ()
    prefix = top.rstrip("/") + "/"
    return tuple(path[len(prefix) :].split("/")) if path.startswith(prefix) else None


def _writable(path: str, st: os.stat_result) -> bool:
    """Whether a call may write ``path``: its mode lets this user (root: anything), or this
    user owns it, and a call (mapped to the owner) may chmod it first, unless it is on a
    read-only mount (where chmod fails as well)."""
    if os.access(path, os.W_OK):
        return True
    return st.st_uid == os.geteuid() and not _read_only_mount(path)


def _read_only_mount(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False  # gone since its stat: judged as the owner's to write
