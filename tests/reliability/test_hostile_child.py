"""Issue 8 §3: a sandboxed tool that attacks its frame channel.

Random bytes, a 4 GiB length prefix, a frame cut short, an endless stream of bytes or of
valid-looking request frames: each call ends in a typed error, the broker's memory stays
bounded (the decoder never buffers more than the frame cap), and the broker and its zygote
go on serving normal calls.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import psutil
import pytest

from runtime.broker import Broker
from tests.reliability.conftest import POLICY, TOOLS

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(180)]

EXPECTED = {
    "garbage": "sandbox_error",
    "huge_prefix": "output_too_large",
    "partial": "sandbox_error",
    "flood": "output_too_large",
    # Each of its requests is refused (no "op" the broker knows); past MAX_REFUSED_REQUESTS
    # the call is ended as a resource_limit, long before its timeout.
    "flood_valid": "resource_limit",
    "forged_details": "tool_error",
}
#: RSS the broker may gain over the whole run: a few frame caps (1 MiB each) of transient
#: buffers plus allocator noise; an unbounded read of a 4 GiB prefix or of a flood would
#: blow far past it.
RSS_MARGIN_MB = 48


def test_hostile_frames_are_typed_errors_and_the_broker_lives_on(
    workspace: Path, base: Path
) -> None:
    async def main() -> None:
        async with Broker(
            workspace=workspace, policy=POLICY, audit=base / "audit.db", tool_folders=[TOOLS]
        ) as broker:
            warm = await broker.call({"tool": "read_file", "arguments": {"path": "data.txt"}})
            assert warm.success, warm.error
            zygote = broker._backends["subprocess"].zygote_pid  # type: ignore[attr-defined]
            rss0 = psutil.Process().memory_info().rss
            got: list[tuple[str, str | None]] = []

            async def one(how: str) -> None:
                r = await broker.call({"tool": "hostile", "arguments": {"how": how}})
                got.append((how, str(r.error.type) if r.error else None))

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    for how in EXPECTED:
                        tg.start_soon(one, how)
            assert sorted(got) == sorted(list(EXPECTED.items()) * 3), got
            growth_mb = (psutil.Process().memory_info().rss - rss0) / 2**20
            assert growth_mb < RSS_MARGIN_MB, growth_mb

            forged = await broker.call({"tool": "hostile", "arguments": {"how": "forged_details"}})
            assert forged.error is not None and forged.error.details["n"] == 1
            assert len(forged.error.details["reason"]) <= 1024
            assert forged.usage.cpu_ms is None or forged.usage.cpu_ms >= 0

            after = await broker.call({"tool": "read_file", "arguments": {"path": "data.txt"}})
            assert after.success, after.error
            assert after.result["content"] == "x" * 4096
            assert broker._backends["subprocess"].zygote_pid == zygote  # type: ignore[attr-defined]
            report = broker.audit.verify()
            assert report.ok and report.count == 2 * (3 + 3 * len(EXPECTED))

    anyio.run(main)
