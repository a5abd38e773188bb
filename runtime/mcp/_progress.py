"""Progress heartbeats for a ``tools/call`` that runs long.

Why: clients time a request out unless something arrives for it — the TypeScript SDK's
request timeout (60 s by default, restarted by progress under ``resetTimeoutOnProgress``),
the Python SDK's read timeout — so a legitimate two-minute ``shell_exec`` build was cut by
the client while the sandbox was still working. When the request carried
``_meta.progressToken``, a call still running after :data:`HEARTBEAT_S` gets
``notifications/progress`` every interval:

* ``progress``: seconds since the call arrived, strictly increasing (the spec's MUST);
* ``total``: where the call's timeout ends on that scale (the seconds it waited for a
  decision, an approval and a slot, plus the timeout the policy gave it), once the broker
  has started it; omitted before that, and in the short grace after the timeout while the
  backend is being stopped (progress never exceeds a total sent with it);
* ``message``: what the call is doing, in a few words.

The heartbeats stop before the handler returns its result, so none can follow the response
on the wire (both transports write in order), and a call that ends within the interval gets
none. No token, no heartbeat task at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["HEARTBEAT_S", "heartbeat", "progress_token"]

log = logging.getLogger("runtime.mcp")

#: Seconds between progress notifications of a running call (and before the first one).
HEARTBEAT_S = 5.0


def progress_token(ctx: Any) -> str | int | None:
    """The request's ``_meta.progressToken``, or None when the client asked for none."""
    meta = getattr(ctx, "meta", None)
    if not isinstance(meta, dict):
        return None
    token = meta.get("progress_token", meta.get("progressToken"))
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        return None
    return token


class _Beat:
    """One call's heartbeat state: when it arrived, and where its timeout ends."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.t0 = time.monotonic()
        self.total: float | None = None
        self.last = 0.0

    def started(self, timeout_s: float) -> None:
        """The broker's ``on_run``: the backend starts now, bounded by ``timeout_s``."""
        self.total = round(time.monotonic() - self.t0 + timeout_s, 1)

    def next(self) -> tuple[float, float | None, str]:
        progress = max(round(time.monotonic() - self.t0, 1), round(self.last + 0.1, 1))
        self.last = progress
        if self.total is None:
            return progress, None, f"{self.tool}: waiting to run ({progress:g} s)"
        if progress > self.total:
            return progress, None, f"{self.tool}: stopping after its timeout"
        return progress, self.total, f"{self.tool}: running ({progress:g} of {self.total:g} s)"


@asynccontextmanager
async def heartbeat(
    ctx: Any, tool: str, interval_s: float
) -> AsyncIterator[Callable[[float], None] | None]:
    """Send progress for the request of ``ctx`` every ``interval_s`` while the body runs,
    when the request asked for progress. Yields the broker's ``on_run`` hook (None when
    the request asked for no progress: the broker then has nothing to call)."""
    if progress_token(ctx) is None:
        yield None
        return
    beat = _Beat(tool)

    async def run() -> None:
        while True:
            await anyio.sleep(interval_s)
            progress, total, message = beat.next()
            try:
                # Request-scoped: on Streamable HTTP it rides the call's own response stream.
                await ctx.session.report_progress(progress, total, message)
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # a gone client must not fail the call it asked for
                log.debug("progress for %s not delivered: %s", tool, exc)
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield beat.started
        finally:
            # Before the result is returned: no heartbeat may follow the response.
            tg.cancel_scope.cancel()
