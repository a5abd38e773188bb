"""The broker's state directory (``.runtime/`` in the workspace), checked before use.

The broker keeps its default audit log (``.runtime/audit.db``) and the host tools' state
store (``.runtime/state.db``) there. The workspace is the user's data, often a checkout of
someone else's repository, so ``.runtime`` may already exist and be hostile: a symlink
(``.runtime -> /tmp/x``: git checks symlinks out as they are) would send a root broker's log
and state wherever it points, and a directory another user owns or may write lets them read
or replace what is in it.

Decided here, on the directory opened with ``O_NOFOLLOW | O_DIRECTORY`` (the kernel, not a
string test, says it is no symlink) and ``fstat`` of that descriptor:

- a symlink, or something that is not a directory: refused;
- a directory another uid owns: refused;
- a directory of ours that group or others may use (a checkout makes it 0755, a careless
  user 0777): tightened to 0700 (with a warning), as ``mkdir(mode=0o700)`` makes it.

The files the broker opens there, ``audit.db`` and ``audit.db.digest-key`` (when it is the
default log) and ``state.db``, are checked by name with ``lstat``
(:func:`runtime._fsio.state_file_problem`): a symlink (SQLite opens its target, and creates
it when it dangles), something that is not a regular file, or a file another uid owns is
refused like the directory.

Refused means :class:`~runtime.errors.ConfigError` naming the path and the fix when the
broker would put its default audit log there; with the log elsewhere (``--audit PATH``: a
workspace this user may only read), the directory is just not used, and the state-keeping
host tools (snippets, memory) fail per call, as in a workspace without one.

Hazard left: the check is made once, when the broker opens. Replacing the directory later
needs write access to the workspace itself (the user's, or a tool's: every sandboxed call's
mounts hide ``.runtime``, see ``backends/sandbox``).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from runtime._fsio import state_file_problem
from runtime.errors import ConfigError

__all__ = ["check_state_dir", "default_audit_path"]

log = logging.getLogger("runtime.broker")


def check_state_dir(path: Path, *, audit_elsewhere: bool) -> Path | None:
    """``path`` when it is a directory of ours closed to others (tightened if it was not) or
    does not exist (a workspace this user may only read: the host tools that need it say so
    per call), None when it is unsafe and ``audit_elsewhere`` (the broker's audit log is not
    in it). Raises ConfigError when it is unsafe and the default audit log would go there."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return path
    except OSError as exc:
        _unsafe(path, _why_not(path, exc), audit_elsewhere)
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            why = (
                f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): its owner "
                "could read or replace the audit log and state kept there"
            )
            _unsafe(path, why, audit_elsewhere)
            return None
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o700)
            log.warning(
                "%s was mode %o (others could read the audit log and state kept there): "
                "tightened to 700",
                path,
                stat.S_IMODE(st.st_mode),
            )
    except OSError as exc:
        _unsafe(path, f"cannot be checked: {exc.strerror or exc}", audit_elsewhere)
        return None
    finally:
        os.close(fd)
    store = path / "state.db"
    why_store = state_file_problem(store)
    if why_store is not None:
        _unsafe(store, why_store, audit_elsewhere, what="the host tools' state store")
        return None
    return path


def _why_not(path: Path, exc: OSError) -> str:
    """Why ``path`` could not be opened as a directory without following a symlink."""
    try:
        if path.is_symlink():
            return (
                f"is a symlink (to {os.readlink(path)}): the broker does not follow a link "
                "out of the workspace for its audit log and state (a checkout can carry one)"
            )
    except OSError:
        pass
    if exc.errno == errno.ENOTDIR:
        return "is not a directory"
    return f"cannot be opened: {exc.strerror or exc}"


def _unsafe(path: Path, why: str, audit_elsewhere: bool, *, what: str = "state directory") -> None:
    """Warn (the audit log is elsewhere: the directory is not used), or raise ConfigError."""
    if audit_elsewhere:
        log.warning(
            "%s %s; it is not used: the snippet and memory tools have no state store", path, why
        )
        return
    raise ConfigError(
        f"{what} {path} {why}; remove it (the broker makes a private one) or give "
        "the audit log a place outside the workspace: --audit PATH (Broker(audit=PATH))",
        path=str(path),
    )


def default_audit_path(state_dir: Path) -> Path:
    """The default audit log in the checked ``state_dir``. Raises ConfigError when that name
    is a symlink (the log opens a symlinked name's target (``AuditLog``), and a checkout
    carrying ``.runtime/audit.db -> /elsewhere`` would send the log there), not a regular
    file, or another user's (:func:`runtime._fsio.state_file_problem`)."""
    from runtime.audit._digestkey import key_path  # runtime.audit loads when the log opens

    path = state_dir / "audit.db"
    # The log's digest key beside it (audit/_digestkey) too: its reader refuses a link and
    # a file that is not a key, not another user's file.
    for name in (path, key_path(path)):
        why = state_file_problem(name)
        if why is not None:
            raise ConfigError(
                f"the default audit log's file {name} {why}; remove it "
                "or give the audit log a place: --audit PATH (Broker(audit=PATH))",
                path=str(name),
            )
    return path
