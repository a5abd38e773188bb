"""Build ``pid1.c``, the sandbox's tiny pid 1, with the pinned ``ziglang`` from PyPI.

The broker builds it once (``build``; cached under a digest of the source, the compiler
version and the flags) and passes the path to the zygote, which copies it into a sealed
memfd (``load``): what every call executes cannot change under it afterwards, and the
sandbox uid needs no path to the cache to execute it.

A missing compiler or a failed build is not fatal: the call's Python pid 1 then stays
alive as the reaper (slower: its address space is torn down at the end of each call).

The same build makes ``sigexit.so`` beside it (``SIGEXIT_SOURCE``): the fatal-signal handler
of a tool process that is itself pid 1 (``child.py``, one copy per call). The zygote maps it
once from a sealed memfd (``load_sigexit``); without it every call keeps a reaper.

And ``cloner.so`` (``CLONER_SOURCE``): the cloner's loop in C (``load_cloner``), so that the
cloner writes none of its Python heap between clones; without it the loop is Python's. And
``mountops.so`` (``MOUNTOPS_SOURCE``): the call's new root as one list of operations run in
C (``load_mount_ops``, ``newroot.build``); without it the same list runs in Python.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime._forksafe import ForkSafeLock
from runtime._fsio import library_path, private_cache_dir
from runtime._zigcc import zig_cc
from runtime.errors import SandboxError

if TYPE_CHECKING:
    from runtime.backends.sandbox.newroot import MountOps

__all__ = [
    "CFLAGS",
    "CLONER_NAME",
    "CLONER_SOURCE",
    "MOUNTOPS_NAME",
    "MOUNTOPS_SOURCE",
    "SIGEXIT_CFLAGS",
    "SIGEXIT_NAME",
    "SIGEXIT_SOURCE",
    "SOURCE",
    "ClonerServe",
    "build",
    "cache_dir",
    "load",
    "load_cloner",
    "load_mount_ops",
    "load_sigexit",
    "self_kill_filter",
]

SOURCE = Path(__file__).with_name("pid1.c")
SIGEXIT_SOURCE = Path(__file__).with_name("sigexit.c")
#: The raw system call both include.
RAWSYS_HEADER = Path(__file__).with_name("rawsys.h")
#: Built beside ``pid1`` in the same digest directory.
SIGEXIT_NAME = "sigexit.so"
CLONER_SOURCE = Path(__file__).with_name("cloner.c")
CLONER_NAME = "cloner.so"
MOUNTOPS_SOURCE = Path(__file__).with_name("mountops.c")
MOUNTOPS_NAME = "mountops.so"
CFLAGS = (
    "-target",
    "x86_64-linux-none",
    "-Os",
    "-static",
    "-nostdlib",
    "-ffreestanding",
    "-fno-stack-protector",
    "-fno-builtin",
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wl,--strip-all",
)
SIGEXIT_CFLAGS = (
    *(flag for flag in CFLAGS if flag != "-static"),
    "-shared",
    "-fPIC",
)
_lock = ForkSafeLock()  # a forked child gets it unheld (runtime._forksafe)
_MFD_CLOEXEC = 0x1
_MFD_ALLOW_SEALING = 0x2
_MFD_EXEC = 0x10  # kernel >= 6.3: say so, or the kernel warns (vm.memfd_noexec)
_F_ADD_SEALS = 1033
_SEALS = 0x1 | 0x2 | 0x4 | 0x8  # SEAL, SHRINK, GROW, WRITE


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/runtime/sandbox`` or ``~/.cache/…``; else a private dir in /tmp
    (a system user such as the test suite's ``rtsbx`` may have no home)."""
    found = private_cache_dir("sandbox")
    if found is None:
        raise SandboxError("no private cache directory for the sandbox's pid 1")
    return found


def _digest() -> str:
    from importlib.metadata import version

    h = hashlib.sha256()
    h.update(f"zig {version('ziglang')} {' '.join(CFLAGS)}\n".encode())
    h.update(SOURCE.read_bytes())
    h.update(f"{' '.join(SIGEXIT_CFLAGS)}\n".encode())
    h.update(SIGEXIT_SOURCE.read_bytes())
    h.update(CLONER_SOURCE.read_bytes())
    h.update(MOUNTOPS_SOURCE.read_bytes())
    h.update(RAWSYS_HEADER.read_bytes())
    return h.hexdigest()[:16]


def build(out_dir: Path | None = None) -> Path:
    """The built binary's path (compiled now unless an up-to-date one exists); the
    fatal-signal library ``SIGEXIT_NAME``, the cloner's loop ``CLONER_NAME`` and the set-up's
    ``MOUNTOPS_NAME`` are built beside it."""
    root = out_dir if out_dir is not None else cache_dir()
    out = root / _digest()
    target = out / "pid1"
    with _lock:
        libs = [out / SIGEXIT_NAME, out / CLONER_NAME, out / MOUNTOPS_NAME]
        if target.is_file() and all(lib.is_file() for lib in libs):
            return target
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
        zig_cache = str(root / "zig-cache")
        env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": zig_cache, "ZIG_LOCAL_CACHE_DIR": zig_cache}
        # The library first: pid1 appearing is what says the directory is complete.
        for source, lib in zip((SIGEXIT_SOURCE, CLONER_SOURCE, MOUNTOPS_SOURCE), libs, strict=True):
            zig_cc([source], SIGEXIT_CFLAGS, lib, what=f"the sandbox's {lib.stem}", env=env)
        zig_cc([SOURCE], CFLAGS, target, what="the sandbox's pid1", env=env)
    return target


def load(path: str, name: str = "runtime-pid1") -> int:
    """A sealed, executable memfd holding the binary at ``path`` (close-on-exec)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x7fELF"):
        raise OSError(f"{path} is not an ELF binary")
    try:
        fd = os.memfd_create(name, _MFD_CLOEXEC | _MFD_ALLOW_SEALING | _MFD_EXEC)
    except OSError:
        fd = os.memfd_create(name, _MFD_CLOEXEC | _MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, 0o555)
        fcntl.fcntl(fd, _F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def load_sigexit(pid1_path: str) -> Callable[[], int]:
    """Map the ``sigexit.so`` built beside ``pid1_path`` (through a sealed memfd: what is
    mapped cannot change under us) and return its installer: it sets the exit-with-128+n
    handler for every fatal signal of the calling process and returns 0 or -errno. OSError
    if the library is missing or will not load."""
    path = str(Path(pid1_path).with_name(SIGEXIT_NAME))
    fd = load(path, "runtime-sigexit")
    try:
        # Hazard: dlopen returns an already loaded library of the same *name*: the name
        # must be this file's alone (``library_path`` gives a name no earlier load used).
        lib = ctypes.CDLL(library_path(fd))
        install = lib.runtime_sigexit_install
    except (OSError, AttributeError) as exc:
        raise OSError(f"cannot load {path}: {exc}") from exc
    finally:
        os.close(fd)  # the mapping keeps the file
    install.restype = ctypes.c_long
    install.argtypes = []
    return cast("Callable[[], int]", install)


#: ``runtime_cloner_serve(sock, buf, size, fds, got)`` (``cloner.c``).
ClonerServe = Callable[[int, Any, int, Any, Any], int]


def _function(pid1_path: str, name: str, symbol: str, argtypes: list[Any]) -> Any:
    """``symbol`` of the library ``name`` built beside ``pid1_path``, mapped through a sealed
    memfd (what is mapped cannot change under us), through ``ctypes.PyDLL``: the GIL stays
    held across the call (see ``load_cloner``). OSError if it is missing or will not load."""
    path = str(Path(pid1_path).with_name(name))
    fd = load(path, f"runtime-{Path(name).stem}")
    try:
        # Hazard: dlopen returns an already loaded library of the same *name*
        # (``library_path`` gives a name no earlier load used).
        func = getattr(ctypes.PyDLL(library_path(fd)), symbol)
    except (OSError, AttributeError) as exc:
        raise OSError(f"cannot load {path}: {exc}") from exc
    finally:
        os.close(fd)
    func.restype = ctypes.c_long
    func.argtypes = argtypes
    return func


def load_cloner(pid1_path: str) -> ClonerServe:
    """The cloner's loop, ``runtime_cloner_serve`` of ``cloner.so``. The GIL must stay held
    across it (PyDLL): the child of its clone returns from it into Python, and a ``CDLL``
    call would hand the GIL back around it."""
    argtypes = [
        ctypes.c_long,
        ctypes.c_void_p,
        ctypes.c_long,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_long),
    ]
    return cast("ClonerServe", _function(pid1_path, CLONER_NAME, "runtime_cloner_serve", argtypes))


def load_mount_ops(pid1_path: str) -> MountOps:
    """The set-up's operation list runner, ``runtime_mount_ops`` of ``mountops.so``
    (``newroot.build``). A call's pid 1 runs it in one go: holding the GIL costs nothing."""
    argtypes = [
        ctypes.c_char_p,
        ctypes.c_long,
        ctypes.c_void_p,
        ctypes.c_long,
        ctypes.POINTER(ctypes.c_long),
    ]
    return cast("MountOps", _function(pid1_path, MOUNTOPS_NAME, "runtime_mount_ops", argtypes))


# Classic BPF for seccomp (linux/filter.h, linux/seccomp.h), x86_64 only.
_LD_ABS_W = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_TRAP = 0x00030000
_AUDIT_ARCH_X86_64 = 0xC000003E
_NR_KILL, _NR_RT_SIGQUEUEINFO, _NR_TKILL, _NR_TGKILL = 62, 129, 200, 234


def _arg_lo(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` in ``struct seccomp_data``: the
    kernel reads these arguments as ``int`` (pid_t, signal number)."""
    return 16 + 8 * index


def self_kill_filter() -> bytes:
    """A second seccomp filter for a tool that is its call's pid 1: a SIGKILL it sends
    itself — ``kill(1 or 0, SIGKILL)``, ``tkill(1, …)``, ``tgkill(1, …)``,
    ``rt_sigqueueinfo(1, …)`` — is trapped (SIGSYS with data 9), and ``sigexit.c`` exits
    with 137, as if it had been killed. The kernel would drop it: an init cannot be killed
    from inside its own pid namespace. Everything else is allowed here (the call's main
    filter decides); a foreign ABI is left to that filter, which kills the process.

    Known gap: ``tkill`` of another thread's id with SIGKILL is not seen (the ids are not
    known in advance) and is dropped by the kernel; the call then ends at its timeout."""
    kill = int(signal.SIGKILL)
    # (syscall, pid argument, signal argument, pids that mean "this process")
    cases = (
        (_NR_KILL, 0, 1, (1, 0)),
        (_NR_TKILL, 0, 1, (1,)),
        (_NR_TGKILL, 0, 2, (1,)),
        (_NR_RT_SIGQUEUEINFO, 0, 1, (1,)),
    )
    prog: list[tuple[int, int, int, int]] = [
        (_LD_ABS_W, 0, 0, 4),  # arch
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_LD_ABS_W, 0, 0, 0),  # syscall number
    ]
    for nr, pid_arg, sig_arg, pids in cases:
        m = len(pids)
        # The block: signal is SIGKILL, then pid is one of ``pids`` → trap; else allow. It
        # always returns, so the next case's test still sees the syscall number.
        prog.append((_JEQ_K, 0, 5 + m, nr))
        prog.append((_LD_ABS_W, 0, 0, _arg_lo(sig_arg)))
        prog.append((_JEQ_K, 0, m + 1, kill))
        prog.append((_LD_ABS_W, 0, 0, _arg_lo(pid_arg)))
        prog += [(_JEQ_K, m - i, 0, pid) for i, pid in enumerate(pids)]
        prog.append((_RET_K, 0, 0, _RET_ALLOW))
        prog.append((_RET_K, 0, 0, _RET_TRAP | kill))
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
