"""One call of the mcp backend: a ``tools/call`` on a started server's stdio session or
through a url server's client, its failures as the runtime's typed errors, its result as
the broker's value.

Every failure is a result, never a broker crash: a server that dies is ``sandbox_error``
(and later calls fail fast), one that stalls is ``timeout``, an answer past the call's
output cap is ``output_too_large`` (that call alone when the answer's id could be read,
``_mcp_stdio``), a JSON-RPC error or an error result is ``tool_error``. What happened on
the way to a url server (requests sent again, sessions renewed, streams resumed) goes into
the call's usage, which the audit keeps.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError

from runtime.backends._mcp_tools import Connection
from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.errors import ExecutionError, OutputTooLarge, SandboxError, ToolFailed, ToolTimeout

__all__ = ["call_remote", "call_started", "remote_fingerprint", "text_of", "value_of"]


def _not_there(request: ExecRequest, conn: Connection, state: str) -> SandboxError:
    return SandboxError(
        f"{request.spec.name}: MCP server {conn.server.name!r} is {state}"
        + (f" ({conn.error})" if conn.error else ""),
        server=conn.server.name,
    )


def _timeout(request: ExecRequest, usage: dict[str, int] | None = None) -> ToolTimeout:
    return ToolTimeout(
        f"{request.spec.name}: no answer within {request.limits.timeout_s:g} s",
        limit_s=request.limits.timeout_s,
        usage=usage,
    )


async def call_started(
    conn: Connection, remote: str, request: ExecRequest, *, closed: bool
) -> ExecOutcome:
    """``tools/call`` on the stdio session of a server the proxy started."""
    session = conn.session
    if session is None or closed:
        raise _not_there(request, conn, "not running")
    name = request.spec.name
    pipes = conn.pipes
    if pipes is not None:
        # The answer's line may be as long as the call's output cap (and the envelope).
        pipes.widen(request.limits.output_bytes)
    t0 = anyio.current_time()
    try:
        with anyio.fail_after(request.limits.timeout_s):
            result = await session.call_tool(remote, dict(request.arguments))
    except TimeoutError as exc:
        raise _timeout(request) from exc
    except MCPError as exc:
        cap = pipes.answer_dropped(exc.data) if pipes is not None else None
        if cap is not None:
            # Its answer's line went past the cap and was dropped; the session goes on.
            raise OutputTooLarge(
                f"{name}: MCP server {conn.server.name!r} answered with a message of more "
                f"than {cap} bytes; the answer was dropped",
                limit_bytes=request.limits.output_bytes,
                server=conn.server.name,
            ) from exc
        if exc.code == types.CONNECTION_CLOSED and pipes is not None and pipes.over is not None:
            conn.session = None
            conn.error = pipes.overflow()
            raise OutputTooLarge(
                f"{name}: MCP server {conn.server.name!r} sent a message of more than "
                f"{pipes.over} bytes; its session was ended",
                limit_bytes=request.limits.output_bytes,
                server=conn.server.name,
            ) from exc
        if exc.code == types.CONNECTION_CLOSED:
            # The server died (or closed its stdout): later calls fail fast, clearly.
            conn.session = None
            conn.error = conn.error or "the server process exited"
            raise SandboxError(
                f"{name}: MCP server {conn.server.name!r} exited", server=conn.server.name
            ) from exc
        raise ToolFailed(f"{name}: {exc.message}", code=exc.code) from exc
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
        raise SandboxError(
            f"{name}: MCP server {conn.server.name!r} went away", server=conn.server.name
        ) from exc
    except RuntimeError as exc:  # the SDK's refusals (an input request, a claimed result)
        raise ToolFailed(f"{name}: {exc}") from exc
    if not isinstance(result, types.CallToolResult):
        raise ToolFailed(f"{name}: the server asked for input mid-call")
    usage = {"wall_ms": (anyio.current_time() - t0) * 1000}
    if result.is_error:
        raise ToolFailed(f"{name}: {text_of(result) or 'tool error'}")
    fingerprint = conn.launch.fingerprint if conn.launch else None
    return ExecOutcome(result=value_of(result), usage=usage, fingerprint=fingerprint)


async def call_remote(
    conn: Connection,
    remote: str,
    request: ExecRequest,
    *,
    closed: bool,
    mode: str,
) -> ExecOutcome:
    """``tools/call`` through the client of a server reached by url."""
    client = conn.remote
    if client is None or closed:
        raise _not_there(request, conn, "not connected")
    t0 = anyio.current_time()
    # What happened on the way (requests sent again, sessions renewed, streams resumed)
    # goes into the call's usage, which the audit record keeps, whether it succeeds or not.
    trace: dict[str, int] = {}
    try:
        result = await client.call_tool(
            remote,
            dict(request.arguments),
            timeout_s=request.limits.timeout_s,
            max_bytes=request.limits.output_bytes,
            trace=trace,
        )
    except TimeoutError as exc:
        raise _timeout(request, dict(trace)) from exc
    except ExecutionError as exc:
        exc.usage.update(trace)
        raise
    usage: dict[str, Any] = {"wall_ms": (anyio.current_time() - t0) * 1000, **trace}
    if result.is_error:
        text = client.scrub(text_of(result)) or "tool error"
        raise ToolFailed(f"{request.spec.name}: {text}", usage=usage)
    return ExecOutcome(
        result=value_of(result), usage=usage, fingerprint=remote_fingerprint(conn, mode)
    )


def remote_fingerprint(conn: Connection, mode: str) -> Fingerprint:
    """Where a url server's calls ran: nothing of the server runs here, the wall is the
    gateway (rules, pinning, caps). The same object each time (the broker prepares each
    fingerprint's audit form once)."""
    fingerprint = conn.fingerprint
    if fingerprint is None or fingerprint.mode != mode:
        fingerprint = Fingerprint(
            backend=f"mcp:{conn.server.name}", mechanisms=("egress-gateway",), mode=mode
        )
        conn.fingerprint = fingerprint
    return fingerprint


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))[:4096]


def value_of(result: types.CallToolResult) -> Any:
    if result.structured_content is not None:
        return result.structured_content
    return {
        "text": "\n".join(c.text for c in result.content if isinstance(c, types.TextContent)),
        "content": [
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content
        ],
    }
