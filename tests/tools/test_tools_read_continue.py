"""read_file continues where the output cap stopped it: ``next_byte_offset`` in a result,
``byte_offset`` in the next call (hunt M3: past the cap, the rest of a long line, or of a
binary file, could not be read at all)."""

from __future__ import annotations

import base64
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests.tools.helpers import Load
from tests.tools.helpers import fails as _fails

_CAP = 600


def _small(ws: Path) -> ToolContext:
    return ToolContext(workspace=ws, limits=Limits(output_bytes=_CAP))


def _read_on(tool: Load, ctx: ToolContext, args: dict[str, Any]) -> list[dict[str, Any]]:
    """Every result of reading from ``args`` on, each call from the last one's
    next_byte_offset, until one is not truncated."""
    read = tool("read_file")
    results = [read(args, ctx)]
    while results[-1]["truncated"]:
        assert len(results) < 1000, "no progress"
        nxt = results[-1]["next_byte_offset"]
        assert isinstance(nxt, int) and nxt > results[-1]["byte_offset"], results[-1]
        more = {k: v for k, v in args.items() if k != "offset"} | {"byte_offset": nxt}
        results.append(read(more, ctx))
    assert results[-1]["next_byte_offset"] is None
    for r in results:
        assert len(json.dumps(r, ensure_ascii=False).encode()) <= _CAP
    return results


def test_a_line_longer_than_the_cap_is_read_to_its_end(tool: Load, ws: Path) -> None:
    """The first result said truncated, and offset=2 jumped to the next line: the rest of
    line 1 was out of reach. Characters of 1 to 4 bytes and JSON escapes, so cuts fall
    inside characters and the JSON is wider than the bytes."""
    rng = random.Random(7)
    line = "".join(rng.choice(["a", "é", "€", "😀", '"', "\\", "\t"]) for _ in range(3000))
    text = line + "\nsecond\nthird\n"
    (ws / "long.txt").write_text(text)
    results = _read_on(tool, _small(ws), {"path": "long.txt", "limit": 2})
    assert "".join(r["content"] for r in results) == text
    assert len(results) > 5 and results[0]["offset"] == 1 and results[0]["byte_offset"] == 0
    assert all("offset" not in r for r in results[1:])
    # limit counted from byte_offset: the rest of line 1 is the first line, then 'second'.
    assert results[-2]["lines"] == 2 and results[-2]["content"].endswith("\nsecond\n")
    assert results[-1]["content"] == "third\n"


def test_a_read_cut_by_limit_continues_at_the_next_line(
    tool: Load, ctx: ToolContext, ws: Path
) -> None:
    (ws / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    read = tool("read_file")
    r = read({"path": "f.txt", "offset": 3, "limit": 2}, ctx)
    assert r["byte_offset"] == len("line 1\nline 2\n") and r["truncated"]
    assert r["next_byte_offset"] == len("".join(f"line {i}\n" for i in range(1, 5)))
    r = read({"path": "f.txt", "byte_offset": r["next_byte_offset"], "limit": 1}, ctx)
    assert r["content"] == "line 5\n"
    r = read({"path": "f.txt", "offset": 50}, ctx)
    assert r["content"] == "" and not r["truncated"] and r["next_byte_offset"] is None


def test_a_binary_file_larger_than_the_cap_is_read_whole_in_base64(tool: Load, ws: Path) -> None:
    """base64 returned the first bytes the cap held and nothing after them."""
    blob = os.urandom(5000)
    (ws / "b.bin").write_bytes(blob)
    results = _read_on(tool, _small(ws), {"path": "b.bin", "encoding": "base64"})
    assert b"".join(base64.b64decode(r["content"]) for r in results) == blob
    assert len(results) > 5 and all(r["size"] == 5000 for r in results)
    r = tool("read_file")({"path": "b.bin", "encoding": "base64", "byte_offset": 9000}, _small(ws))
    assert r["content"] == "" and r["bytes"] == 0 and not r["truncated"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"offset": 2, "byte_offset": 0}, "not both"),
        ({"byte_offset": 1}, "inside a UTF-8 character"),
    ],
)
def test_bad_byte_offsets_are_refused(
    tool: Load, ctx: ToolContext, ws: Path, args: dict[str, int], fragment: str
) -> None:
    (ws / "u.txt").write_text("é\n")
    err = _fails(tool("read_file"), {"path": "u.txt", **args}, ctx, "bad_offset")
    assert fragment in err.message
