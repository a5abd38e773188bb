"""``runtime serve --mcp``: the broker as an MCP server (stdio, or streamable HTTP)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Annotated

import anyio
import typer

from runtime.cli.app import _err, app
from runtime.cli.exitcodes import EX_INTERNAL, EX_UNAVAILABLE, EX_USAGE
from runtime.errors import ConfigError, RuntimeToolError, SandboxUnavailable

__all__ = ["serve"]


def _ready(where: str) -> None:
    # stderr only: on stdio, stdout is the protocol.
    if where != "stdio":
        sys.stderr.write(f"runtime: MCP server listening on {where}\n")
        sys.stderr.flush()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """SIGTERM (systemd, ``docker stop``, a client ending its server) and SIGHUP (the
    terminal closed) stop the server as the end of its input does: cancelled, so that the
    broker ends the calls in flight, records them and closes the audit log. By default
    either signal killed the process on the spot, and a call in flight was left without its
    completion record. stdio only: uvicorn (``--http``) has its own graceful stop, and a
    cancellation from here reached it mid-shutdown (a CancelledError traceback in its log)."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


@app.command("serve")
def serve(  # noqa: PLR0917 - typer maps parameters to options
    mcp: Annotated[bool, typer.Option("--mcp", help="Speak the Model Context Protocol.")] = False,
    workspace: Annotated[Path, typer.Option(help="Workspace directory.")] = Path("workspace"),
    policy: Annotated[Path | None, typer.Option(help="Policy file (TOML).")] = None,
    audit: Annotated[Path | None, typer.Option(help="Audit database (SQLite).")] = None,
    http: Annotated[
        str | None,
        typer.Option(help="Serve streamable HTTP on HOST:PORT (port 0: any) instead of stdio."),
    ] = None,
    profile: Annotated[str | None, typer.Option(help="Agent profile of the policy.")] = None,
    tools_dir: Annotated[
        list[Path] | None, typer.Option("--tools-dir", help="Extra manifest folder.")
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(help="Allow --http on a non-loopback address (no built-in authentication)."),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="With --http: a Host header value to serve besides the defaults (NAME, "
            "NAME:PORT or NAME:*; repeatable). Default: loopback's names on loopback; the "
            "address served and its port with --allow-remote.",
        ),
    ] = None,
    allowed_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-origin",
            help="With --http: a browser Origin to serve (http(s)://NAME[:PORT], PORT "
            "1-65535 or '*' for any port, IPv6 in brackets; repeatable). Default: none "
            "remotely, loopback's own on loopback; a request without Origin is not a "
            "browser's and is served.",
        ),
    ] = None,
    ask_timeout: Annotated[
        float, typer.Option(help="Seconds an approval or question waits for the client.")
    ] = 300.0,
    log_level: Annotated[str, typer.Option(help="Logging level (to stderr).")] = "WARNING",
) -> None:
    """Serve the tool catalogue through the broker (validation, policy, sandbox, audit)."""
    if not mcp:
        raise typer.BadParameter("choose a protocol: --mcp")
    if not isinstance(logging.getLevelName(log_level.upper()), int):
        raise typer.BadParameter(
            f"--log-level {log_level!r}: one of DEBUG, INFO, WARNING, ERROR, CRITICAL"
        )
    if not ask_timeout > 0:  # also NaN
        raise typer.BadParameter(f"--ask-timeout {ask_timeout}: must be more than 0 seconds")
    try:
        from runtime.mcp import serve as serve_mcp
    except ImportError as exc:
        # The MCP SDK is the optional "mcp" extra; the README's install does not bring it.
        _err(f"runtime: serving MCP needs the MCP SDK ({exc}): pip install 'llm-tool-runtime[mcp]'")
        raise typer.Exit(EX_UNAVAILABLE) from exc
    logging.basicConfig(
        stream=sys.stderr,
        level=log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def main() -> None:
        failed: list[RuntimeToolError] = []
        async with anyio.create_task_group() as tg:
            if http is None:  # uvicorn handles them while it serves HTTP
                tg.start_soon(_stop_on_signal, tg.cancel_scope)
            try:
                await serve_mcp(
                    workspace=workspace,
                    policy=policy,
                    audit=audit,
                    profile=profile,
                    http=http,
                    tool_folders=tools_dir or (),
                    on_ready=_ready,
                    ask_timeout_s=ask_timeout,
                    allow_remote=allow_remote,
                    allowed_hosts=allowed_host or (),
                    allowed_origins=allowed_origin or (),
                )
            except RuntimeToolError as exc:  # raised below as itself, not in a group
                failed.append(exc)
            tg.cancel_scope.cancel()
        if failed:
            raise failed[0]

    try:
        anyio.run(main)
    except ConfigError as exc:
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_USAGE) from exc
    except SandboxUnavailable as exc:
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_UNAVAILABLE) from exc
    except RuntimeToolError as exc:
        # The broker could not open (an audit log that is locked or not a database).
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_INTERNAL) from exc
    except KeyboardInterrupt:
        return
