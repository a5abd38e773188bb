"""Compile C with the pinned ``ziglang`` from PyPI into one file, atomically.

Three artefacts are built this way: the wasm guests, the sandbox's static pid 1 and the wasm
backend's native helper. Each is written under a unique temporary name and renamed into
place, so a concurrent builder or a reader never sees half a file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from runtime.errors import SandboxError

__all__ = ["zig_cc"]


def zig_cc(
    sources: Sequence[Path],
    cflags: Sequence[str],
    target: Path,
    *,
    what: str,
    env: Mapping[str, str] | None = None,
    mode: int | None = None,
) -> None:
    """``zig cc cflags -o target sources``; ``mode`` is set before the file appears.

    Raises SandboxError naming ``what`` (no compiler, a timeout, or the compiler's exit code
    with the end of its stderr)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    cmd = [sys.executable, "-m", "ziglang", "cc", *cflags, "-o", str(tmp), *map(str, sources)]
    try:
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=300, check=False, env=env
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"could not run the zig compiler for {what}: {exc}") from exc
        if proc.returncode != 0:
            raise SandboxError(
                f"building {what} failed: zig cc exited {proc.returncode}",
                stderr=proc.stderr[-4000:],
            )
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
