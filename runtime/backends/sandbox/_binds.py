"""Which host paths may be bound read-only into a sandbox, beyond the interpreter's code.

One rule for every such bind: the long-lived sandboxed process's ``read_only`` paths
(``process.needed_paths``) and a folder tool's own folder (``backend``: its module is
imported inside its call). Never ``/``, a top-level directory, a home directory itself, a
kernel interface or the host's runtime state, nor a directory holding the runtime's state
(``.runtime/``: a workspace with its audit DB).
"""

from __future__ import annotations

import os
import stat

from runtime._bindable import NEVER, bindable, refusal, under
from runtime.errors import SandboxError

__all__ = [
    "NEVER",
    "STATE_DIR",
    "bindable",
    "check_read_only",
    "holds_state",
    "under",
    "unreadable_code",
]

#: The runtime's state directory inside a workspace (audit DB, stores).
STATE_DIR = ".runtime"


def holds_state(path: str) -> bool:
    return os.path.isdir(os.path.join(path, STATE_DIR))


def check_read_only(item: str) -> str:
    """``item`` as a path that may be bound read-only (absolute, normalised); raises
    :class:`SandboxError` naming why it may not."""
    why = refusal(item)  # the part the policy already checked when it loaded
    if why is not None:
        raise SandboxError(f"will not bind {item!r} into a sandbox: {why}", path=item)
    path = os.path.abspath(item)
    if not os.path.exists(path):
        raise SandboxError(f"cannot bind {item!r}: it does not exist", path=item)
    if holds_state(path):
        # A workspace holds the runtime's own state (the audit DB, snippets): a bind must
        # never carry it in. Refused rather than skipped, so the policy author sees why.
        raise SandboxError(
            f"will not bind {path!r} into a sandbox: it holds runtime state "
            f"({STATE_DIR}/); name a narrower path",
            path=path,
        )
    return path


def unreadable_code(folder: str, module: str, uid: int, gid: int) -> list[str]:
    """What of a folder tool's entry ``module`` (``a.b`` is ``folder/a/b.py``) host user
    ``uid``:``gid`` (the sandbox's, as the broker maps it) may not read: the folder and
    each directory down to the module without read and search permission, the module
    file without read; empty when all may be read. For the caller's own non-root uid (its
    sandbox is this very user, groups included) ``os.access`` answers.

    Why, before the call: the module is imported inside its call from its folder bound
    read-only, by the sandbox's uid. With the broker running as root, a module only root
    may read failed there as a bare PermissionError. Links are not followed (they resolve
    in the call's own root); ACLs are not read (mode bits only). Sibling modules the entry
    imports are not looked at: their import names the file that fails."""
    own = uid == os.geteuid() and uid != 0
    parts = module.split(".")
    paths = [folder]
    for part in parts[:-1]:
        paths.append(os.path.join(paths[-1], part))
    paths.append(os.path.join(paths[-1], parts[-1] + ".py"))
    bad: list[str] = []
    for i, path in enumerate(paths):
        want = os.R_OK if i == len(paths) - 1 else os.R_OK | os.X_OK
        try:
            st = os.lstat(path)
        except OSError:
            return bad  # not there (yet): the import says so
        if stat.S_ISLNK(st.st_mode):
            return bad
        if own:
            ok = os.access(path, want, follow_symlinks=False)
        else:
            if st.st_uid == uid:
                bits = st.st_mode >> 6
            elif st.st_gid == gid:
                bits = st.st_mode >> 3
            else:
                bits = st.st_mode
            ok = bits & want == want
        if not ok:
            bad.append(path)
    return bad
