"""``runtime._fsio.library_path``/``own_library``: every library the process dlopens through
/proc gets a name no other one had (glibc's dlopen returns an object already loaded under
the same name without opening the path)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime._fsio import own_library
from tests._pythonpath import python_path

LIBS = (
    ("/usr/lib/x86_64-linux-gnu/libm.so.6", "cos"),
    ("/lib/x86_64-linux-gnu/libz.so.1", "zlibVersion"),
)

# Each library is opened, named, loaded, and its descriptor closed before the next is
# opened: the second open gets the same descriptor number, so "/proc/self/fd/<that number>"
# would name both, and the second dlopen would return the first library (no zlibVersion in
# libm).
SCRIPT = """
import ctypes, os, sys
from runtime._fsio import library_path
names = []
for lib, symbol in {libs!r}:
    fd = os.open(lib, os.O_RDONLY | os.O_CLOEXEC)
    names.append((fd, library_path(fd)))
    getattr(ctypes.CDLL(names[-1][1]), symbol)
    os.close(fd)
assert names[0][0] == names[1][0], names  # the descriptor number was reused
assert names[0][1] != names[1][1], names
print("ok")
"""


@pytest.mark.skipif(
    not all(os.path.exists(lib) for lib, _ in LIBS), reason="Debian x86_64 library paths"
)
def test_a_reused_descriptor_number_never_names_two_libraries() -> None:
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(libs=LIBS)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": python_path(root)},
        check=False,
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_own_library_refuses_what_is_not_ours_alone(tmp_path: Path) -> None:
    lib = tmp_path / "x.so"
    lib.write_bytes(b"\x7fELF")
    os.chmod(lib, 0o666)
    with pytest.raises(OSError, match="not ours alone; the thing is not loaded"):
        own_library(lib, "the thing", ctypes.CDLL)
    link = tmp_path / "link.so"
    link.symlink_to(lib)
    with pytest.raises(OSError):
        own_library(link, "the thing", ctypes.CDLL)  # never followed


def test_own_library_loads_through_the_checked_descriptor(tmp_path: Path) -> None:
    lib = tmp_path / "x.so"
    lib.write_bytes(b"contents")
    os.chmod(lib, 0o600)
    seen = []

    def load(name: str) -> bytes:
        seen.append(name)
        assert os.stat(name).st_ino == os.stat(lib).st_ino
        return Path(name).read_bytes()

    assert own_library(lib, "the thing", load) == b"contents"
    assert own_library(lib, "the thing", load) == b"contents"
    assert seen[0].startswith(f"/proc/{os.getpid()}/fd/") and seen[0] != seen[1]
