"""Workspace-confined file access for tool implementations: defence in depth under the sandbox.

The kernel is the wall (mounts, Landlock); this module gives early, clear errors and closes
the classic holes that string checks leave open:

* every path is resolved relative to an ``O_PATH`` descriptor of the workspace root with
  ``openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``, so a symlink (file, dir, chain,
  dangling, swapped in a race) can never lead outside, and the file we act on is the one we
  opened (no check-then-use on a path string);
* without ``openat2`` (ENOSYS: old kernel, or a seccomp filter that hides it) the same rule is
  emulated by a component-by-component ``O_NOFOLLOW`` walk that expands symlinks itself;
* writes never touch the target in place: temp file in the same directory, write, fsync,
  rename, fsync the directory. A killed call leaves either the old file or the new one;
  a write holds its folder's ``flock`` from its look at the file to the rename, so an
  append or edit (read, change, replace) never drops another call's write;
* reading streams and stops at a byte cap; walking never follows directory symlinks and
  remembers (st_dev, st_ino), so symlink and bind-mount loops end;
* what was opened is checked by where it *resolved* against the policy's deny globs
  (``deny``, given per call): ``envlink -> .env`` is refused by name with ``path_denied``
  (the sandbox's mask would otherwise just read as an empty file).

Attackers control every path string and, through ``shell_exec`` in the same workspace, the
tree itself between two of our system calls.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import re
import resource
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from runtime._depth import CREATE_MAX_DEPTH
from runtime._fsio import (
    Fd,
    file_type,
    open_beneath,
    read_bytes,
    read_lines,
    renameat2_noreplace,
    seek_line,
    write_all,
    write_refused,
)
from runtime._globs import (
    GlobSet,
    compile_glob,
    compile_segments,
    star_closure,
    step_segments,
)
from runtime.errors import ResourceLimitExceeded, ToolFailed

if TYPE_CHECKING:
    from runtime.toolkit import ToolContext

__all__ = [
    "LOCK_WAIT_S",
    "SANDBOX_ROOT",
    "STATE_DIR",
    "WALK_HELD_FDS",
    "WALK_MAX_ENTRIES",
    "Entry",
    "Fd",
    "Workspace",
    "file_type",
    "glob_matcher",
    "printable",
    "read_bytes",
    "read_lines",
    "seek_line",
]

#: Where the sandbox mounts the workspace; such absolute paths mean the workspace root.
SANDBOX_ROOT = "/workspace"
#: The runtime's own state inside a workspace; never readable or writable through tools.
STATE_DIR = ".runtime"
#: Entries a :meth:`Workspace.walk` looks at before it stops (and says so, ``walk_cut``).
WALK_MAX_ENTRIES = 200_000
#: Seconds a write waits for the lock on its folder (:meth:`Workspace.exclusive`) before it
#: fails ``busy``: only another process holding it that long (a shell's ``flock``) does
#: that; the tools themselves hold it for one copy and rename.
LOCK_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class Entry:
    """One walked directory entry; ``path`` is workspace-relative, '/'-separated."""

    name: str
    path: str
    type: str
    size: int
    modified: float
    depth: int


def _kind(mode: int) -> str:
    """What an ``st_mode`` is, in a message's words: ``file_type`` says ``other`` of a
    socket, a FIFO and a device alike (the results' stable vocabulary), which tells the
    caller nothing."""
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return file_type(mode)


def _fail(message: str, reason: str, path: str, exc: BaseException | None = None) -> ToolFailed:
    err = ToolFailed(message, reason=reason, path=path)
    if exc is not None:
        err.__cause__ = exc
    return err


class Workspace:
    """The workspace root, held open as an ``O_PATH`` descriptor; every operation is relative
    to it. Use as a context manager. ``parts`` are normalised relative path components."""

    def __init__(
        self,
        root: Path | str,
        *,
        refuse_state: bool = True,
        deny: Iterable[str] = (),
        read: Iterable[str] | None = None,
        write: Iterable[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.refuse_state = refuse_state
        # Case-insensitive like the policy's own deny checks (runtime.policy.paths).
        self._deny = GlobSet(deny, casefold=True)
        # The policy's allow globs when narrower than everything (None: all allowed), matched
        # like the policy's (case-sensitive) against where a path resolved: a walk shows
        # only readable entries, and a symlink in an allowed folder cannot lead a read or a
        # write to a path outside them.
        self._allow = {
            "read": None if read is None else GlobSet(read),
            "write": None if write is None else GlobSet(write),
        }
        self._root_path: str | None = None
        #: (st_dev, st_ino) of the folders whose lock this object holds (:meth:`exclusive`).
        self._locked: set[tuple[int, int]] = set()
        #: Set when a :meth:`walk` stopped at its bound on entries.
        self.walk_cut = False
        try:
            self.fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise _fail("the workspace is not available", "workspace", str(root), exc) from exc

    @classmethod
    def for_call(cls, ctx: ToolContext, *, refuse_state: bool = True) -> Workspace:
        """The call's workspace with the policy's deny globs (``options["path_deny"]``, set
        by the sandbox backend) applied to every path as it resolved."""
        deny = ctx.options.get("path_deny") or ()
        read, write = ctx.options.get("path_read"), ctx.options.get("path_write")
        return cls(
            ctx.workspace,
            refuse_state=refuse_state,
            deny=[str(g) for g in deny],
            read=None if read is None else [str(g) for g in read],
            write=None if write is None else [str(g) for g in write],
        )

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---------------------------------------------------------------------------- paths

    def parts(self, path: str, *, allow_root: bool = True) -> tuple[str, ...]:
        """Normalise a user path into components, or raise ToolFailed saying why not.

        Absolute paths are accepted only under ``/workspace`` or the workspace's own
        directory. ``..`` is refused outright: through a symlink its meaning is not lexical,
        so any "harmless" ``a/../b`` would be a guess."""
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path):
            raise _fail("the path contains a NUL or control character", "control_char", repr(path))
        try:
            path.encode("utf-8")  # lone surrogates from JSON would otherwise crash fsencode
        except UnicodeEncodeError as exc:
            raise _fail("the path is not valid Unicode", "bad_encoding", repr(path), exc) from exc
        rel = path
        if path.startswith("/"):
            rel = ""
            for prefix in (SANDBOX_ROOT, str(self.root).rstrip("/")):
                if prefix and (path == prefix or path.startswith(prefix + "/")):
                    rel = path[len(prefix) :]
                    break
            else:
                raise _fail(
                    f"absolute path {path!r} is outside the workspace; use a path relative "
                    "to the workspace",
                    "absolute",
                    path,
                )
        comps = tuple(c for c in rel.split("/") if c not in ("", "."))
        if ".." in comps:
            # Said as it is: "must stay inside the workspace" was false for sub/../a.
            raise _fail(
                f"path {path!r} uses '..', which the file tools refuse even inside the "
                "workspace (through a symlink its meaning is not lexical); give the path "
                "from the workspace root without '..'",
                "parent_ref",
                path,
            )
        if self.refuse_state and comps and comps[0] == STATE_DIR:
            raise _fail(
                f"{STATE_DIR}/ holds the runtime's own state and is not accessible to tools",
                "runtime_state",
                path,
            )
        if not comps and not allow_root:
            raise _fail("this operation needs a path below the workspace root", "root", path)
        return comps

    def refuse_slash(
        self, path: str, parts: tuple[str, ...], access: str, *, making: bool = False
    ) -> None:
        """Refuse ``path`` when it ends with '/' (or '/.'), which names a directory, and what
        it names is not one: :meth:`parts` drops the slash, so ``f.txt/`` read the file and
        a write made ``slash.txt``, where POSIX says ENOTDIR. ``making``: the caller would
        make a file there, so a missing one is refused too. Symlinks are followed, as the
        kernel follows them before a trailing slash."""
        if not parts or path.rsplit("/", 1)[-1] not in ("", "."):
            return
        st = self._resolved_stat(parts, access)
        if st is not None and stat.S_ISDIR(st.st_mode):
            return
        if st is None and not making:
            return  # missing: the caller's own look says "not found"
        if st is None:
            why = "a file cannot be made at such a path"
        else:
            why = f"but {self.rel(parts)!r} is a {_kind(st.st_mode)}, not a directory"
        raise _fail(
            f"{path!r} ends with '/', which names a directory; {why}: drop the trailing '/' "
            "to name a file",
            "not_a_directory",
            self.rel(parts),
        )

    def is_directory(self, parts: tuple[str, ...], access: str = "read") -> bool:
        """Whether ``parts`` names a directory (symlinks followed beneath the root)."""
        st = self._resolved_stat(parts, access)
        return st is not None and stat.S_ISDIR(st.st_mode)

    @staticmethod
    def rel(parts: tuple[str, ...]) -> str:
        return "/".join(parts) or "."

    # ---------------------------------------------------------------------------- opening

    def open(self, parts: tuple[str, ...], flags: int, mode: int = 0o666) -> Fd:
        """Open ``parts`` beneath the root; symlinks are followed only while they stay
        inside. Raises OSError (EXDEV for an escape, ELOOP, ENOENT...) for the caller to
        translate with :meth:`explain`. A path that resolved to a policy-denied one (through
        a symlink) raises ToolFailed ``path_denied``."""
        fd = Fd(open_beneath(self.fd, parts, flags, mode))
        if self._deny:
            try:
                self._check_denied(fd.fd, parts)
            except BaseException:
                fd.close()
                raise
        return fd

    def _resolved(self, fd: int) -> str | None:
        """Where ``fd`` resolved, workspace-relative ('' for the root), from the kernel
        (/proc/self/fd), never the argument string; None without /proc."""
        try:
            if self._root_path is None:
                self._root_path = os.readlink(f"/proc/self/fd/{self.fd}").rstrip("/")
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        root = self._root_path
        if not where.startswith(root + "/"):
            return ""  # the root itself (openat2 already kept everything beneath it)
        return where[len(root) + 1 :]

    def _check_denied(self, fd: int, parts: tuple[str, ...]) -> None:
        """Refuse ``fd`` if where it resolved matches a deny glob. The kernel's answer
        (/proc/self/fd) is used, never the argument string: a symlink, or one swapped in
        since, cannot dodge it. Without /proc the check is skipped (the masks still hold)."""
        resolved = self._resolved(fd)
        if not resolved:
            return
        hit = self._deny.match(resolved)
        if hit is not None:
            raise self._refused(
                parts, resolved, f"which the policy denies (matches {hit!r})", "path_denied", "deny"
            )

    def _refused(
        self, parts: tuple[str, ...], resolved: str, why: str, reason: str, rule: str
    ) -> ToolFailed:
        """The error for ``parts``, which resolved (through a symlink) to ``resolved``."""
        return ToolFailed(
            f"{self.rel(parts)!r} resolves to {resolved!r}, {why}",
            reason=reason,
            path=self.rel(parts),
            resolved=resolved,
            rule=f"paths.{rule}",
        )

    def allowed(self, resolved: str, access: str) -> bool:
        """Whether the resolved workspace path ``resolved`` is in the policy's ``access``
        ('read' or 'write') globs (always, when they cover everything)."""
        globs = self._allow[access]
        return globs is None or globs.match(resolved) is not None

    def check_allowed(
        self, parts: tuple[str, ...], access: str, *, fd: int, name: str | None = None
    ) -> None:
        """Refuse ``parts`` (opened as ``fd``; for an entry not opened, its parent ``fd`` and
        ``name``) when where it resolved is outside the policy's ``access`` globs: the
        policy checks the argument string, and ``out/s -> ../src`` keeps ``out/s/x`` in
        ``out/**``. Without /proc the check is skipped (the policy's string check holds)."""
        if self._allow[access] is None:
            return
        resolved = self._resolved(fd)
        if resolved is None:
            return
        if name is not None:
            resolved = f"{resolved}/{name}" if resolved else name
        if not self.allowed(resolved, access):
            why = f"which is not in the policy's {access}able paths (a symlink leads outside them)"
            raise self._refused(parts, resolved, why, "path_not_allowed", access)

    def explain(self, exc: OSError, parts: tuple[str, ...], what: str = "path") -> ToolFailed:
        """Translate an OSError from this module into a ToolFailed an LLM can act on."""
        rel = self.rel(parts)
        code = exc.errno
        if code == errno.EXDEV:
            msg, reason = f"{what} {rel!r} resolves outside the workspace (symlink)", "escape"
        elif code == errno.ELOOP:
            msg, reason = f"{what} {rel!r} is a symlink loop or a refused symlink", "symlink"
        elif code == errno.ENOENT:
            # "not found": the words seed 000's own test looks for (reason is the data).
            msg, reason = f"{what} {rel!r} not found: it does not exist", "not_found"
        elif code == errno.ENOTDIR:
            msg, reason = f"a parent of {what} {rel!r} is not a directory", "not_a_directory"
        elif code == errno.EISDIR:
            msg, reason = f"{what} {rel!r} is a directory", "is_a_directory"
        elif code == errno.EEXIST:
            msg, reason = f"{what} {rel!r} already exists", "exists"
        elif code == errno.ENOTEMPTY:
            msg, reason = f"directory {rel!r} is not empty", "not_empty"
        elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
            msg, reason = f"permission denied for {what} {rel!r}", "permission"
        elif code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            msg, reason = f"no space left (or file too large) writing {rel!r}", "no_space"
        elif code == errno.EBUSY:
            # Inside the sandbox, a mount point: the masks over policy-denied entries
            # (runtime.backends.sandbox.masks), which cannot be unlinked or renamed over.
            msg = (
                f"{what} {rel!r} is, or holds, an entry the policy hides or protects (masked "
                "in the sandbox); it cannot be removed, renamed or replaced"
            )
            reason = "masked"
        elif code == errno.ENAMETOOLONG:
            msg, reason = f"{what} {rel!r} is too long", "name_too_long"
        else:
            msg, reason = f"cannot access {what} {rel!r}: {exc.strerror}", "os_error"
        err = ToolFailed(msg, reason=reason, path=rel, errno=errno.errorcode.get(code or 0, ""))
        err.__cause__ = exc
        return err

    def open_file(
        self, parts: tuple[str, ...], flags: int = os.O_RDONLY, *, access: str = "read"
    ) -> tuple[Fd, os.stat_result]:
        """Open a regular file for reading. O_NONBLOCK keeps a FIFO from blocking the open;
        the fstat of the opened descriptor is what we check (no path re-use). Where it
        resolved must be in the policy's ``access`` globs (``write`` for a file read to be
        rewritten, as edit_file does: then in the ``read`` ones too)."""
        try:
            fd = self.open(parts, flags | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError as exc:
            # A UNIX socket cannot be opened at all (ENXIO, "No such device or address"):
            # look at what the path names, so the caller hears "a socket", not an errno.
            if exc.errno == errno.ENXIO:
                st = self._resolved_stat(parts, access)
                if st is not None and not stat.S_ISREG(st.st_mode):
                    raise self._not_regular(parts, st.st_mode) from exc
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                # "Not found" is an answer too: only where the globs would let it be read.
                self._check_would_be(parts, access)
            raise self.explain(exc, parts, "file") from exc
        try:
            self.check_allowed(parts, access, fd=fd.fd)
            if access == "write":  # read to be rewritten: what it held is read too
                self.check_allowed(parts, "read", fd=fd.fd)
        except ToolFailed:
            fd.close()
            raise
        st = os.fstat(fd.fd)
        if not stat.S_ISREG(st.st_mode):
            fd.close()
            raise self._not_regular(parts, st.st_mode)
        os.set_blocking(fd.fd, True)
        return fd, st

    def _not_regular(self, parts: tuple[str, ...], mode: int) -> ToolFailed:
        rel = self.rel(parts)
        return _fail(
            f"{rel!r} is a {_kind(mode)}, not a regular file", f"is_{file_type(mode)}", rel
        )

    def _resolved_stat(
        self, parts: tuple[str, ...], access: str | None = None
    ) -> os.stat_result | None:
        """What ``parts`` names, symlinks followed beneath the root (an ``O_PATH`` open,
        which never opens the file itself); None when that fails. With ``access``, where
        it resolved must be in those globs (else ToolFailed ``path_not_allowed``): a socket
        that ``pub/link`` leads to is not named a socket in an error."""
        try:
            fd = self.open(parts, os.O_PATH)
        except (OSError, ToolFailed):
            return None
        with fd:
            if access is not None:
                self.check_allowed(parts, access, fd=fd.fd)
            return os.fstat(fd.fd)

    def open_dir(
        self,
        parts: tuple[str, ...],
        *,
        create: bool = False,
        access: str = "read",
        leaf: str | None = None,
    ) -> Fd:
        """An ``O_RDONLY | O_DIRECTORY`` descriptor (usable as dir_fd, for fsync, scandir).
        ``access`` is what the caller does below it ('read' or 'write'): an error that
        describes ``parts`` (what it is, when not a directory) does so only where those
        globs allow. ``leaf`` is the name the caller acts on inside it (the file written,
        moved or described), which the caller judges (check_allowed) and errors are judged
        by. Without ``leaf`` the folder itself is the subject (a walk's top, a shell's
        cwd): where it resolved must be in the ``access`` globs or hold paths they could
        match (:meth:`_check_folder`), and a missing one is "not found" only on the same
        terms, so ``pub/link/inner`` (``pub/link -> ../private``) is neither listed empty
        nor told apart from ``pub/link/nothere``.

        With ``create``, missing components are made one by one, each by mkdirat under the
        directory opened last, and each is then opened relative to it with ``O_NOFOLLOW``
        (see :meth:`_create_dirs`): the folder is judged, and made, by descriptor."""
        try:
            fd = self.open(parts, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            if exc.errno == errno.ENOTDIR and parts:
                # ENOTDIR does not say which component: name the path itself when it is
                # the one that is not a directory (explain() blames a parent).
                st = self.lstat(parts, access)
                if st is not None and not stat.S_ISDIR(st.st_mode):
                    raise _fail(
                        f"{self.rel(parts)!r} is a {_kind(st.st_mode)}, not a directory",
                        "not_a_directory",
                        self.rel(parts),
                        exc,
                    ) from exc
            if not (create and exc.errno == errno.ENOENT):
                if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                    # "Not found" is an answer too: only where the globs would allow it.
                    whole = parts if leaf is None else (*parts, leaf)
                    self._check_would_be(whole, access, below=leaf is None)
                raise self.explain(exc, parts, "directory") from exc
        else:
            if leaf is None:
                # The folder itself is what the caller looks into (a walk's top, a cwd).
                try:
                    self._check_folder(parts, fd.fd, access)
                except BaseException:
                    fd.close()
                    raise
            return fd
        if len(parts) >= CREATE_MAX_DEPTH:
            # A file in it would be the CREATE_MAX_DEPTH+1st component. Deeper, the sandbox's
            # mask walk could not check the tree and would refuse every later call.
            raise _fail(
                f"directory {self.rel(parts)[:80]!r}… would be {len(parts)} levels deep; "
                f"tools create at most {CREATE_MAX_DEPTH - 1} (deeper trees cannot be "
                "checked for policy-denied paths)",
                "too_deep",
                self.rel(parts),
            )
        return self._create_dirs(parts, leaf)

    def _create_dirs(self, parts: tuple[str, ...], leaf: str | None) -> Fd:
        """Open ``parts``, making each missing folder on the way; the last one's descriptor.

        Red team (N1): a check of the whole path first, then mkdirat under a parent
        re-resolved *by name* from the root, let a symlink swapped in between (a shell in
        a writable folder exchanging ``pub/a`` with ``pub/a_lnk -> ../private``) lead the
        mkdir into ``private/``, refused only once the folder was there. Now every step is
        relative to the descriptor held: a folder is made only after where that descriptor
        is (the kernel's answer, /proc/self/fd) plus the rest of the path, ``leaf``
        included, is in the write globs (:meth:`_check_making`), and what was made is
        opened ``O_NOFOLLOW`` under the same descriptor, so a link swapped in for it fails
        the open rather than being followed. An existing component that is a symlink is
        still followed, beneath the root only (:meth:`open`), and its descriptor is judged
        the same way before anything is made in it. Hazard: a folder we hold that is
        *moved* elsewhere between the check and the mkdirat takes the mkdir along; moving
        it into a place the write globs leave out needs write access there, which the
        sandbox does not grant."""
        cur = Fd(os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=self.fd))
        try:
            for i in range(len(parts)):
                nxt = self._enter(cur, parts, i, leaf)
                cur.close()
                cur = nxt
        except OSError as exc:
            cur.close()
            raise self.explain(exc, parts, "directory") from exc
        except BaseException:
            cur.close()
            raise
        return cur

    def _enter(self, cur: Fd, parts: tuple[str, ...], i: int, leaf: str | None) -> Fd:
        """``parts[i]`` in ``cur`` (``parts[:i]``), made first when missing; one step of
        :meth:`_create_dirs`."""
        comp = parts[i]
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            try:
                fd = Fd(os.open(comp, flags, dir_fd=cur.fd))
            except FileNotFoundError:
                self._check_making(parts, i, cur.fd, leaf)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(comp, 0o777, dir_fd=cur.fd)
                fd = Fd(os.open(comp, flags, dir_fd=cur.fd))
        except OSError as exc:
            # A symlink (O_NOFOLLOW | O_DIRECTORY answers ENOTDIR) or not a directory at
            # all: followed beneath the root (the next step judges where it led), or
            # explained by the caller.
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            return self.open(parts[: i + 1], os.O_RDONLY | os.O_DIRECTORY)
        if self._deny:
            try:
                self._check_denied(fd.fd, parts[: i + 1])
            except BaseException:
                fd.close()
                raise
        return fd

    def _check_making(self, parts: tuple[str, ...], i: int, dir_fd: int, leaf: str | None) -> None:
        """Refuse to make ``parts[i]`` in ``dir_fd`` unless where ``dir_fd`` is now, plus
        ``parts[i:]`` and ``leaf``, is in the write globs (without ``leaf``: could hold a
        path they allow). Without /proc, skipped (as :meth:`check_allowed` is)."""
        if self._allow["write"] is None:
            return
        resolved = self._resolved(dir_fd)
        if resolved is None:
            return
        rest = "/".join(parts[i:] + ((leaf,) if leaf is not None else ()))
        would_be = f"{resolved}/{rest}" if resolved else rest
        if not self._reachable(would_be, "write", below=leaf is None):
            why = "which is not in the policy's writable paths (a symlink leads outside them)"
            full = parts + ((leaf,) if leaf is not None else ())
            raise self._refused(full, would_be, why, "path_not_allowed", "write")

    def _check_folder(self, parts: tuple[str, ...], fd: int, access: str) -> None:
        """Refuse the folder ``parts`` (opened as ``fd``) when where it resolved is outside
        the ``access`` globs and no path below it could match them. Without /proc,
        skipped (as :meth:`check_allowed` is)."""
        if self._allow[access] is None:
            return
        resolved = self._resolved(fd)
        if resolved is None or self._reachable(resolved, access, below=True):
            return
        why = f"which is not in the policy's {access}able paths (a symlink leads outside them)"
        raise self._refused(parts, resolved, why, "path_not_allowed", access)

    def _reachable(self, resolved: str, access: str, *, below: bool) -> bool:
        """Whether ``resolved`` is in the ``access`` globs or, with ``below``, a path below
        it could be (a folder a walk or a write goes through: ``private/inner`` with
        ``private/inner/pub/**`` readable)."""
        globs = self._allow[access]
        if globs is None or globs.match(resolved) is not None:
            return True
        return below and _may_match_below(globs, resolved)

    def lstat(
        self, parts: tuple[str, ...], access: str = "read", *, below_file_missing: bool = False
    ) -> os.stat_result | None:
        """Stat the entry itself (a symlink is reported as such); None when missing. The
        parent is resolved beneath the root, so this never describes an outside file.
        ``below_file_missing``: a path below a file (``a.txt/x``, ENOTDIR) is missing too,
        as get_file_info promises; otherwise it is the error ``not_a_directory``, naming
        the culprit, for the callers that fail on it.

        Where the entry is (its parent as it resolved, and its name) must be in the
        policy's ``access`` globs, checked before the stat and, for a missing entry, before
        it is called missing: ``pub/link -> ../private`` keeps ``pub/link/secret.txt`` in
        ``pub/**``, and its size, dates and very existence are what read_file keeps back
        (red team: get_file_info and code_query were an oracle for them). A symlink is
        described where it lies, not where it leads: ``pub/slink -> ../private/x`` is an
        entry of ``pub/`` (its target text is its own content, shown by readlink); what it
        points to is never stat'ed here. The root is always described."""
        if not parts:
            return os.stat(".", dir_fd=self.fd)
        try:
            with self.open_dir(parts[:-1], access=access, leaf=parts[-1]) as parent:
                self.check_allowed(parts, access, fd=parent.fd, name=parts[-1])
                return os.stat(parts[-1], dir_fd=parent.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except ToolFailed as exc:
            reason = exc.details.get("reason")
            if reason == "not_found" or (below_file_missing and reason == "not_a_directory"):
                # Judged as a missing path is: "missing" is an answer about where it is.
                self._check_would_be(parts, access)
                return None
            raise
        except OSError as exc:
            raise self.explain(exc, parts) from exc

    def _check_would_be(self, parts: tuple[str, ...], access: str, *, below: bool = False) -> None:
        """Refuse ``parts`` (missing, or about to be made) when the deepest part of it that
        exists resolved to where the rest would be outside the policy's ``access`` globs:
        ``pub/link/nothere/x`` is ``private/nothere/x``, and "it does not exist" is as much
        an answer about ``private/`` as a size is; a write there must not make its
        folders first. ``below``: ``parts`` is a folder to look into, refused only when no
        path below it could match either (as :meth:`_check_folder`). Without /proc,
        skipped (as :meth:`check_allowed` is)."""
        if self._allow[access] is None:
            return
        for depth in range(len(parts) - 1, -1, -1):
            try:
                fd = self.open(parts[:depth], os.O_PATH)
            except OSError:
                continue
            with fd:
                resolved = self._resolved(fd.fd)
            if resolved is None:
                return
            rest = "/".join(parts[depth:])
            would_be = f"{resolved}/{rest}" if resolved else rest
            if not self._reachable(would_be, access, below=below):
                why = (
                    f"which is not in the policy's {access}able paths (a symlink leads "
                    "outside them)"
                )
                raise self._refused(parts, would_be, why, "path_not_allowed", access)
            return

    # ---------------------------------------------------------------------------- writing

    @contextlib.contextmanager
    def exclusive(self, parts: tuple[str, ...]) -> Iterator[None]:
        """Hold the lock on the folder of ``parts`` (see :meth:`_lock`) for a read of the
        file and the :meth:`atomic_write` that replaces it (edit_file): no other tool call
        replaces a file in that folder in between. A folder that cannot be opened is not
        locked (the caller's open of the file then fails, saying why)."""
        if not parts:
            raise _fail("cannot write to the workspace root", "root", ".")
        try:
            parent = self.open_dir(parts[:-1], access="write", leaf=parts[-1])
        except (OSError, ToolFailed):
            yield  # nothing to lock: the caller's own open of the file says what is wrong
            return
        with parent, self._lock(parent.fd, parts):
            yield

    @contextlib.contextmanager
    def _lock(self, dir_fd: int, parts: tuple[str, ...]) -> Iterator[None]:
        """``flock(LOCK_EX)`` on the folder ``dir_fd``, from a read of a file in it to the
        rename that replaces the file (red team Q4: two appends, or two edit_file calls, each
        copied the file, changed the copy and renamed it over the file, and the second
        rename dropped the first's change, both reported done).

        On the folder, not the file: the rename replaces the file's inode, and a file not
        made yet has none. Every call runs in its own process (its own mount namespace,
        the same inodes), and flock is the kernel's, between open file descriptions, so it
        holds between calls, and between threads with their own :class:`Workspace`. A
        folder this object locked already (:meth:`exclusive`, then :meth:`atomic_write`)
        is not locked again: a second open file description would wait on the first.

        ``LOCK_NB``, retried for :data:`LOCK_WAIT_S`, then ToolFailed ``busy``: a process
        in the sandbox (a shell's ``flock DIR sleep``) can hold the lock, and a write must
        not then wait until the call's timeout. A file system without flock (ENOLCK,
        EOPNOTSUPP...) goes unlocked: :meth:`atomic_write`'s check of the target before its
        rename still sees most concurrent changes."""
        st = os.fstat(dir_fd)
        ident = (st.st_dev, st.st_ino)
        if ident in self._locked:
            yield
            return
        deadline = time.monotonic() + LOCK_WAIT_S
        pause = 0.001
        while True:
            try:
                fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    rel = self.rel(parts)
                    raise _fail(
                        f"the folder of {rel!r} stayed locked by another process for "
                        f"{LOCK_WAIT_S:g} s (a flock on it); nothing was written: try again",
                        "busy",
                        rel,
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
                continue
            except OSError as exc:
                if exc.errno not in _NO_FLOCK:
                    raise self.explain(exc, parts, "file") from exc
                yield
                return
            break
        self._locked.add(ident)
        try:
            yield
        finally:
            self._locked.discard(ident)
            with contextlib.suppress(OSError):
                fcntl.flock(dir_fd, fcntl.LOCK_UN)

    def _changed(self, parts: tuple[str, ...]) -> ToolFailed:
        rel = self.rel(parts)
        return _fail(
            f"{rel!r} changed while this call rewrote it (another process wrote it at the "
            "same time); it is left as that writer made it and this call wrote nothing: "
            "try again",
            "changed",
            rel,
        )

    def atomic_write(
        self,
        parts: tuple[str, ...],
        chunks: Iterator[bytes],
        *,
        append: bool = False,
        expect: os.stat_result | None = None,
    ) -> int:
        """Replace ``parts`` with the concatenated chunks atomically; returns bytes written
        by the caller's chunks. ``append`` copies the current content into the temp file
        first (so an append is atomic too, at the cost of a copy). The existing mode is kept;
        a symlink at the target is refused rather than silently replaced or followed.

        The folder's lock (:meth:`_lock`) is held from the look at the target to the
        rename, so tool calls that replace files in one folder take turns. A writer that
        takes no lock (a shell's ``>>``) is caught by a check: with ``append``, or with
        ``expect`` (the ``fstat`` of the file the caller read, as edit_file does), the
        target must still be the file read (device, inode, size, mtime, ctime) just
        before the rename, else ToolFailed ``changed`` and nothing is written (the
        caller may retry). Hazard: a change between that check and the rename, or one
        that keeps the size within one timestamp tick, is still replaced."""
        if not parts:
            raise _fail("cannot write to the workspace root", "root", ".")
        name = parts[-1]
        written = 0
        check = append or expect is not None
        self._check_would_be(parts, "write")  # before open_dir makes any folder
        with (
            self.open_dir(parts[:-1], create=True, access="write", leaf=name) as parent,
            self._lock(parent.fd, parts),
        ):
            self.check_allowed(parts, "write", fd=parent.fd, name=name)
            try:
                old = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
            except FileNotFoundError:
                old = None
            if old is not None and not stat.S_ISREG(old.st_mode):
                raise _fail(
                    f"{self.rel(parts)!r} is a {_kind(old.st_mode)}; only regular files can "
                    "be written",
                    f"is_{file_type(old.st_mode)}",
                    self.rel(parts),
                )
            if expect is not None and not _same_file(old, expect):
                raise self._changed(parts)
            if old is not None:
                self._check_writable(parent.fd, parts)
            tmp = f".{name[:32]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"  # < NAME_MAX
            held: set[int | signal.Signals] | None = None  # the signal mask to restore
            try:
                tfd, named = _open_temp(parent.fd, tmp)
            except OSError as exc:
                raise self.explain(exc, parts, "file") from exc
            try:
                with tfd:
                    if old is not None:
                        # New content drops set-id bits, as write(2) on the file would.
                        keep = stat.S_IMODE(old.st_mode) & ~(stat.S_ISUID | stat.S_ISGID)
                        os.fchmod(tfd.fd, keep)
                    if append and old is not None:
                        with Fd(
                            os.open(
                                name,
                                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                dir_fd=parent.fd,
                            )
                        ) as src:
                            if not _same_file(os.fstat(src.fd), old):
                                raise self._changed(parts)
                            while block := os.read(src.fd, 1 << 20):
                                write_all(tfd.fd, block)
                    for chunk in chunks:
                        write_all(tfd.fd, chunk)
                        written += len(chunk)
                    os.fsync(tfd.fd)
                    if check:
                        try:
                            now = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
                        except FileNotFoundError:
                            now = None
                        if not _same_file(now, old):
                            raise self._changed(parts)
                    if not named:
                        # The name exists only from here to the rename, and a SIGTERM (how
                        # a call ends when its zygote dies, child.py) waits until the name
                        # is gone: a kill between the two system calls would leave it.
                        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
                        os.link(f"/proc/self/fd/{tfd.fd}", tmp, dst_dir_fd=parent.fd)
                        named = True
                os.rename(tmp, name, src_dir_fd=parent.fd, dst_dir_fd=parent.fd)
                named = False
                os.fsync(parent.fd)
            except OSError as exc:
                if exc.errno == errno.EFBIG and _fsize_limited():
                    raise ResourceLimitExceeded(
                        f"writing {self.rel(parts)!r} would make it larger than the call's "
                        "file size limit (fsize_mb); the file is left as it was",
                        limit="fsize_mb",
                        path=self.rel(parts),
                    ) from exc
                raise self.explain(exc, parts, "file") from exc
            finally:
                if named:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=parent.fd)
                if held is not None:
                    signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return written

    def _check_writable(self, dir_fd: int, parts: tuple[str, ...]) -> None:
        """Refuse to replace the existing file ``parts`` (in ``dir_fd``) that this process may
        not write: the rename over it needs only the folder's write permission, so a file
        made read-only (0444, 0000) was silently replaced, where ``echo x > f`` in a shell
        gets "Permission denied". Only EACCES and EPERM refuse: a read-only mount (a
        policy's mask) is left to the rename, which says why in its own words (EBUSY)."""
        code = write_refused(dir_fd, parts[-1])
        if code not in (errno.EACCES, errno.EPERM):
            return
        rel = self.rel(parts)
        raise ToolFailed(
            f"permission denied for file {rel!r}: its permission bits do not let the sandbox "
            "user write it (read-only); nothing was written. Change its mode first (chmod "
            "u+w) if it is meant to be changed",
            reason="permission",
            path=rel,
            errno=errno.errorcode[code],
        )

    def delete(self, parts: tuple[str, ...], *, recursive: bool) -> str:
        """Remove a file, symlink (the link itself) or, with ``recursive``, a directory tree
        (shutil's fd-based rmtree: it never follows symlinks). Returns the type removed."""
        if not parts:
            raise _fail("refusing to delete the workspace root", "root", ".")
        self._check_would_be(parts, "write")  # "not found" only where it could be deleted
        with self.open_dir(parts[:-1], access="write", leaf=parts[-1]) as parent:
            self.check_allowed(parts, "write", fd=parent.fd, name=parts[-1])
            try:
                st = os.stat(parts[-1], dir_fd=parent.fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if not recursive:
                        raise _fail(
                            f"{self.rel(parts)!r} is a directory; pass recursive=true to "
                            "delete it and everything in it",
                            "is_directory",
                            self.rel(parts),
                        )
                    try:
                        shutil.rmtree(parts[-1], dir_fd=parent.fd)
                    except OSError as exc:
                        if exc.errno != errno.EMFILE:
                            raise
                        # rmtree holds a descriptor per level: a tree deeper than the
                        # call's nofile limit (made by a shell) is removed level by level.
                        _rmtree_deep(parent.fd, parts[-1])
                else:
                    os.unlink(parts[-1], dir_fd=parent.fd)
            except OSError as exc:
                raise self.explain(exc, parts) from exc
        return file_type(st.st_mode)

    def move(self, src: tuple[str, ...], dst: tuple[str, ...], *, overwrite: bool) -> None:
        """Rename within the workspace. Without ``overwrite``, renameat2(RENAME_NOREPLACE)
        makes "does not exist yet" and the rename one atomic step. A source and destination
        that are one file are refused (see :meth:`_refuse_same_file`)."""
        if not src or not dst:
            raise _fail("cannot move the workspace root or onto it", "root", ".")
        if dst == src:
            raise _fail(
                f"source and destination are the same path {self.rel(src)!r}; nothing to move",
                "same_path",
                self.rel(src),
            )
        if dst[: len(src)] == src:
            self._refuse_inside(src, dst)
        # "Not found" only where the source could be moved; no folder made for a refused
        # destination.
        self._check_would_be(src, "read")
        self._check_would_be(src, "write")
        self._check_would_be(dst, "write")
        with self.open_dir(src[:-1], leaf=src[-1]) as sp:
            # The source is read as well as changed: a move out of write-only paths into
            # readable ones would show what the policy keeps unreadable.
            self.check_allowed(src, "read", fd=sp.fd, name=src[-1])
            self.check_allowed(src, "write", fd=sp.fd, name=src[-1])
            try:
                sst = os.stat(src[-1], dir_fd=sp.fd, follow_symlinks=False)
            except OSError as exc:
                # Before the destination's folders are made: a missing source leaves none.
                raise self.explain(exc, src, "source") from exc
            with (
                self.open_dir(dst[:-1], create=True, access="write", leaf=dst[-1]) as dp,
                # Not between an append's (or an edit's) copy of the destination and its
                # rename, which would drop the moved file (that one's check would also
                # see it).
                self._lock(dp.fd, dst),
            ):
                self.check_allowed(dst, "write", fd=dp.fd, name=dst[-1])
                self._refuse_same_file(src, sst, dst, sp.fd, dp.fd)
                self._rename(src, sst, dst, sp.fd, dp.fd, overwrite=overwrite)

    def _refuse_inside(self, src: tuple[str, ...], dst: tuple[str, ...]) -> None:
        """Refuse ``dst``, a path below ``src``: a directory cannot go into itself, and
        below a file there is nothing (it said "directory into itself" of a file). A
        missing source is left to the move, which says so."""
        st = self._resolved_stat(src, "read")
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            raise _fail("cannot move a directory into itself", "into_itself", self.rel(dst))
        raise _fail(
            f"cannot move {self.rel(src)!r} to {self.rel(dst)!r}: {self.rel(src)!r} is a "
            f"{_kind(st.st_mode)}, not a directory, so nothing can be inside it",
            "not_a_directory",
            self.rel(dst),
        )

    def _rename(
        self,
        src: tuple[str, ...],
        sst: os.stat_result,
        dst: tuple[str, ...],
        sp: int,
        dp: int,
        *,
        overwrite: bool,
    ) -> None:
        """The rename of :meth:`move`, its errors told in the move's words."""
        try:
            if overwrite:
                os.rename(src[-1], dst[-1], src_dir_fd=sp, dst_dir_fd=dp)
            else:
                renameat2_noreplace(sp, src[-1], dp, dst[-1])
            os.fsync(dp)
            if sp != dp:
                os.fsync(sp)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise _fail(
                    f"destination {self.rel(dst)!r} already exists; pass overwrite=true "
                    "to replace it",
                    "exists",
                    self.rel(dst),
                ) from exc
            if exc.errno == errno.EXDEV:
                # Inside the sandbox, a mount boundary: a directory pinned because it
                # holds an entry the policy protects (runtime.backends.sandbox._pins).
                raise _fail(
                    f"cannot move {self.rel(src)!r} to {self.rel(dst)!r}: one of them is "
                    "inside a directory that holds an entry the policy hides or protects, "
                    "and nothing may be moved into or out of it (copy it instead)",
                    "masked",
                    self.rel(src),
                ) from exc
            if exc.errno == errno.EINVAL and _below(dp, sst, self.fd):
                # The lexical check above misses a destination reached through a
                # symlink ('dl/sub' with dl -> d): the kernel's EINVAL says the rest.
                raise _fail(
                    f"cannot move directory {self.rel(src)!r} into itself "
                    f"({self.rel(dst)!r} is inside it)",
                    "into_itself",
                    self.rel(dst),
                ) from exc
            if exc.errno in (errno.ENOTDIR, errno.EISDIR):
                mismatch = self._kind_mismatch(src, sst, dst, dp)
                if mismatch is not None:
                    raise mismatch from exc
            raise self.explain(exc, dst, "destination") from exc

    def _kind_mismatch(
        self, src: tuple[str, ...], sst: os.stat_result, dst: tuple[str, ...], dp: int
    ) -> ToolFailed | None:
        """The error for a rename of a directory over a non-directory (ENOTDIR, which
        explain() blames on a parent) or of a non-directory over a directory (EISDIR);
        None when the destination is not such a mismatch."""
        try:
            dst_st = os.stat(dst[-1], dir_fd=dp, follow_symlinks=False)
        except OSError:
            return None
        src_dir, dst_dir = stat.S_ISDIR(sst.st_mode), stat.S_ISDIR(dst_st.st_mode)
        if src_dir == dst_dir:
            return None
        s, d = self.rel(src), self.rel(dst)
        return _fail(
            f"cannot replace {d!r}, a {_kind(dst_st.st_mode)}, with {s!r}, a "
            f"{_kind(sst.st_mode)}: overwrite replaces a file with a file, or a directory "
            "with a directory (an empty one); delete the destination first",
            "is_a_directory" if dst_dir else "not_a_directory",
            d,
        )

    def _refuse_same_file(
        self, src: tuple[str, ...], sst: os.stat_result, dst: tuple[str, ...], sp: int, dp: int
    ) -> None:
        """Refuse a move whose source and destination are one file. rename(2) between two
        hard links of a file does nothing and succeeds (the tool said moved=true, the source
        still there); a symlink renamed over the file it points to replaces that file with
        a link to itself (its content is gone). coreutils' mv refuses both. Hazard: a
        concurrent call can change either name after this look; the rename then does what
        it would have done without it (nothing beyond the caller's own request)."""
        try:
            dst_st = os.stat(dst[-1], dir_fd=dp, follow_symlinks=False)
        except OSError:
            return  # no destination (or one the rename will report on)
        s, d = self.rel(src), self.rel(dst)
        if (dst_st.st_dev, dst_st.st_ino) == (sst.st_dev, sst.st_ino):
            if src[-1] == dst[-1] and _same_inode(sp, dp):
                raise _fail(
                    f"source {s!r} and destination {d!r} are the same entry (reached through "
                    "a symlinked folder); nothing to move",
                    "same_path",
                    d,
                )
            raise _fail(
                f"source {s!r} and destination {d!r} are hard links of one file; nothing to "
                "move (delete_file the source to drop that name)",
                "same_file",
                d,
            )
        if stat.S_ISLNK(sst.st_mode) and not stat.S_ISDIR(dst_st.st_mode):
            target = self._resolved_stat(src)
            if target is not None and (target.st_dev, target.st_ino) == (
                dst_st.st_dev,
                dst_st.st_ino,
            ):
                raise _fail(
                    f"source {s!r} is a symlink to the destination {d!r}: moving it there "
                    "would replace the file it points to with the link, and its content "
                    "would be lost",
                    "same_file",
                    d,
                )

    # ---------------------------------------------------------------------------- walking

    def walk(
        self,
        parts: tuple[str, ...],
        *,
        max_depth: int,
        max_entries: int | None = None,
        skip_dirs: frozenset[str] = frozenset(),
    ) -> Iterator[Entry]:
        """Depth-first, sorted, never following symlinks; each directory is opened with
        O_NOFOLLOW under its already-open parent, so a swap mid-walk cannot redirect it.
        ``max_depth`` 1 lists only the directory itself; (st_dev, st_ino) ends bind-mount
        loops; ``max_entries`` (default :data:`WALK_MAX_ENTRIES`) bounds the work on huge
        trees, and a walk it cuts short sets :attr:`walk_cut` (the caller's result must say
        truncated). Directories named in ``skip_dirs`` are listed but not entered. Skips
        ``.runtime`` at the root.

        Descriptors are held for the top :data:`WALK_HELD_FDS` levels only (see
        :class:`_Level`), so a tree as deep as the sandbox allows walks within its open-file
        limit; a deeper folder moved away mid-walk ends the walk, cut (:attr:`walk_cut`).

        With read globs narrower than everything, the top is judged by where it resolved
        (:meth:`open_dir` without ``leaf``): outside the globs, and holding nothing they
        could match, it is ``path_not_allowed``, as a missing one is; an empty listing of
        ``pub/link/inner`` (``pub/link -> ../private``) told that ``private/inner`` is a
        folder (red team N2)."""
        if max_entries is None:
            max_entries = WALK_MAX_ENTRIES
        top = self.open_dir(parts)
        base = "/".join(parts)
        # With read globs narrower than everything, only entries they allow are shown (by
        # where they are: the walk's top may have been reached through a symlink); every
        # directory is still entered, as an allowed path may lie below one that is not.
        real: str | None = None
        if self._allow["read"] is not None:
            real = self._resolved(top.fd)
            if real is None:
                real = base
        seen: set[tuple[int, int]] = set()
        count = 0
        stack: list[_Level] = []

        def push(fd: Fd, rel: str, depth: int) -> None:
            st = os.fstat(fd.fd)
            if (st.st_dev, st.st_ino) in seen:
                fd.close()
                return
            seen.add((st.st_dev, st.st_ino))
            with os.scandir(fd.fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            if len(stack) >= WALK_HELD_FDS:
                stack[-1].release()  # its own entries are listed; '..' leads back to it
            stack.append(_Level(fd, (st.st_dev, st.st_ino), rel, depth, iter(entries)))

        try:
            push(top, base, 1)
            while stack:
                level = stack[-1]
                fd, rel, depth = level.held(), level.rel, level.depth
                entry = next(level.entries, None)
                if entry is None:
                    done = stack.pop()
                    if stack and not stack[-1].back_from(done):
                        self.walk_cut = True  # moved away: its parent is out of reach
                        return
                    done.release()
                    continue
                if not rel and entry.name == STATE_DIR and self.refuse_state:
                    continue
                count += 1
                if count > max_entries:
                    self.walk_cut = True
                    return
                try:
                    st = os.stat(entry.name, dir_fd=fd.fd, follow_symlinks=False)
                except OSError:
                    continue  # vanished under us
                path = f"{rel}/{entry.name}" if rel else entry.name
                if real is None or self.allowed(_rebase(path, base, real), "read"):
                    yield Entry(
                        entry.name, path, file_type(st.st_mode), st.st_size, st.st_mtime, depth
                    )
                if (
                    stat.S_ISDIR(st.st_mode)
                    and (max_depth < 0 or depth < max_depth)
                    and entry.name not in skip_dirs
                ):
                    try:
                        child = os.open(
                            entry.name,
                            os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd.fd,
                        )
                    except OSError:
                        continue
                    push(Fd(child), path, depth + 1)
        finally:
            for level in stack:
                level.release()


#: Levels of a :meth:`Workspace.walk` that keep their descriptor. Deeper, a level lets its
#: descriptor go once its child is entered, and is reached again through the child's '..'.
#: Holding one per level, a tree 250 levels deep (the sandbox accepts 256) met the sandbox's
#: 256 open files (EMFILE) and failed the call; shallow trees never take the '..' path.
WALK_HELD_FDS = 32


class _Level:
    """One directory of a :meth:`Workspace.walk`: its descriptor (None while released), its
    identity, its path and depth, and its sorted entries still to look at."""

    __slots__ = ("depth", "entries", "fd", "ident", "rel")

    def __init__(
        self,
        fd: Fd,
        ident: tuple[int, int],
        rel: str,
        depth: int,
        entries: Iterator[os.DirEntry[str]],
    ) -> None:
        self.fd: Fd | None = fd
        self.ident = ident
        self.rel = rel
        self.depth = depth
        self.entries = entries

    def held(self) -> Fd:
        assert self.fd is not None, "a walk's current level holds its descriptor"
        return self.fd

    def release(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            fd.close()

    def back_from(self, child: _Level) -> bool:
        """Hold this level's descriptor again, coming back from ``child`` (entered from it):
        ``..`` of the child, accepted only if it is this very directory (device and inode),
        as :func:`_rmtree_deep` climbs. False when it is not: the child was moved elsewhere
        meanwhile (a shell in the workspace), and nothing but this directory may be listed
        as this level's, so the walk stops there. Whatever ``..`` is, it is only fstat'ed."""
        if self.fd is not None:
            return True
        try:
            up = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=child.held().fd)
        except OSError:
            return False
        st = os.fstat(up)
        if (st.st_dev, st.st_ino) != self.ident:
            os.close(up)
            return False
        self.fd = Fd(up)
        return True


@functools.lru_cache(maxsize=256)
def _segments(pattern: str) -> tuple[re.Pattern[str] | None, ...]:
    return compile_segments(pattern)


def _may_match_below(globs: GlobSet, path: str) -> bool:
    """Whether a glob of ``globs`` could match a path strictly below ``path`` (or ``path``
    itself): a segment-wise match of ``path``'s names that is still alive at their end."""
    names = path.split("/") if path else []
    for pattern in globs.patterns:
        segs = _segments(pattern)
        states = star_closure(segs, {0})
        for name in names:
            states = step_segments(segs, states, name)
            if not states:
                break
        if states:
            return True
    return False


def _rebase(path: str, base: str, real: str) -> str:
    """``path`` (below ``base``) as a path below ``real``, where ``base`` resolved."""
    below = path[len(base) + 1 :] if base else path
    return f"{real}/{below}" if real else below


def _rmtree_deep(parent_fd: int, name: str) -> None:
    """Remove the directory ``name`` in ``parent_fd`` and everything in it holding two
    descriptors at any time, however deep the tree. Each level is entered ``O_NOFOLLOW``;
    the way back up is ``..``, checked to be the directory it came down from (device and
    inode): a directory moved meanwhile stops the removal (EAGAIN), never one outside."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

    def ident(fd: int) -> tuple[int, int]:
        st = os.fstat(fd)
        return st.st_dev, st.st_ino

    cur = os.open(name, flags, dir_fd=parent_fd)
    # Per level below ``name``: its name, its identity, the subdirectories still to enter.
    names: list[str] = []
    idents = [ident(cur)]
    pending: list[list[str]] = []
    try:
        while True:
            if len(pending) < len(idents):
                subdirs = []
                with os.scandir(cur) as it:
                    listed = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
                for entry, is_dir in listed:
                    if is_dir:
                        subdirs.append(entry)
                    else:
                        os.unlink(entry, dir_fd=cur)
                pending.append(subdirs)
            if pending[-1]:
                sub = pending[-1].pop()
                nxt = os.open(sub, flags, dir_fd=cur)
                os.close(cur)
                cur = nxt
                names.append(sub)
                idents.append(ident(cur))
                continue
            pending.pop()
            if not names:
                break
            up = os.open("..", flags & ~os.O_NOFOLLOW, dir_fd=cur)
            os.close(cur)
            cur = up
            idents.pop()
            if ident(cur) != idents[-1]:
                raise OSError(errno.EAGAIN, "the tree moved while it was removed")
            os.rmdir(names.pop(), dir_fd=cur)
    finally:
        os.close(cur)
    os.rmdir(name, dir_fd=parent_fd)


def _fsize_limited() -> bool:
    """Whether this process has a file-size limit (the sandbox sets RLIMIT_FSIZE from the
    policy's fsize_mb): then EFBIG is that limit, not the file system's largest file."""
    return resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY


def _same_file(a: os.stat_result | None, b: os.stat_result | None) -> bool:
    """Whether two looks at a name saw one unchanged file (or both saw none)."""
    if a is None or b is None:
        return a is b
    return (a.st_dev, a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == (
        b.st_dev,
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
    )


def _same_inode(a: int, b: int) -> bool:
    sa, sb = os.fstat(a), os.fstat(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def _below(dir_fd: int, st: os.stat_result, root_fd: int) -> bool:
    """Whether the directory ``st`` is ``dir_fd`` or one of its parents below ``root_fd``
    (walked up by '..', at most a path's worth of levels)."""
    if not stat.S_ISDIR(st.st_mode):
        return False
    root = os.fstat(root_fd)
    cur = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        for _ in range(4096):
            here = os.fstat(cur)
            if (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino):
                return True
            if (here.st_dev, here.st_ino) == (root.st_dev, root.st_ino):
                return False
            up = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur)
            os.close(cur)
            cur = up
    except OSError:
        return False
    finally:
        os.close(cur)
    return False


def printable(name: str) -> str:
    """``name`` as a result can carry it. A name on disk may be any bytes; Python spells the
    non-UTF-8 ones as lone surrogates, which no JSON or msgpack encoder accepts, so one such
    file made a whole listing fail. They are shown as ``\\xNN`` escapes (as ``ls -b`` does):
    visible, though not a path a later call can open (JSON cannot carry those bytes at all).
    """
    if name.isascii():
        return name
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def glob_matcher(pattern: str, base: tuple[str, ...]) -> Callable[[Entry], bool]:
    """The filter of a listing's ``pattern``, compiled once: the project's path globs
    (:mod:`runtime._globs`, as the policy's, case-sensitive): ``*`` and ``?`` never cross
    '/', ``**`` as a whole segment is zero or more folders, ``[...]`` a class. A pattern
    without '/' matches an entry's name, at any depth; with '/', its path below ``base``.
    fnmatch on the whole path let ``src/*.py`` match ``src/sub/x/deeper.py`` and
    ``src/**/*.py`` miss ``src/a.py``."""
    rx = compile_glob(pattern)
    if "/" not in pattern:
        return lambda entry: rx.fullmatch(entry.name) is not None
    skip = len("/".join(base)) + 1 if base else 0
    return lambda entry: rx.fullmatch(entry.path[skip:]) is not None


#: flock's errors meaning the file system has no such lock (the write goes unlocked).
_NO_FLOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS})

#: Held while a written file's temporary name exists (``FileTree.write``).
_HELD = frozenset({signal.SIGTERM})


def _open_temp(dir_fd: int, tmp: str) -> tuple[Fd, bool]:
    """The temporary file of an atomic write, in ``dir_fd``: ``(fd, named)``.

    Anonymous (O_TMPFILE) where the file system and /proc allow it, so that a writer killed
    halfway (its broker SIGKILLed, the sandbox torn down by parent-death signals) leaves
    nothing behind; the caller links it as ``tmp`` just before the rename. Otherwise a
    named ``tmp``, which such a kill leaves in place.
    """
    if os.path.isdir("/proc/self/fd"):
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
        else:
            return Fd(fd), False
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return Fd(os.open(tmp, flags, 0o666, dir_fd=dir_fd)), True
