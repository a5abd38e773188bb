"""A hostile stdio MCP server (``evil_stdio_server.py``) behind the mcp backend: what it
answers, writes on its stderr or lists must not stop the broker, reach the broker's own
descriptors, or hide another server's tools."""

from __future__ import annotations

import json
import logging
import os
import resource
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends._mcp_stdio import STDERR_BUDGET, clean_line
from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.mcp.external import ExternalServer
from runtime.models import Decision, Limits, ToolCall, ToolSpec
from tests.mcp import standins
from tests.mcp.conftest import HttpServer
from tests.mcp.test_external import _python, proxied_broker

pytestmark = pytest.mark.anyio

EVIL = Path(__file__).resolve().parent / "evil_stdio_server.py"


def evil(name: str = "evil", mode: str = "", **kw: Any) -> ExternalServer:
    python, env = _python()
    data: dict[str, Any] = {
        "name": name,
        "command": [python, str(EVIL)],
        "env": {"MODE": mode, **env},
    }
    data.update(kw)
    return ExternalServer.model_validate(data)


class LimitsPolicy(standins.ScriptedPolicy):
    """Everything allowed, with the limits a test gives."""

    def __init__(self, limits: Limits) -> None:
        super().__init__(actions={}, hidden=set())
        self.limits = limits

    def decide(self, tc: ToolCall, spec: ToolSpec, profile: str | None = None) -> Decision:
        return Decision(action="allow", rule=f"tools.{spec.name}", limits=self.limits)


@asynccontextmanager
async def brokered(
    tmp_path: Path, servers: list[ExternalServer], limits: Limits | None = None
) -> AsyncIterator[Any]:
    policy = LimitsPolicy(limits or Limits(timeout_s=20))
    async with proxied_broker(tmp_path, servers, policy) as broker:
        yield broker


async def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.monotonic()
    result = await call()
    return result, time.monotonic() - t0


# -- M1: the SDK's own output-schema check ran Python's re on the event loop --------------
@pytest.mark.timeout(60)
async def test_a_backtracking_output_pattern_does_not_freeze_the_broker(tmp_path: Path) -> None:
    async with brokered(tmp_path, [evil(mode="redos")]) as broker:
        results: dict[str, Any] = {}
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.05)
                ticks += 1

        async def call(key: str, tool: str, arguments: dict[str, Any]) -> None:
            results[key] = await timed(lambda: broker.call({"tool": tool, "arguments": arguments}))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as calls:
                calls.start_soon(call, "re", "evil__re", {})
                calls.start_soon(call, "echo", "evil__slow", {"s": 1})
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ticker)
                    await anyio.sleep(1)
                    tg.cancel_scope.cancel()
        result, took = results["re"]
        # The catalogue's (linear-time) validator refuses the answer: a typed error, at once.
        assert result.error is not None and result.error.type == "tool_error", result
        assert took < 10, took
        other, _ = results["echo"]
        assert other.success, other.error
        # The event loop went on meanwhile: ~20 ticks in the slow call's second.
        assert ticks >= 10, ticks


# -- M2: the server was handed the broker's own stderr -------------------------------------
async def test_the_server_has_a_stderr_pipe_of_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="runtime.mcp.server")
    ours = os.fstat(2)
    async with brokered(tmp_path, [evil()]) as broker:
        result = await broker.call({"tool": "evil__stderr", "arguments": {"n": 200_000}})
        assert result.success, result.error
        found = json.loads(result.result["text"])
        # A pipe, not the broker's fd 2: nothing to truncate or overwrite.
        assert found["fifo"] is True
        assert (found["dev"], found["ino"]) != (ours.st_dev, ours.st_ino)
        assert found["ftruncate"] != "ok" and found["pwrite"] != "ok"
        for _ in range(200):  # the log task reads the pipe on its own time: up to 10 s
            if any("is dropped" in r.getMessage() for r in caplog.records):
                break
            await anyio.sleep(0.05)
    lines = [r.getMessage() for r in caplog.records if r.name == "runtime.mcp.server"]
    assert all(line.startswith("[evil] ") for line in lines), lines[:3]
    # Escapes, CR, BEL and the bidi override are gone; the text stays.
    first = next(line for line in lines if "first" in line)
    assert first == "[evil] [2J]0;ownedfirstline evil", first
    assert not any(c in "".join(lines) for c in "\x1b\r\x07\u202e")
    # 64 KiB a minute, then one note; the rest (~136 KB) is dropped.
    logged = sum(len(line) for line in lines if "of stderr" not in line)
    assert logged <= STDERR_BUDGET, logged
    assert sum("is dropped" in line for line in lines) == 1


async def test_why_a_server_did_not_start_is_taken_from_its_stderr(tmp_path: Path) -> None:
    async with McpProxyBackend([evil(mode="stderr_at_start")], mode="best_effort") as proxy:
        error = proxy.errors["evil"]
    assert "stopped before it was ready" in error
    assert "its stderr: evil: cannot start [31mred[0m" in error, error
    assert "\x1b" not in error


def test_clean_line() -> None:
    assert clean_line(b"a\tb\x1b[1mc\r\n\x00\xff\xe2\x80\xae") == "a b[1mc\ufffd"


# -- M3: a started server's answer was read without a cap ---------------------------------
def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def test_an_oversized_answer_fails_its_call_alone(tmp_path: Path) -> None:
    # The answer's id is in its first bytes: that call fails, the rest of the line is
    # dropped unheld, and the session goes on. It ended, and every call waiting on it
    # failed as output_too_large with it.
    limits = Limits(timeout_s=20, output_bytes=65_536)
    async with brokered(tmp_path, [evil()], limits) as broker:
        before = _rss_kb()
        results: dict[str, Any] = {}

        async def call(label: str, tool: str, arguments: dict[str, Any]) -> None:
            results[label] = await broker.call({"tool": tool, "arguments": arguments})

        async with anyio.create_task_group() as calls:  # two calls in flight
            calls.start_soon(call, "slow", "evil__slow", {"s": 1})
            await anyio.sleep(0.2)
            calls.start_soon(call, "big", "evil__big", {"n": 32 * 1024 * 1024})
        big, slow = results["big"], results["slow"]
        assert big.error is not None and big.error.type == "output_too_large", big
        assert "more than" in big.error.message and "dropped" in big.error.message
        assert "session" not in big.error.message
        assert slow.success, slow.error
        assert slow.result["text"] == "slept"
        assert _rss_kb() - before < 64 * 1024  # the line was never held whole
        again = await broker.call({"tool": "evil__echo", "arguments": {"x": "y"}})
        assert again.success, again.error
        assert again.result["text"] == 'echo:{"x": "y"}'


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("evil__endless", {}),  # the line never ends
        ("evil__bigtail", {"n": 1024 * 1024}),  # its id comes after the result
    ],
)
async def test_an_oversized_line_of_no_known_call_ends_the_session_promptly(
    tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    limits = Limits(timeout_s=20, output_bytes=65_536)
    async with brokered(tmp_path, [evil(), evil(name="other")], limits) as broker:
        before = _rss_kb()
        result, took = await timed(lambda: broker.call({"tool": tool, "arguments": arguments}))
        assert result.error is not None and result.error.type == "output_too_large", result
        assert "more than" in result.error.message and "session was ended" in result.error.message
        assert took < 5, took
        # The line was cut at the cap (64 KiB + the envelope), never held whole.
        assert _rss_kb() - before < 64 * 1024
        # That server's later calls fail fast and say why; the other server serves on.
        again = await broker.call({"tool": "evil__echo", "arguments": {"x": "y"}})
        assert again.error is not None and again.error.type == "sandbox_error"
        assert "session was ended" in again.error.message
        other = await broker.call({"tool": "other__echo", "arguments": {"x": "y"}})
        assert other.success, other.error
        assert other.result["text"] == 'echo:{"x": "y"}'


async def test_only_the_reader_says_an_answer_was_dropped() -> None:
    # The server cannot make its own error pass for a dropped answer: the mark is a token
    # of the reader's that never goes to the server.
    from runtime.backends._mcp_stdio import StdioPipes

    pipes, other = StdioPipes("s"), StdioPipes("s")
    data = pipes.dropped_answer(3).error.data
    assert pipes.answer_dropped(data) == pipes.cap
    assert other.answer_dropped(data) is None
    assert pipes.answer_dropped({"dropped_answer": "", "cap": 1}) is None
    assert pipes.answer_dropped(None) is None


@pytest.mark.parametrize(
    ("prefix", "request_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"AAAA', 7),
        (b'{"id":"c-1", "jsonrpc":"2.0", "error":{"code":1,"message":"AAAA', "c-1"),
        (b'{"jsonrpc":"2.0","result":{"content":[{"text":"AAAA', None),  # id after it
        (b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":"AAAA', None),  # a request
        (b'{"jsonrpc":"2.0","id":7.5,"result":{"a":"AAAA', None),
        (b'{"jsonrpc":"2.0","id":7,"junk":"AAAA', None),  # no result or error
    ],
)
def test_the_call_an_oversized_line_answers(prefix: bytes, request_id: Any) -> None:
    from runtime.backends._mcp_stdio import _answered_id

    assert _answered_id(bytearray(prefix + b"A" * 100_000)) == request_id


async def test_an_answer_within_the_calls_cap_passes(tmp_path: Path) -> None:
    # 200 KB: more than the envelope allowance alone, within the call's output_bytes.
    async with brokered(tmp_path, [evil()], Limits(timeout_s=20)) as broker:
        result = await broker.call({"tool": "evil__big", "arguments": {"n": 200_000}})
        assert result.success, result.error
        assert len(result.result["text"]) >= 200_000


# -- M5: tool names that collide ----------------------------------------------------------
@pytest.mark.parametrize("hostile_first", [False, True])
async def test_colliding_tool_names_keep_their_own_server(
    tmp_path: Path, hostile_first: bool
) -> None:
    # good: prefix "a__b" (refused by the policy's rules since; given here in code), evil:
    # prefix "a" and a tool "b__echo" (= "a__b__echo"), dup: "echo" listed twice.
    good = evil(name="good", prefix="a__b")
    shadow = evil(name="evil", prefix="a", mode="shadow")
    dup = evil(name="dup", mode="dup")
    servers = [shadow, good, dup] if hostile_first else [good, shadow, dup]
    async with brokered(tmp_path, servers) as broker:
        assert "a__b__echo" in broker.test_registered and "dup__echo" in broker.test_registered
        spec = broker.catalogue.get("a__b__echo")
        assert spec.description.startswith("[good] ")
        result = await broker.call({"tool": "a__b__echo", "arguments": {"x": "hi"}})
        assert result.success, result.error
        # The first of dup's two "echo" stays: its schema (x: string) and its route.
        assert broker.catalogue.get("dup__echo").parameters["properties"]["x"]["type"] == "string"
        result = await broker.call({"tool": "dup__echo", "arguments": {"x": "hi"}})
        assert result.success, result.error
        assert result.result["text"] == 'echo:{"x": "hi"}'
        assert len([s for s in broker.test_proxy.specs if s.name == "dup__echo"]) == 1


async def test_a_tool_the_model_providers_refuse_is_skipped_with_a_note(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A top-level anyOf, re-exported (serve --mcp, runtime tools), made OpenAI and Anthropic
    # refuse every request listing the server's tools: skipped as a folder tool is refused.
    caplog.set_level(logging.WARNING, logger="runtime")
    async with brokered(tmp_path, [evil(mode="anyof")]) as broker:
        assert "evil__echo" in broker.test_registered
        assert "evil__either" not in broker.test_registered
        assert "evil__either" not in broker.catalogue
        result = await broker.call({"tool": "evil__either", "arguments": {"x": "hi"}})
        assert result.error is not None and result.error.type == "tool_not_found"
    notes = [r.getMessage() for r in caplog.records if "evil__either skipped" in r.getMessage()]
    assert notes and "parameters.anyOf" in notes[0], notes


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"name": "good", "prefix": "a__b"}, "the prefix 'a__b' contains '__'"),
        ({"name": "a__b"}, "its default prefix) 'a__b' contains '__'"),
        ({"name": "x", "prefix": "a_"}, "ends with '_'"),
    ],
)
def test_a_prefix_that_splits_badly_is_refused_at_load(entry: dict[str, Any], words: str) -> None:
    from runtime.errors import PolicyError
    from runtime.mcp.external import parse_external_servers

    with pytest.raises(PolicyError) as info:
        parse_external_servers([{"command": ["/bin/true"], **entry}])
    assert words in info.value.message


# -- M6: every call's audit record named the first server's sandbox -----------------------
async def test_each_tools_audit_names_its_own_servers_sandbox(
    tmp_path: Path, hostile: HttpServer
) -> None:
    from runtime.audit import AuditLog

    url = ExternalServer.model_validate({"name": "h", "url": hostile.url})
    servers = [evil(), evil(name="net", network=True), url]
    async with brokered(tmp_path, servers, Limits(timeout_s=1)) as broker:
        proxy = broker.test_proxy
        calls = {
            "evil__echo": {"x": "y"},
            "net__echo": {"x": "y"},
            "net__slow": {"s": 5},  # a timeout: an error outcome
            "h__t": {"mode": "ok"},
        }
        for tool, arguments in calls.items():
            result = await broker.call({"tool": tool, "arguments": arguments})
            assert result.success is (tool != "net__slow"), result
        want = {tool: proxy.fingerprint_for(broker.catalogue.get(tool)) for tool in calls}
    assert want["h__t"].backend == "mcp:h" and "egress-gateway" in want["h__t"].mechanisms
    assert want["net__echo"] == want["net__slow"] != want["evil__echo"]
    if "netns" in want["evil__echo"].mechanisms:  # isolated here: the granted one is not
        assert "netns" not in want["net__echo"].mechanisms
    log = AuditLog(tmp_path / "audit.db")
    try:
        records = [r for r in log.tail(200) if r.tool in calls]
    finally:
        log.close()
    assert len(records) == 2 * len(calls)  # a request and a completion each
    for record in records:
        assert record.sandbox == want[record.tool].as_dict(), (record.kind, record.tool)
