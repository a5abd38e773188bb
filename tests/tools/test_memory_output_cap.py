"""Snippets and memories the tools can give back: what snippet_load/memory_read could never
return within the output limit is refused when saved, and memory_search/snippet_list stop
adding entries before the limit (``truncated``) instead of failing whole."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.audit._canonical import canonical_json_ijson
from runtime.broker import SyncBroker
from runtime.errors import ResourceLimitExceeded
from runtime.toolkit import ToolContext

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]

CAP = 4096


@pytest.fixture
def small(ctx: ToolContext) -> ToolContext:
    """The tests' context with an output limit of 4 KiB."""
    return dataclasses.replace(ctx, limits=ctx.limits.model_copy(update={"output_bytes": CAP}))


def _bytes(value: Any) -> int:
    return len(canonical_json_ijson(value))


#: What "one character more would not have fitted" allows for: the entry's time is a float
#: whose JSON is 12 to 18 characters (``time.time()``), so the write that was refused may
#: have been judged with a time a few characters longer than the stored one's.
_TIME_SLACK = "é" * 4


def _largest_fitting(save: Callable[[str], Any]) -> str:
    """The longest text of "é" (2 bytes each in UTF-8) ``save`` accepts under CAP."""
    lo, hi = 0, CAP
    while lo < hi:
        mid = (lo + hi + 1) // 2
        try:
            save("é" * mid)
            lo = mid
        except ResourceLimitExceeded:
            hi = mid - 1
    return "é" * lo


def test_snippet_save_refuses_what_snippet_load_could_never_return(
    tool: Load, small: ToolContext
) -> None:
    save, load = tool("snippet_save"), tool("snippet_load")
    with pytest.raises(ResourceLimitExceeded) as exc:
        save({"name": "big", "code": "é" * 2048}, small)  # 4096 bytes of code alone
    assert exc.value.details["reason"] == "result_too_large"
    assert exc.value.details["max_bytes"] == CAP and exc.value.details["size"] > CAP
    assert "snippet_load" in exc.value.message and str(CAP) in exc.value.message
    assert tool("snippet_list")({}, small)["count"] == 0  # nothing saved
    code = _largest_fitting(lambda c: save({"name": "big", "code": c}, small))
    assert len(code) > 1900
    # What was accepted comes back whole, as the broker counts a result's bytes; a few
    # characters more would not have.
    assert _bytes(load({"name": "big"}, small)) <= CAP
    assert _bytes({**load({"name": "big"}, small), "code": code + _TIME_SLACK}) > CAP


def test_memory_write_refuses_what_memory_read_could_never_return(
    tool: Load, small: ToolContext
) -> None:
    write, read = tool("memory_write"), tool("memory_read")
    with pytest.raises(ResourceLimitExceeded) as exc:
        write({"key": "big", "content": "é" * 2048}, small)
    assert exc.value.details["reason"] == "result_too_large"
    assert "memory_read" in exc.value.message
    content = _largest_fitting(lambda c: write({"key": "big", "content": c}, small))
    assert _bytes(read({"key": "big"}, small)) <= CAP
    assert _bytes({**read({"key": "big"}, small), "content": content + _TIME_SLACK}) > CAP


def test_memory_search_stops_before_the_output_limit(tool: Load, small: ToolContext) -> None:
    for i in range(20):
        tool("memory_write")({"key": f"k{i:02}", "content": "x" * 1000}, small)
    found = tool("memory_search")({"limit": 100}, small)
    assert found["count"] == 20 and found["truncated"]
    assert 0 < len(found["matches"]) < 20 and _bytes(found) <= CAP
    # One entry more would not have fitted.
    assert _bytes({**found, "matches": [*found["matches"], found["matches"][0]]}) > CAP
    two = tool("memory_search")({"limit": 2}, small)
    assert len(two["matches"]) == 2 and two["truncated"]  # the limit, as before


def test_snippet_list_stops_before_the_output_limit(tool: Load, small: ToolContext) -> None:
    for i in range(10):
        tool("snippet_save")({"name": f"s{i}", "code": "c", "description": "d" * 600}, small)
    listed = tool("snippet_list")({}, small)
    assert listed["count"] == 10 and listed["truncated"]
    assert 0 < len(listed["snippets"]) < 10 and _bytes(listed) <= CAP
    assert _bytes({**listed, "snippets": [*listed["snippets"], listed["snippets"][0]]}) > CAP


def test_through_the_broker(tmp_path: Path) -> None:
    """The hunt's case at the default limit (1 MiB): a 1 MiB snippet was saved and every
    snippet_load of it failed output_too_large; 20 memories of 65 KB made memory_search
    with limit 100 fail whole."""
    with SyncBroker(workspace=tmp_path) as broker:

        def call(tool: str, **args: Any) -> dict[str, Any]:
            return broker.call({"tool": tool, "arguments": args}).model_dump()

        refused = call("snippet_save", name="big", code="x" * 1048576)
        assert refused["error"]["type"] == "resource_limit"
        assert not call("snippet_load", name="big")["success"]  # not_found: never saved
        for i in range(20):
            assert call("memory_write", key=f"k{i}", content="y" * 65000)["success"]
        found = call("memory_search", limit=100)
        assert found["success"], found["error"]
        assert found["result"]["count"] == 20 and found["result"]["truncated"]
        assert len(found["result"]["matches"]) == 16
