"""A tool's failure keeps its structured details across the sandbox boundary (found by the
full-disk test: ``reason: no_space`` was lost, leaving only the sentence), bounded and
flattened because the child is hostile."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runtime.backends.sandbox.backend import _details
from runtime.broker import Broker
from tests.reliability.conftest import POLICY, TOOLS


def test_details_from_the_child_are_bounded_and_flat() -> None:
    raw = {
        "reason": "no_space",
        "errno": 28,
        "ok": True,
        "none": None,
        "nested": {"a": 1},
        "list": [1, 2],
        "usage": "forged",
        "long": "x" * 10_000,
        3: "non-string key",
        "k" * 65: "long key",
    }
    got = _details(raw)
    assert got == {
        "reason": "no_space",
        "errno": 28,
        "ok": True,
        "none": None,
        "long": "x" * 1024,
    }
    assert len(_details({f"k{i}": i for i in range(100)})) == 16
    assert _details(["not", "a", "dict"]) == {}


@pytest.mark.sandbox
def test_tool_error_details_reach_the_result(workspace: Path, base: Path) -> None:
    async def main() -> None:
        async with Broker(
            workspace=workspace, policy=POLICY, audit=base / "audit.db", tool_folders=[TOOLS]
        ) as broker:
            r = await broker.call({"tool": "read_file", "arguments": {"path": "missing.txt"}})
            assert r.error is not None and r.error.type == "tool_error"
            assert r.error.details["reason"] == "not_found"
            assert r.error.details["path"] == "missing.txt"

    anyio.run(main)
