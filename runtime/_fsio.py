"""Low-level, workspace-agnostic file I/O for :mod:`runtime.toolkit_fs`: ``openat2`` with
RESOLVE_BENEATH and its O_NOFOLLOW-walk fallback, ``renameat2(RENAME_NOREPLACE)``, the fd
holder, and streaming readers. Private: tools use :mod:`runtime.toolkit_fs`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import stat
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from runtime._forksafe import ForkSafeLock

__all__ = [
    "Fd",
    "cache_home",
    "describe_kind",
    "file_type",
    "kept_file_problem",
    "library_path",
    "open_beneath",
    "own_library",
    "private_cache_dir",
    "private_dir",
    "private_file",
    "read_bytes",
    "read_lines",
    "renameat2_noreplace",
    "seek_line",
    "state_file_problem",
    "tmp_cache_home",
    "write_all",
    "write_refused",
]


def cache_home() -> Path:
    """The runtime's cache: ``$XDG_CACHE_HOME/runtime``, else ``~/.cache/runtime``. Native
    code the broker loads (the C accelerator, the sandbox's and the wasm host's helpers) and
    compiled wasm modules are kept below it, so it must never be in a workspace
    (``runtime/broker/_hostpaths.py``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runtime"


def tmp_cache_home() -> Path:
    """The cache's fallback for a user without a usable home: ``/tmp/runtime-<euid>``."""
    return Path(tempfile.gettempdir()) / f"runtime-{os.geteuid()}"


def private_cache_dir(name: str) -> Path | None:
    """``cache_home() / name`` when :func:`private_dir` accepts it, else the same below
    :func:`tmp_cache_home` (a system user may have no home), else None. Each level of the
    fallback is checked: whoever owned runtime-<uid> could swap what lies under it."""
    root = cache_home() / name
    if private_dir(root):
        return root
    tmp_root = tmp_cache_home()
    if private_dir(tmp_root) and private_dir(tmp_root / name):
        return tmp_root / name
    return None


_T = TypeVar("_T")

_SYS_OPENAT2 = 437  # same number on every architecture (new syscall table)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_RENAME_NOREPLACE = 1
_MAX_SYMLINKS = 40  # the kernel's own MAXSYMLINKS
_EAGAIN_TRIES = 8  # openat2 tries before the hand walk, when a ".." step keeps racing

_libc = ctypes.CDLL(None, use_errno=True)
_openat2_state = {"works": True}
_lock = ForkSafeLock()  # a forked child gets it unheld (runtime._forksafe)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


# Typed once: the per-call argument conversion is most of the cost of a small read.
_syscall_openat2 = ctypes.CFUNCTYPE(
    ctypes.c_long,
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.POINTER(_OpenHow),
    ctypes.c_size_t,
    use_errno=True,
)(("syscall", _libc))
_HOW_SIZE = ctypes.sizeof(_OpenHow)


def _openat2(dirfd: int, path: str, flags: int, mode: int) -> int:
    # The kernel rejects a non-zero mode (EINVAL) unless the open can create a file.
    # O_TMPFILE includes the O_DIRECTORY bit, hence the full-mask test.
    if not (flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE):
        mode = 0
    how = _OpenHow(flags | os.O_CLOEXEC, mode, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
    fd = int(_syscall_openat2(_SYS_OPENAT2, dirfd, os.fsencode(path), how, _HOW_SIZE))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return fd


def renameat2_noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> None:
    rc = _libc.renameat2(
        ctypes.c_int(src_dir),
        ctypes.c_char_p(os.fsencode(src)),
        ctypes.c_int(dst_dir),
        ctypes.c_char_p(os.fsencode(dst)),
        ctypes.c_uint(_RENAME_NOREPLACE),
    )
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), dst)


def write_refused(dir_fd: int, name: str) -> int:
    """The errno that ``faccessat(dir_fd, name, W_OK)`` gives (0: no refusal): whether the
    file's permission bits (and ACLs) let this process open it for writing. Real ids, the
    plain syscall (flags 0): this process never runs set-id, and AT_EACCESS needs
    faccessat2, which some container seccomp profiles answer EPERM for every file."""
    rc = _libc.faccessat(
        ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(name)), ctypes.c_int(os.W_OK), 0
    )
    return 0 if rc == 0 else ctypes.get_errno()


def file_type(mode: int) -> str:
    """``file | directory | symlink | other`` for an ``st_mode``."""
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def open_beneath(rootfd: int, parts: tuple[str, ...], flags: int, mode: int = 0o666) -> int:
    """Open ``parts`` beneath ``rootfd``; symlinks are followed only while they stay
    inside. Raises OSError: EXDEV for an escape, ELOOP, ENOENT, ..."""
    if _openat2_state["works"]:
        path = "/".join(parts) or "."
        for _ in range(_EAGAIN_TRIES):
            try:
                return _openat2(rootfd, path, flags, mode)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    # A '..' step raced with a rename or mount somewhere on the system
                    # (the kernel's global rename and mount sequence counts moved), so
                    # the kernel cannot vouch it stayed beneath: openat2(2) says retry.
                    continue
                if exc.errno != errno.ENOSYS:
                    raise
                # ENOSYS: an old kernel, or a seccomp filter hiding openat2. Remember it.
                with _lock:
                    _openat2_state["works"] = False
                break
        # Still racing (a host busy renaming) or no openat2: the same rule by hand, whose
        # descriptor-by-descriptor walk no rename elsewhere can disturb.
    return _walk_open(rootfd, list(parts), flags, mode)


def _walk_open(rootfd: int, comps: list[str], flags: int, mode: int) -> int:
    """RESOLVE_BENEATH by hand: a stack of O_PATH dir fds from the root; symlinks are
    read and their targets pushed back as components; '..' pops and may not pop the
    root; absolute targets are an escape."""
    stack = [os.dup(rootfd)]
    todo = list(reversed(comps))
    links = 0
    try:
        if not todo:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=stack[-1])
        while todo:
            comp = todo.pop()
            if comp in ("", "."):
                if not todo:
                    return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=stack[-1])
                continue
            if comp == "..":
                if len(stack) == 1:
                    raise OSError(errno.EXDEV, "path escapes the workspace", comp)
                os.close(stack.pop())
                if not todo:
                    return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=stack[-1])
                continue
            last = not todo
            try:
                st = os.stat(comp, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                if last and flags & os.O_CREAT:
                    return os.open(
                        comp, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1]
                    )
                raise
            if stat.S_ISLNK(st.st_mode) and not (last and flags & os.O_NOFOLLOW):
                links += 1
                if links > _MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, "too many symbolic links", comp)
                target = os.readlink(comp, dir_fd=stack[-1])
                if target.startswith("/"):
                    raise OSError(errno.EXDEV, "absolute symlink leaves the workspace", comp)
                todo.extend(reversed(target.split("/") or ["."]))
                continue
            if last:
                # O_NOFOLLOW: if the entry was swapped for a symlink since the stat, fail.
                return os.open(comp, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=stack[-1])
            stack.append(
                os.open(
                    comp,
                    os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=stack[-1],
                )
            )
        raise OSError(errno.ENOENT, "empty path")  # unreachable: loop returns
    finally:
        for fd in stack:
            os.close(fd)


class Fd:
    """One owned file descriptor; ``fd`` is -1 once closed (trio ``_FdHolder``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> Fd:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_BLOCK = 1 << 16


def seek_line(fd: int, offset: int) -> int | None:
    """Move ``fd`` (a seekable file, at the start of a line) to the start of the line
    ``offset`` lines on (1: where it is); that line's byte position, or None when the file
    ends before it. read_file reports the position, so a read cut inside a long line can
    be continued from a byte (``byte_offset``)."""
    lineno = 1  # number of the line that starts at ``pos``
    pos = os.lseek(fd, 0, os.SEEK_CUR)
    while lineno < offset:
        block = os.read(fd, _BLOCK)
        if not block:
            return None
        n = block.count(b"\n")
        if lineno + n < offset:
            lineno += n
            pos += len(block)
            continue
        at = -1
        for _ in range(offset - lineno):
            at = block.index(b"\n", at + 1)
        pos += at + 1
        return os.lseek(fd, pos, os.SEEK_SET)
    return pos


def read_lines(fd: int, offset: int, limit: int, max_bytes: int) -> tuple[bytes, int, bool]:
    """Stream lines ``offset`` (1-based) .. ``offset+limit-1`` from ``fd``, holding at most
    one block plus the selected bytes. Returns (bytes, lines, truncated); stops at
    ``max_bytes`` on a line boundary, or mid-line when a single line is too big. Works a
    block at a time (bytes.count / find in C), not a line at a time. Lines are counted
    from where ``fd`` is (a caller may seek to a byte first: the rest of a line read
    before counts as one). ``fd`` may be a pipe (no seeking here)."""
    lineno = 1  # number of the line that starts at the next unread byte
    data = b""
    while lineno < offset:
        block = os.read(fd, _BLOCK)
        if not block:
            return b"", 0, False
        n = block.count(b"\n")
        if lineno + n < offset:
            lineno += n
            continue
        pos = -1
        for _ in range(offset - lineno):
            pos = block.index(b"\n", pos + 1)
        data, lineno = block[pos + 1 :], offset
    out = bytearray()
    taken = 0  # complete lines in out
    while True:
        if not data:
            data = os.read(fd, _BLOCK)
            if not data:
                if out and not out.endswith(b"\n"):
                    taken += 1  # the last line has no newline
                return bytes(out), taken, False
        n = data.count(b"\n")
        if taken + n < limit and len(out) + len(data) <= max_bytes:
            out += data
            taken += n
            data = b""
            continue
        if taken + n >= limit:
            end = -1
            for _ in range(limit - taken):
                end = data.index(b"\n", end + 1)
            want, rest = data[: end + 1], data[end + 1 :]
            if len(out) + len(want) <= max_bytes:
                out += want
                return bytes(out), limit, bool(rest) or bool(os.read(fd, 1))
            data = want
        return _cut(out, taken, data, max_bytes)


def _cut(out: bytearray, taken: int, data: bytes, max_bytes: int) -> tuple[bytes, int, bool]:
    """The byte cap falls inside ``data``: keep whole lines, or the head of a single line
    that is larger than the cap by itself."""
    piece = data[: max(max_bytes - len(out), 0)]
    nl = piece.rfind(b"\n")
    if nl >= 0:
        out += piece[: nl + 1]
        return bytes(out), taken + piece.count(b"\n", 0, nl + 1), True
    if taken == 0:
        out += piece
        return bytes(out), 1, True
    del out[out.rfind(b"\n") + 1 :]  # drop a partial line carried from earlier blocks
    return bytes(out), taken, True


def read_bytes(fd: int, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` from ``fd``; truncated is true when more was there."""
    out = bytearray()
    while len(out) < max_bytes:
        block = os.read(fd, min(1 << 16, max_bytes - len(out)))
        if not block:
            return bytes(out), False
        out += block
    return bytes(out), bool(os.read(fd, 1))


def private_dir(path: Path) -> bool:
    """``path`` made (0700) or found as a directory (not a symlink) owned by us and closed to
    others' writes.

    Hazard: the caches that use it hold code we run (compiled modules, a helper we dlopen,
    a binary that becomes a sandbox's pid 1); in a shared /tmp another user could pre-create
    the directory and plant one."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _create_private(path: Path) -> None:
    """An empty 0600 file at ``path`` unless one appeared meanwhile (see private_file)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.{next(_temps)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    os.close(os.open(temp, flags, 0o600))
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links: create in place
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, flags, 0o600))
    finally:
        os.unlink(temp)


_temps = itertools.count()


def private_file(path: Path, *, create: bool = True) -> None:
    """Make the file at ``path`` readable and writable by its owner only: created empty with
    mode 0600 when absent (``create``; else an absent file is left absent), group and other
    bits taken off one we own. A file another user owns, or that is not a regular file, is
    left as it is (not ours to change); a symlink is not followed.

    Why: SQLite creates a database with the umask's mode (0644 by default: every local user
    reads every audited call's arguments), and its -wal and -shm files with the database
    file's mode; creating the file 0600 before SQLite does gives all three the owner's mode.

    Hazard: an existing file is never opened here. SQLite's locks are POSIX record locks,
    which the kernel drops when the process closes *any* descriptor of the file: opening
    and closing a database, -wal or -shm that a connection of this process has open
    released that connection's locks (another process then checkpointed or truncated under
    it: SIGBUS). So: lstat, then chmod by name (the directory is the owner's: nobody else
    can swap the name in between). A new file is made under a temporary name, closed, and
    linked into place: no descriptor of the file that has the name is ever closed here.
    Raises OSError."""
    if create and not os.path.lexists(path):
        _create_private(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if create:
            raise
        return
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)


def state_file_problem(path: Path) -> str | None:
    """Why the runtime must not open ``path``, a file it keeps in its state directory
    (``.runtime/audit.db``, ``.runtime/state.db``), or None when it may: the name is absent
    (:func:`private_file` then creates it 0600, without following a link) or is a regular
    file this user owns.

    Why: SQLite opens a symlinked name's target, and creates it when the link dangles. A
    checkout can carry ``.runtime/state.db -> /other/workspace/.runtime/state.db`` (another
    workspace's memories read and written) or a dangling link (a root broker made a 0644
    file wherever it pointed). Decided by ``lstat`` (no link followed); the caller opens the
    file afterwards, so a caller that opens it more than once checks what SQLite opened
    too (see ``tools/memory``)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be checked: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return (
            f"is a symlink (to {target}): the runtime does not follow a link out of its state "
            "directory (a checkout can carry one)"
        )
    return kept_file_problem(st)


def describe_kind(mode: int) -> str:
    """ "a FIFO", "a directory"…: what a file that is not a regular one is, for messages."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return f"file type {stat.S_IFMT(mode):o}"


def kept_file_problem(
    st: os.stat_result, *, owners: Collection[int] = (), shared_write: bool = True
) -> str | None:
    """Why a file whose status is ``st`` (``lstat`` by name, or ``fstat`` of a descriptor
    opened with ``O_NOFOLLOW``) is not one the runtime keeps, or None: it must be a regular
    file owned by this user (or by a uid in ``owners``), and, unless ``shared_write``, not
    writable by group or others. The one check behind :func:`state_file_problem` and the
    audit journals' (``runtime.audit._journal``)."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symlink"
    if not stat.S_ISREG(st.st_mode):
        return f"is not a regular file ({describe_kind(st.st_mode)})"
    if st.st_uid != os.geteuid() and st.st_uid not in owners:
        return (
            f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()}): its owner "
            "could read or replace what the runtime keeps there"
        )
    if not shared_write and st.st_mode & 0o022:
        return (
            f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o}): anyone "
            "who may write it could have changed what the runtime keeps there"
        )
    return None


# How many libraries this process has named for dlopen (see library_path).
_loads = itertools.count()


def library_path(fd: int) -> str:
    """A path by which ``dlopen`` loads the open file ``fd`` (while it stays open) and that
    names no other file this process ever loads.

    Hazard it exists for: glibc's dlopen hands back an object already loaded under the same
    *name* (a string compare) without opening the path. Libraries loaded one after another
    as ``/proc/self/fd/N`` — N reused once the first descriptor was closed — would all get
    the first one's code (a missing symbol at best). Here the k-th load of the process is
    named ``/proc/<pid>/fd/`` + k times ``../fd/`` + N: each ``fd/..`` walks back to
    ``/proc/<pid>``, so the path opens the same descriptor, under a string no earlier load
    used; the pid keeps it apart from names a parent used before it forked this process."""
    return f"/proc/{os.getpid()}/fd/{'../fd/' * next(_loads)}{fd}"


def own_library(path: Path, what: str, load: Callable[[str], _T]) -> _T:
    """``load(name)`` of the library at ``path`` once it is known to be ours: opened without
    following a symlink, checked on the open descriptor (a regular file owned by us, closed
    to others' writes), and loaded through that descriptor (:func:`library_path`), so a file
    swapped in after the check is never the one loaded. OSError (naming ``what``) otherwise,
    or when there is no /proc to load it through."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(f"{path} is not ours alone; {what} is not loaded")
        name = library_path(fd)
        if not os.path.exists(name):
            raise OSError(f"no /proc/<pid>/fd to load it through; {what} is not loaded")
        return load(name)
    finally:
        os.close(fd)
