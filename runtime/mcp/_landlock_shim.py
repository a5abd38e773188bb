"""The last wrapper before an external MCP server runs: Landlock, then exec.

Run as ``python3 -I -S _landlock_shim.py SCRATCH -- COMMAND...`` (the source is passed with
``-c`` so nothing needs to be importable by the sandbox user). Every write-type filesystem
access is handled by the ruleset and allowed only beneath SCRATCH (the server's private
home/tmp) and on /dev/null; reads stay as the uid's permissions allow. Landlock survives
exec and cannot be lifted, so the server and everything it starts keep it.

It must not depend on the runtime package: it runs with the system interpreter as uid
nobody, which may not be able to read the broker's installation. Exit 126 on any failure:
the server never starts without its wall.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and arm64 share
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3


def _fail(message: str) -> None:
    sys.stderr.write(f"runtime mcp launcher: {message}\n")
    sys.stderr.flush()
    os._exit(126)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        _fail("usage: SCRATCH -- COMMAND...")
    scratch, command = argv[0], argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32]
    abi = syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    if abi < 1:
        _fail(f"Landlock is not available (errno {ctypes.get_errno()})")
    handled = _WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    attr = struct.pack("=Q", handled)  # the v1 layout: the kernel accepts a shorter struct
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = syscall(_SYS_CREATE_RULESET, ctypes.addressof(buf), len(attr), 0)
    if ruleset < 0:
        _fail(f"landlock_create_ruleset failed (errno {ctypes.get_errno()})")
    file_rights = handled & (_WRITE_FILE | _TRUNCATE)
    for path, rights in ((scratch, handled), ("/dev/null", file_rights)):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError as exc:
            _fail(f"cannot open {path}: {exc.strerror}")
        rule = struct.pack("=Qi", rights, fd)
        rbuf = ctypes.create_string_buffer(rule, len(rule))
        add = ctypes.CDLL(None, use_errno=True).syscall
        add.restype = ctypes.c_long
        add.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
        if add(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.addressof(rbuf), 0) != 0:
            _fail(f"landlock_add_rule {path} failed (errno {ctypes.get_errno()})")
        os.close(fd)
    restrict = ctypes.CDLL(None, use_errno=True).syscall
    restrict.restype = ctypes.c_long
    restrict.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_uint32]
    # no_new_privs is already set by setpriv; Landlock requires it (or CAP_SYS_ADMIN).
    if restrict(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
        _fail(f"landlock_restrict_self failed (errno {ctypes.get_errno()})")
    os.close(ruleset)
    try:
        os.execvp(command[0], command)  # noqa: S606 - argv from the policy, never a shell
    except OSError as exc:
        _fail(f"cannot execute {command[0]}: {exc.strerror}")


if __name__ == "__main__":
    main(sys.argv[1:])
