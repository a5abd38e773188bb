"""Raw Linux system calls the sandbox needs and Python 3.11 does not wrap.

Every wrapper raises ``OSError`` with the kernel's errno (never a string to parse), so the
child set-up can fail fast with the errno of the step that broke. Only x86_64 is supported:
the syscall numbers below and the seccomp architecture check are for that ABI.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = [
    "AT_EMPTY_PATH",
    "AT_RECURSIVE",
    "CLONE_NEWCGROUP",
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "CLONE_NEWUTS",
    "CLONE_PARENT",
    "MNT_DETACH",
    "MOUNT_ATTR_IDMAP",
    "MOUNT_ATTR_NODEV",
    "MOUNT_ATTR_NOEXEC",
    "MOUNT_ATTR_NOSUID",
    "MOUNT_ATTR_RDONLY",
    "MOVE_MOUNT_F_EMPTY_PATH",
    "MOVE_MOUNT_T_EMPTY_PATH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "NS_FLAGS",
    "OPEN_TREE_CLOEXEC",
    "OPEN_TREE_CLONE",
    "RESOLVE_BENEATH",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "RESOLVE_NO_XDEV",
    "SUPPORTED",
    "capset_zero",
    "clone",
    "fs_magic",
    "get_pdeathsig",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "mount",
    "mount_setattr",
    "move_mount",
    "move_mount_onto",
    "open_tree",
    "openat2",
    "pivot_root",
    "prctl",
    "seccomp_load_bpf",
    "set_name",
    "setrlimit",
    "syscall",
    "umount2",
    "unshare",
]

SUPPORTED = platform.machine() == "x86_64" and os.uname().sysname == "Linux"

CLONE_PARENT = 0x00008000  # the child's parent is the caller's parent
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
#: Every namespace flag (plus CLONE_NEWTIME 0x80): the seccomp filter refuses clone with any.
NS_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | 0x00000080
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = 0o2000000
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOVE_MOUNT_T_EMPTY_PATH = 0x40
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4
MOUNT_ATTR_NOEXEC = 0x8
MOUNT_ATTR_IDMAP = 0x100000

_NR = {
    "clone": 56,
    "capset": 126,
    "pivot_root": 155,
    "prlimit64": 302,
    "open_tree": 428,
    "move_mount": 429,
    "openat2": 437,
    "mount_setattr": 442,
    "landlock_create_ruleset": 444,
    "landlock_add_rule": 445,
    "landlock_restrict_self": 446,
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


_libc.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]


def fs_magic(fd: int) -> int:
    """The ``f_type`` magic number of the filesystem ``fd`` is on (``fstatfs(2)``); 0 when
    it cannot be told."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on x86_64
    if _libc.fstatfs(fd, buf) != 0:
        return 0
    # f_type is the first field, a signed long; magic numbers are 32-bit values.
    return int.from_bytes(buf.raw[:8], "little", signed=True) & 0xFFFFFFFF


def _check(res: int, what: str) -> int:
    if res < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return res


def syscall(nr: int, *args: int | bytes | ctypes.c_void_p | None) -> int:
    """A raw syscall; returns the kernel's result or -errno (never raises): for probes."""
    cargs = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    res = int(_libc.syscall(ctypes.c_long(nr), *cargs))
    return -ctypes.get_errno() if res == -1 else res


def _sys(name: str, *args: object) -> int:
    cargs = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return _check(int(_libc.syscall(ctypes.c_long(_NR[name]), *cargs)), name)


# The GIL stays held across this call (PyDLL, not CDLL): the child of a raw clone must not
# find the interpreter in the middle of handing the GIL back.
_pylibc = ctypes.PyDLL(None, use_errno=True)
_pylibc.syscall.restype = ctypes.c_long


def clone(flags: int) -> int:
    """fork(2) with namespace flags: a raw ``clone`` (SIGCHLD to the parent, no new stack).

    Returns the child's pid in the parent and 0 in the child, like ``os.fork``. Hazards: it
    skips what ``os.fork`` and glibc's ``fork`` do around the system call. glibc's cached
    thread id in the child is the parent's (``raise``/``abort`` aim at it; ``abort`` still
    ends the process), its at-fork lock resets do not run (nothing holds those locks in a
    single-threaded caller in a system call), and Python's at-fork hooks and interpreter
    re-initialisation do not run (no other thread, a pending signal handler of the parent
    may run once). Only single-threaded callers may use it, and the child must only set
    itself up and ``os.fork`` (which re-initialises properly) or ``os._exit``.
    """
    res = int(
        _pylibc.syscall(
            ctypes.c_long(_NR["clone"]),
            ctypes.c_long(flags | 17),  # SIGCHLD: the exit signal, as for fork
            ctypes.c_long(0),
            ctypes.c_long(0),
            ctypes.c_long(0),
            ctypes.c_long(0),
        )
    )
    return _check(res, "clone")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount2 {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    _sys("pivot_root", new_root.encode(), put_old.encode())


def prctl(option: int, a2: int = 0, a3: int = 0, a4: int = 0, a5: int = 0) -> int:
    return _check(_libc.prctl(option, a2, a3, a4, a5), f"prctl {option}")


def set_name(name: bytes) -> None:
    """PR_SET_NAME: the process's name (``comm``, 15 bytes) as listings show it."""
    buf = ctypes.create_string_buffer(name[:15])
    _check(_libc.prctl(15, ctypes.addressof(buf), 0, 0, 0), "prctl(PR_SET_NAME)")


def get_pdeathsig() -> int:
    """The calling process's parent-death signal (0: none)."""
    sig = ctypes.c_int(0)
    _check(_libc.prctl(2, ctypes.addressof(sig), 0, 0, 0), "prctl(PR_GET_PDEATHSIG)")
    return sig.value


def open_tree(path: str, flags: int) -> int:
    return _sys("open_tree", -100, path.encode(), flags)


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def mount_setattr(
    fd: int, attr_set: int, userns_fd: int = 0, flags: int = 0, *, attr_clr: int = 0
) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, userns_fd)
    _sys(
        "mount_setattr",
        fd,
        b"",
        AT_EMPTY_PATH | flags,
        ctypes.cast(ctypes.pointer(attr), ctypes.c_void_p),
        ctypes.sizeof(attr),
    )


def move_mount(fd: int, target: str) -> None:
    _sys("move_mount", fd, b"", -100, target.encode(), MOVE_MOUNT_F_EMPTY_PATH)


def move_mount_onto(fd: int, target_fd: int) -> None:
    """The detached tree ``fd`` mounted on what the descriptor ``target_fd`` names."""
    _sys("move_mount", fd, b"", target_fd, b"", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH)


def openat2(dir_fd: int, path: str, flags: int, resolve: int) -> int:
    """``openat2(2)`` with ``struct open_how`` {flags, mode 0, resolve}: a new descriptor."""
    how = (ctypes.c_uint64 * 3)(flags, 0, resolve)
    return _sys("openat2", dir_fd, path.encode(), how, ctypes.sizeof(how))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def capset_zero() -> None:
    """Drop every capability (effective, permitted, inheritable) of the calling thread."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    # byref and the array itself are passed as pointers: ctypes.cast/pointer would build
    # a function object and a pointer type on first use (~0.1 ms in each call's tool).
    _sys("capset", ctypes.byref(header), data)


def setrlimit(res: int, soft: int, hard: int) -> None:
    """``prlimit64`` of the calling process. Not ``resource.setrlimit``: that one turns
    EPERM and EINVAL into a ValueError, which no set-up phase would name."""
    limit = (ctypes.c_uint64 * 2)(soft, hard)
    _sys("prlimit64", 0, res, limit, None)


def landlock_create_ruleset(attr: bytes | None, flags: int) -> int:
    if attr is None:
        return _sys("landlock_create_ruleset", None, 0, flags)
    buf = ctypes.create_string_buffer(attr, len(attr))
    return _sys("landlock_create_ruleset", buf, len(attr), flags)


def landlock_add_rule(ruleset_fd: int, rule_type: int, attr: bytes) -> None:
    buf = ctypes.create_string_buffer(attr, len(attr))
    _sys("landlock_add_rule", ruleset_fd, rule_type, buf, 0)


def landlock_restrict_self(ruleset_fd: int) -> None:
    _sys("landlock_restrict_self", ruleset_fd, 0)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_load_bpf(program: bytes) -> None:
    """Install a classic-BPF seccomp filter (8-byte instructions). Needs no_new_privs."""
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    # PR_SET_SECCOMP = 22, SECCOMP_MODE_FILTER = 2
    _check(
        _libc.prctl(22, 2, ctypes.addressof(prog), 0, 0),
        "prctl(PR_SET_SECCOMP)",
    )
