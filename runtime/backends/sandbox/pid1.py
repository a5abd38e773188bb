"""Build ``pid1.c``, the sandbox's tiny pid 1, with the pinned ``ziglang`` from PyPI.

The broker builds it once (``build``; cached under a digest of the source, the compiler
version and the flags) and passes the path to the zygote, which copies it into a sealed
memfd (``load``): what every call executes cannot change under it afterwards, and the
sandbox uid needs no path to the cache to execute it.

A missing compiler or a failed build is not fatal: the call's Python pid 1 then stays
alive as the reaper (slower: its address space is torn down at the end of each call).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
import threading
from pathlib import Path

from runtime._fsio import private_dir
from runtime._zigcc import zig_cc
from runtime.errors import SandboxError

__all__ = ["CFLAGS", "SOURCE", "build", "cache_dir", "load"]

SOURCE = Path(__file__).with_name("pid1.c")
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
_lock = threading.Lock()
_MFD_CLOEXEC = 0x1
_MFD_ALLOW_SEALING = 0x2
_MFD_EXEC = 0x10  # kernel >= 6.3: say so, or the kernel warns (vm.memfd_noexec)
_F_ADD_SEALS = 1033
_SEALS = 0x1 | 0x2 | 0x4 | 0x8  # SEAL, SHRINK, GROW, WRITE


def _private_dir(path: Path) -> Path | None:
    """``path`` if :func:`runtime._fsio.private_dir` accepts it, else None."""
    return path if private_dir(path) else None


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/runtime/sandbox`` or ``~/.cache/…``; else a private dir in /tmp
    (a system user such as the test suite's ``rtsbx`` may have no home)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    found = _private_dir(Path(base) / "runtime" / "sandbox")
    if found is None:
        # Each level checked: whoever owned runtime-<uid> could swap what lies under it.
        tmp_root = _private_dir(Path(tempfile.gettempdir()) / f"runtime-{os.geteuid()}")
        found = _private_dir(tmp_root / "sandbox") if tmp_root is not None else None
    if found is None:
        raise SandboxError("no private cache directory for the sandbox's pid 1")
    return found


def _digest() -> str:
    from importlib.metadata import version

    h = hashlib.sha256()
    h.update(f"zig {version('ziglang')} {' '.join(CFLAGS)}\n".encode())
    h.update(SOURCE.read_bytes())
    return h.hexdigest()[:16]


def build(out_dir: Path | None = None) -> Path:
    """The built binary's path (compiled now unless an up-to-date one exists)."""
    root = out_dir if out_dir is not None else cache_dir()
    out = root / _digest()
    target = out / "pid1"
    with _lock:
        if target.is_file():
            return target
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
        zig_cache = str(root / "zig-cache")
        env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": zig_cache, "ZIG_LOCAL_CACHE_DIR": zig_cache}
        zig_cc([SOURCE], CFLAGS, target, what="the sandbox's pid1", env=env)
    return target


def load(path: str) -> int:
    """A sealed, executable memfd holding the binary at ``path`` (close-on-exec)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x7fELF"):
        raise OSError(f"{path} is not an ELF binary")
    try:
        fd = os.memfd_create("runtime-pid1", _MFD_CLOEXEC | _MFD_ALLOW_SEALING | _MFD_EXEC)
    except OSError:
        fd = os.memfd_create("runtime-pid1", _MFD_CLOEXEC | _MFD_ALLOW_SEALING)
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
