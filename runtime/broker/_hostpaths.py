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
  wall), the wasm guests' sources, the Python installation and every ``sys.path`` entry (a
  module planted there is imported by the next broker);
- the audit log (a call could rewrite or delete what it says of earlier calls, or append
  forged lines to a journal that recovery would chain), the policy file (a call could grant
  the next broker's calls more), and the folders of the catalogue's own tools.

So a workspace that holds one of these where this user may write (the path itself, or a
directory between it and the workspace: a call writes as this user, and renaming any of
them changes what the path names), or (for those loaded from below a directory) lies
inside one, is refused when the broker opens, with a typed error saying which and what to
do: a ConfigError (exit 64). Paths in the workspace's state directory (``.runtime``, where
the default audit log lives) are fine: every call's mounts hide it (``backends/sandbox``).

Judged by the kernel's identities, not by strings: each path is resolved (symlinks
followed, as the broker follows them when it opens the file), then its existing ancestors
are compared with the workspace by ``(st_dev, st_ino)``, so a workspace reachable under two
names (a bind mount, a symlinked parent) is recognised under either.

Hazard left: the check is made once, when the broker opens; moving the cache or the code
into the workspace afterwards is the user's doing, not a call's (a call cannot create a
directory outside the workspace).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
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
    python_fix = f"use a Python environment (venv) outside the workspace, or {_MOVE}"
    for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}:
        paths.append(HostPath(Path(prefix), "the Python installation", python_fix, tree=False))
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


def check_workspace(workspace: Path, paths: Iterable[HostPath], *, hidden: str) -> None:
    """Raise ConfigError when ``workspace`` holds one of ``paths`` (other than inside its
    ``hidden`` state directory) or, for a ``tree`` path, lies inside it. A workspace that
    does not exist yet (the broker makes it) is judged by its path: all of it will be the
    calls' to write."""
    for item in paths:
        where = Path(os.path.realpath(item.path))
        if _exposed(where, workspace, hidden):
            raise _refusal(workspace, item, "holds", item.fix, "trusted_path_in_workspace")
        if item.tree and _holds(where, workspace):
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


def _exposed(where: Path, workspace: Path, hidden: str) -> bool:
    """Whether ``where`` (resolved) is in the workspace, outside ``hidden``, where a call
    could write it."""
    try:
        st = os.stat(workspace)
    except OSError:
        real = Path(os.path.realpath(workspace))
        if not where.is_relative_to(real):
            return False
        rest = where.relative_to(real).parts
        return not rest or rest[0] != hidden
    ws_id = (st.st_dev, st.st_ino)
    below = _below(where, ws_id)
    return below is not None and below != hidden and _writable_chain(where, ws_id)


def _ancestors(path: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """``path``'s existing ancestors (itself first when it exists), with their stat."""
    for candidate in (path, *path.parents):
        try:
            yield candidate, os.stat(candidate)
        except OSError:
            continue


def _below(path: Path, ws_id: tuple[int, int]) -> str | None:
    """None when the workspace is not ``path`` nor one of its ancestors; else the name of
    the entry of the workspace that ``path`` lies in ("" for the workspace itself)."""
    for ancestor, st in _ancestors(path):
        if (st.st_dev, st.st_ino) == ws_id:
            rest = path.relative_to(ancestor).parts
            return rest[0] if rest else ""
    return None


def _writable_chain(path: Path, ws_id: tuple[int, int]) -> bool:
    """Whether this user may write ``path`` or a directory between it and the workspace
    (the workspace included): a call writes as this user, and a rename of any directory
    on the way changes what ``path`` names. A workspace this user may only read (a
    read-only checkout, run with ``--audit`` elsewhere) exposes nothing."""
    for ancestor, st in _ancestors(path):
        if os.access(ancestor, os.W_OK):
            return True
        if (st.st_dev, st.st_ino) == ws_id:
            return False
    return True  # not reached: the workspace is one of the ancestors (see _below)


def _holds(path: Path, workspace: Path) -> bool:
    """Whether ``path`` (an existing directory) is the workspace or one of its ancestors."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    target = (st.st_dev, st.st_ino)
    real = Path(os.path.realpath(workspace))
    return any((a.st_dev, a.st_ino) == target for _, a in _ancestors(real))
