"""Landlock rulesets: grant only what was mounted, write only where the call may write.

Landlock stacks on the mount namespace: even if a mount were wrong, a path outside the rules
is refused with EACCES. The ruleset is built from the ABI the kernel reports, so bits an older
kernel does not know are never requested (that would be EINVAL).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterable

from runtime.backends.sandbox import _linux

__all__ = [
    "EXEC_READ",
    "READ",
    "RW_DEV",
    "WRITE",
    "apply_ruleset",
    "fs_mask",
    "ruleset_attr",
]

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

READ = READ_FILE | READ_DIR
EXEC_READ = READ | EXECUTE
#: Write access to a tree: everything but device nodes (never creatable in the sandbox).
WRITE = (
    READ
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
RW_DEV = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV

_NET_BIND_TCP = 1
_NET_CONNECT_TCP = 2
_SCOPE_ABSTRACT_UNIX = 1
_SCOPE_SIGNAL = 2
_RULE_PATH_BENEATH = 1


def fs_mask(abi: int) -> int:
    """Every filesystem access right this ABI knows (all of them are 'handled')."""
    mask = (1 << 13) - 1
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def ruleset_attr(abi: int, *, allow_tcp: bool = False) -> tuple[int, int, int, int]:
    """The ruleset's ``struct landlock_ruleset_attr`` for this ABI: (handled filesystem
    rights, handled network rights, scopes, the size of the struct the ABI knows). With ABI
    >= 4 TCP bind/connect are handled (so denied without a rule) unless ``allow_tcp``; with
    ABI >= 6 the abstract unix socket and signal scopes."""
    tcp = 0 if allow_tcp else _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        return fs_mask(abi), tcp, _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL, 24
    if abi >= 4:
        return fs_mask(abi), tcp, 0, 16
    return fs_mask(abi), 0, 0, 8


#: ``walls.STRICT``: the rule's path has no symlink in it and is a directory or regular file.
_STRICT = 4


def _open_strict(path: str) -> int | None:
    """An O_PATH descriptor of ``path`` opened component by component ``O_NOFOLLOW`` (as
    ``openat2``'s RESOLVE_NO_SYMLINKS in ``mountops.c``), when it is a directory or a
    regular file; None when it is absent, is not, or holds a symlink."""
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    parts = [p for p in path.split("/") if p]
    try:
        fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    for i, name in enumerate(parts):
        last = i == len(parts) - 1
        try:
            nxt = os.open(name, flags if last else flags | os.O_DIRECTORY, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = nxt
    kind = stat.S_IFMT(os.fstat(fd).st_mode)
    if kind not in (stat.S_IFDIR, stat.S_IFREG):
        os.close(fd)
        return None
    return fd


def apply_ruleset(
    abi: int,
    rules: Iterable[tuple[str, int] | tuple[str, int, int]],
    *,
    allow_tcp: bool = False,
) -> None:
    """Restrict the calling thread (and its future children) to ``rules``.

    ``rules`` are (path, access) pairs, or (path, access, ``walls.STRICT``) for a path that
    is granted only when it holds no symlink (else skipped: nothing granted); access bits
    the ABI lacks are dropped. With ABI >= 4
    TCP bind/connect are handled with no rule, so every port is denied — unless
    ``allow_tcp`` (a process the policy grants the network: its net namespace is the
    host's, and Landlock then leaves TCP alone); with ABI >= 6 the abstract unix socket and
    signal scopes confine the tool to its own domain. Needs no_new_privs (set earlier).
    Raises OSError with the failing step's errno.
    """
    handled, tcp, scope, size = ruleset_attr(abi, allow_tcp=allow_tcp)
    attr = struct.pack("=QQQ", handled, tcp, scope)[:size]
    ruleset = _linux.landlock_create_ruleset(attr, 0)
    try:
        for path, access, *how in rules:
            if how and how[0] & _STRICT:
                strict = _open_strict(path)
                if strict is None:
                    continue
                fd = strict
            else:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                allowed = access & handled
                # The opened inode itself (fstat works on O_PATH): no second look-up of
                # the path, which could name something else by then.
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    # Directory-only rights on a file are EINVAL.
                    allowed &= READ_FILE | WRITE_FILE | EXECUTE | TRUNCATE | IOCTL_DEV
                _linux.landlock_add_rule(
                    ruleset, _RULE_PATH_BENEATH, struct.pack("=Qi", allowed, fd)
                )
            finally:
                os.close(fd)
        _linux.landlock_restrict_self(ruleset)
    finally:
        os.close(ruleset)
