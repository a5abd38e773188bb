"""The fork-server's heap stays small: no pydantic in the zygote, a plain Limits mirror."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.sandbox import SandboxBackend
from runtime.backends.sandbox.child import ChildLimits
from runtime.models import Limits
from runtime.toolkit import ToolContext
from tests.sandbox.helpers import READ_FILE, call, run_with_backend

pytestmark = pytest.mark.sandbox


def test_zygote_does_not_load_pydantic(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        outcome = await call(backend, READ_FILE, workspace, path="hello.txt")
        assert backend.zygote_pid is not None
        maps = await anyio.Path(f"/proc/{backend.zygote_pid}/maps").read_text()
        return outcome.result, maps

    result, maps = run_with_backend(fn)
    assert result["content"] == "hello\n"
    assert "_pydantic_core" not in maps  # every copy of the zygote (3 per call) would carry it
    # The seccomp programs are compiled by the broker: no libseccomp in the zygote either.
    assert "libseccomp" not in maps
    assert "_msgpack" in maps or "msgpack" in maps  # the check does look at the zygote


def test_child_limits_mirror_limits() -> None:
    mirror = {f.name: f.default for f in dataclasses.fields(ChildLimits)}
    assert mirror == Limits().model_dump()
    custom = Limits(timeout_s=2.5, output_bytes=4096, memory_mb=64)
    assert dataclasses.asdict(ChildLimits.from_dict(custom.model_dump())) == custom.model_dump()
    # Keys the child does not know are ignored, not fatal.
    assert ChildLimits.from_dict({"cpu_s": 3, "future_limit": 1}).cpu_s == 3


def test_tool_context_default_limits_are_the_model() -> None:
    ctx = ToolContext(workspace=Path("/"))
    assert ctx.limits == Limits()


def test_exit_report_is_sent_with_its_reap_time(workspace: Path) -> None:
    async def fn(backend: SandboxBackend) -> Any:
        ctl = backend._ctl
        assert ctl is not None
        reports: list[dict[str, Any]] = []
        wait_for = ctl.wait_for

        async def recording(call_id: int) -> dict[str, Any]:
            report = await wait_for(call_id)
            reports.append(report)
            return report

        ctl.wait_for = recording  # type: ignore[method-assign]
        before = time.monotonic()
        await call(backend, READ_FILE, workspace, path="hello.txt")
        return before, time.monotonic(), reports

    before, after, reports = run_with_backend(fn)
    (report,) = reports
    # CLOCK_MONOTONIC is system-wide: the zygote's reap time lies within the call.
    assert before <= report["reaped_at"] <= after
    assert report["exited"] is True
