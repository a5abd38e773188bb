"""free_blocks (runtime/_speedups.c): os.fstatvfs(fd).f_bavail read with the GIL held, for
the write-ahead record's free-space check (runtime/audit/_log.py, _no_space)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import ModuleType

import pytest

from runtime.audit import _log


def test_the_count_os_fstatvfs_reads(c_mod: ModuleType, tmp_path: Path) -> None:
    fd = os.open("/proc", os.O_RDONLY)
    try:  # procfs has no blocks at all: the same answer every time
        assert c_mod.free_blocks(fd) == os.fstatvfs(fd).f_bavail == 0
    finally:
        os.close(fd)
    with (tmp_path / "f").open("wb") as f:
        before = os.fstatvfs(f.fileno()).f_bavail
        free = c_mod.free_blocks(f)  # a file object, as os.fstatvfs takes one too
        after = os.fstatvfs(f.fileno()).f_bavail
    assert isinstance(free, int)
    # Other processes write to this file system meanwhile: within what they changed.
    assert min(before, after) - 1024 <= free <= max(before, after) + 1024


def test_errors_are_os_fstatvfs_errors(c_mod: ModuleType) -> None:
    fd = os.open("/", os.O_RDONLY)
    os.close(fd)
    with pytest.raises(OSError) as caught:
        c_mod.free_blocks(fd)
    assert caught.value.errno == errno.EBADF
    with pytest.raises(ValueError):
        c_mod.free_blocks(-1)
    with pytest.raises(TypeError):
        c_mod.free_blocks("3")


def test_a_replaced_os_fstatvfs_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """os.fstatvfs stays the seam: replaced, it answers instead of the accelerator."""
    asked: list[int] = []
    real = os.fstatvfs

    def full(fd: int) -> os.statvfs_result:
        asked.append(fd)
        stat = list(real(fd))
        stat[4] = 0  # f_bavail
        return os.statvfs_result(stat)

    monkeypatch.setattr(os, "fstatvfs", full)
    fd = os.open("/", os.O_RDONLY)
    try:
        assert _log._no_space(fd)
    finally:
        os.close(fd)
    assert asked == [fd]
