"""Which host paths may be bound read-only into a sandbox, beyond the interpreter's code.

One rule for every such bind: the long-lived sandboxed process's ``read_only`` paths
(``process.needed_paths``) and a folder tool's own folder (``backend``: its module is
imported inside its call). Never ``/``, a top-level directory, a home directory itself, a
kernel interface or the host's runtime state, nor a directory holding the runtime's state
(``.runtime/``: a workspace with its audit DB).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePosixPath

from runtime.errors import SandboxError

__all__ = ["NEVER", "STATE_DIR", "bindable", "check_read_only", "holds_state", "under"]

#: Never bound, whoever asks: kernel interfaces and runtime state of the host.
NEVER = ("/proc", "/sys", "/dev", "/run", "/var/run", "/var/lib")
#: The runtime's state directory inside a workspace (audit DB, stores).
STATE_DIR = ".runtime"


def under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def bindable(path: str) -> bool:
    """A path that may be bound read-only: not /, not a top-level directory or a home
    directory itself, not a kernel interface or the host's runtime state."""
    parts = PurePosixPath(path).parts
    if len(parts) < 3 or (parts[1] == "home" and len(parts) < 4):
        return False
    return not under(path, NEVER)


def holds_state(path: str) -> bool:
    return os.path.isdir(os.path.join(path, STATE_DIR))


def check_read_only(item: str) -> str:
    """``item`` as a path that may be bound read-only (absolute, normalised); raises
    :class:`SandboxError` naming why it may not."""
    path = os.path.abspath(item)
    if not item.startswith("/") or not bindable(path):
        raise SandboxError(f"will not bind {item!r} into a sandbox", path=item)
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
