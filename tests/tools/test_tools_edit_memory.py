"""edit_file holds the file once: a file up to its size bound can be edited under a memory
limit not much larger (hunt M6: four copies of a 180 MB file exceeded 512 MiB)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests._forked import in_a_forked_child
from tests.tools.helpers import Load
from tests.tools.helpers import fails as _fails

_MB = 1 << 20


def _vm_size() -> int:
    """This process's address space now, bytes (what RLIMIT_AS bounds)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@pytest.mark.parametrize("replace_all", [False, True])
def test_an_edit_needs_little_more_memory_than_the_file(
    tool: Load, ws: Path, replace_all: bool
) -> None:
    """A 48 MiB file edited with room for twice its size beyond what the process already
    holds: the bytes, a decoded copy, the replaced copy and its encoding (three or four
    times the file) ran out of it."""
    import resource

    size = 48 * _MB
    line = b"x" * 99 + b"\n"
    with open(ws / "big.txt", "wb") as fh:
        for _ in range(size // len(line) // 1024):
            fh.write(line * 1024)
        fh.write(b"NEEDLE\n")
    edit = tool("edit_file")
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=60, fsize_mb=64))
    args = {"path": "big.txt", "old_string": "NEEDLE", "new_string": "found"}
    args["replace_all"] = replace_all

    def body() -> str:
        room = _vm_size() + 2 * size
        resource.setrlimit(resource.RLIMIT_AS, (room, room))
        return repr(edit(args, ctx))

    report = in_a_forked_child(body, timeout_s=120)
    assert report == repr({"path": "big.txt", "replacements": 1}), report
    with open(ws / "big.txt", "rb") as fh:
        fh.seek(-64, os.SEEK_END)
        assert fh.read().endswith(b"x\nfound\n")
    assert (ws / "big.txt").stat().st_size == size // 100 // 1024 * 1024 * 100 + 6


def _edit_module(tool: Load) -> Any:
    import sys

    return sys.modules[tool("edit_file").__module__]


@pytest.mark.parametrize("seed", range(100))
def test_pieces_replace_as_bytes_replace_does(tool: Load, seed: int) -> None:
    """The piecewise replacement (windows replaced in C, occurrences that straddle a
    window's end by hand) gives what ``bytes.replace`` gives, periodic text and needles
    (``aa`` in ``aaaa…``) included, with windows a few bytes wide."""
    files = _edit_module(tool)
    rng = random.Random(seed)
    alphabet = rng.choice([b"a", b"ab", b"abc", "aé\n".encode()])
    data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
    old = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 5)))
    new = bytes(rng.choice(b"xyz") for _ in range(rng.randrange(0, 9)))
    old_chunk = files._CHUNK
    files._CHUNK = rng.randrange(1, 17)
    try:
        for all_of, want in ((True, data.replace(old, new)), (False, data.replace(old, new, 1))):
            got = b"".join(files._replaced(bytearray(data), old, new, all_of=all_of))
            assert got == want, (data, old, new, all_of, files._CHUNK)
    finally:
        files._CHUNK = old_chunk


def test_edit_file_still_refuses_non_utf8_and_bad_strings(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    """Checked piece by piece now: an invalid byte far in, and a character cut across a
    piece's end (valid), are told apart; a lone surrogate in the strings is refused, not a
    crash when it was encoded."""
    files = _edit_module(tool)
    edit = tool("edit_file")
    (ws / "late.txt").write_bytes(b"a" * (files._CHUNK + 5) + b"\xff" + b"b")
    _fails(edit, {"path": "late.txt", "old_string": "b", "new_string": "c"}, ctx, "binary")
    text = "a" * (files._CHUNK - 1) + "é tail"
    (ws / "cut.txt").write_text(text)
    r = edit({"path": "cut.txt", "old_string": "tail", "new_string": "end"}, ctx)
    assert r["replacements"] == 1 and (ws / "cut.txt").read_text() == text[:-4] + "end"
    err = _fails(
        edit, {"path": "cut.txt", "old_string": "end", "new_string": "\udc80"}, ctx, "bad_encoding"
    )
    assert "new_string" in err.message
