"""A sandboxed call that floods the broker with refused requests (red-team finding P1).

A folder tool asking ``ctx.ask_broker`` thousands of times for what its manifest does not
declare (``http`` without ``sandbox.egress``, an op that does not exist), each with a large
payload, took the broker from 44 MiB to 2.6 GiB: every refusal was kept with its traceback,
which pinned the whole request. Now the broker keeps one refusal and a count, and past
:data:`MAX_REFUSED_REQUESTS` refused requests it answers no more and ends the call as a
``resource_limit``; the next call works and the audit chain verifies.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.sandbox import probe_host
from runtime.backends.sandbox.backend import MAX_REFUSED_REQUESTS
from runtime.broker import Broker, SyncBroker
from runtime.models import ToolResult
from runtime.policy import Policy

_MISSING = probe_host().missing_required()
pytestmark = [
    pytest.mark.skipif(bool(_MISSING), reason=f"sandbox mechanisms missing: {_MISSING}"),
    pytest.mark.timeout(180),
]

POLICY = """
default = "deny"
[tools.read_file]
action = "allow"
[tools.flooder]
action = "allow"
"""

TOOL_CODE = """
def run(args, ctx):
    payload = {"url": "http://x/", "pad": "A" * args["size"]}
    refused = 0
    for _ in range(args["n"]):
        try:
            ctx.ask_broker(args["op"], payload)
        except Exception:
            refused += 1
    return {"refused": refused}
"""

MANIFEST = {
    "name": "flooder",
    "description": "Test tool: asks the broker for what it may not have, n times.",
    "category": "custom",
    "backend": "subprocess",
    "entry": "flooder:run",
    "sandbox": {"workspace": "none"},
    "parameters": {
        "type": "object",
        "properties": {
            "op": {"type": "string"},
            "n": {"type": "integer"},
            "size": {"type": "integer"},
        },
        "required": ["op", "n", "size"],
        "additionalProperties": False,
    },
}


@pytest.fixture
def base() -> Iterator[Path]:
    """Not under pytest's tmp_path (mode 0700 parents would stop the sandbox uid first)."""
    path = Path(tempfile.mkdtemp(prefix="rt-flood-", dir="/tmp"))
    os.chmod(path, 0o755)
    (path / "ws").mkdir()
    (path / "ws" / "a.txt").write_text("hello\n")
    tools = path / "tools"
    tools.mkdir()
    (tools / "flooder.py").write_text(TOOL_CODE)
    (tools / "flooder.json").write_text(json.dumps(MANIFEST))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _flood(op: str, n: int, size: int) -> dict[str, Any]:
    return {"tool": "flooder", "arguments": {"op": op, "n": n, "size": size}}


def _calls(base: Path, calls: list[dict[str, Any]], driver: str) -> list[tuple[ToolResult, int]]:
    """Each call's result and the broker's traced memory peak during it (bytes over what
    was traced when it began), through the async ``Broker`` or the ``SyncBroker`` (whose
    calls run in the calling thread, their broker requests answered on the loop)."""
    kwargs: dict[str, Any] = {
        "workspace": base / "ws",
        "policy": Policy.from_toml(POLICY),
        "audit": base / "audit.db",
        "tool_folders": [base / "tools"],
    }
    out: list[tuple[ToolResult, int]] = []

    def measured(run: Any, call: dict[str, Any]) -> tuple[ToolResult, int]:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = run(call)
        return result, tracemalloc.get_traced_memory()[1] - before

    tracemalloc.start()
    try:
        if driver == "sync":
            with SyncBroker(**kwargs) as broker:
                out = [measured(broker.call, call) for call in calls]
                assert broker.audit.verify().ok
        else:

            async def main() -> None:
                async with Broker(**kwargs) as broker:
                    for call in calls:
                        gc.collect()
                        before = tracemalloc.get_traced_memory()[0]
                        tracemalloc.reset_peak()
                        result = await broker.call(call)
                        out.append((result, tracemalloc.get_traced_memory()[1] - before))
                    assert broker.audit.verify().ok

            anyio.run(main)
    finally:
        tracemalloc.stop()
    return out


@pytest.mark.parametrize("driver", ["async", "sync"])
@pytest.mark.parametrize("op", ["http", "no_such_op"])
def test_refused_requests_keep_nothing_of_each_request(base: Path, driver: str, op: str) -> None:
    """200 refused requests of 100 kB each (under the cap): the call succeeds, and the
    broker's memory during it stays near one request's worth, not 200 (it kept every
    refusal, and through its traceback every payload: 20 MB here, 2.6 GB in the report)."""
    n, size = 200, 100_000
    warm, (flood, peak) = _calls(base, [_flood(op, 1, 10), _flood(op, n, size)], driver)
    assert warm[0].success, warm[0].error
    assert flood.success, flood.error
    assert flood.result == {"refused": n}
    assert peak < 4 * 1024 * 1024, f"the broker's memory grew by {peak} bytes"
    usage = flood.usage.model_dump()
    assert usage["broker_refused"] == n
    if op == "http":
        assert usage["egress"]["count"] == n and usage["egress"]["refused"] == n


@pytest.mark.parametrize("driver", ["async", "sync"])
def test_a_flood_of_refused_requests_ends_the_call_as_a_resource_limit(
    base: Path, driver: str
) -> None:
    """Past MAX_REFUSED_REQUESTS refused requests the broker answers no more: the call is
    ended (the tool never returns its count) as a typed resource_limit naming the bound,
    its audit record says so, and the next call works."""
    calls = [
        _flood("no_such_op", 20_000, 10),
        _flood("http", 20_000, 10),
        {"tool": "read_file", "arguments": {"path": "a.txt"}},
    ]
    (unknown, _), (http, _), (after, _) = _calls(base, calls, driver)
    for result in (unknown, http):
        assert not result.success and result.error is not None, result
        assert result.error.type == "resource_limit", result.error
        assert result.error.details["limit"] == "broker_requests"
        assert result.error.details["refused"] == MAX_REFUSED_REQUESTS + 1
        assert str(MAX_REFUSED_REQUESTS) in result.error.message
        assert result.usage.model_dump()["broker_refused"] == MAX_REFUSED_REQUESTS + 1
    assert unknown.error is not None and unknown.error.details["rule"] == "broker.request"
    assert http.error is not None and http.error.details["rule"] == "broker.egress"
    assert after.success and after.result["content"] == "hello\n", after.error


def test_the_flood_is_in_the_audit_record(base: Path) -> None:
    _calls(base, [_flood("no_such_op", 1000, 10)], "sync")
    from runtime.audit import AuditLog

    with AuditLog(base / "audit.db") as log:
        completion = log.tail(1)[0]
        assert log.verify().ok
    assert completion.kind == "completion" and completion.outcome == "error"
    assert completion.error_type == "resource_limit"
    assert (completion.usage or {})["broker_refused"] == MAX_REFUSED_REQUESTS + 1
