"""The host-independent part of the rule on host paths bound read-only into a sandbox.

Shared by the sandbox (``runtime.backends.sandbox._binds``, which adds the checks that
look at the host: the path exists and holds no runtime state) and the policy schema, which
refuses an ``[[mcp_servers]] read_only`` entry the sandbox would never bind when the
policy loads, rather than when the server starts and its tools silently go missing. A leaf
module: the policy layer must not import the sandbox backend to reach it.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from pathlib import PurePosixPath

__all__ = ["NEVER", "bindable", "refusal", "under"]

#: Never bound, whoever asks: kernel interfaces and runtime state of the host.
NEVER = ("/proc", "/sys", "/dev", "/run", "/var/run", "/var/lib")


def under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r + "/") for r in roots)


def bindable(path: str) -> bool:
    """A path that may be bound read-only: not /, not a top-level directory or a home
    directory itself, not a kernel interface or the host's runtime state."""
    parts = PurePosixPath(path).parts
    if len(parts) < 3 or (parts[1] == "home" and len(parts) < 4):
        return False
    return not under(path, NEVER)


def refusal(item: str) -> str | None:
    """Why ``item`` may never be bound read-only, whatever the host holds, or None.
    Lexical only (``/a/../etc`` is ``/etc``): whether the path exists, or holds the
    runtime's state, is for the sandbox to see when it binds."""
    if not item.startswith("/") or "\0" in item:
        return "it is not an absolute path"
    path = posixpath.normpath(item)
    if bindable(path):
        return None
    parts = PurePosixPath(path).parts
    if len(parts) < 2:
        what = "it is / itself"
    elif len(parts) < 3:
        what = "it is a top-level directory"
    elif parts[1] == "home" and len(parts) < 4:
        what = "it is a home directory"
    else:
        what = f"it is under {next(r for r in NEVER if under(path, [r]))}"
    return what + " (never /, a top-level or home directory, nor under " + ", ".join(NEVER) + ")"
