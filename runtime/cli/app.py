"""The ``runtime`` command line (DESIGN §7)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from runtime._jsontext import json_text, visible
from runtime.cli.exitcodes import EX_INTERNAL, EX_USAGE, exit_code_for
from runtime.errors import ConfigError, ErrorType, RuntimeToolError
from runtime.models import Decision, ErrorInfo, ToolCall, ToolResult

__all__ = ["app"]

app = typer.Typer(
    name="runtime",
    help="A secure execution runtime for untrusted LLM tool calls.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        import runtime

        sys.stdout.write(f"runtime {runtime.__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A secure execution runtime for untrusted LLM tool calls."""


def _out(obj: Any) -> None:
    # C1 controls, bidi overrides and other format characters escaped (runtime._jsontext)
    sys.stdout.write(json_text(obj, indent=2, default=str) + "\n")


def _err(msg: str) -> None:
    sys.stderr.write(msg + "\n")


def _read_call(source: str) -> bytes:
    if source == "-":
        # Hazard: with fd 0 closed ('<&-') Python sets sys.stdin to None; an AttributeError
        # traceback (exit 1) said nothing of what was wrong.
        stdin = sys.stdin
        if stdin is None:
            raise typer.BadParameter("cannot read the call from stdin: stdin is closed")
        try:
            return stdin.buffer.read(1_048_576 + 1)
        except (OSError, ValueError) as exc:  # EBADF, EISDIR; ValueError: a closed file
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise typer.BadParameter(f"cannot read the call from stdin: {reason}") from exc
    try:
        with open(source, "rb") as fh:
            return fh.read(1_048_576 + 1)
    except OSError as exc:
        raise typer.BadParameter(f"cannot read call file {source!r}: {exc.strerror}") from exc


def _not_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _tty_prompt(prompt: str) -> str | None:
    """Ask on the controlling terminal (stdin may be the call itself). None: no terminal.

    Unbuffered bytes: a text-mode ``open("/dev/tty", "r+")`` needs a seekable file and
    raises UnsupportedOperation (an OSError) on every terminal, so nothing was ever asked.
    """
    try:
        with open("/dev/tty", "r+b", buffering=0) as tty:
            tty.write(prompt.encode("utf-8", "replace"))
            line = tty.readline(4096)
    except OSError:
        return None
    return line.decode("utf-8", "replace").strip()


def _approver(auto: bool) -> Any:
    def approve(call: ToolCall, decision: Decision) -> bool:
        if auto:
            return True
        reasons = "; ".join(decision.reasons) or decision.rule
        answer = _tty_prompt(
            f"runtime: {call.tool} {json.dumps(call.arguments)[:200]}\n"
            f"  policy asks ({reasons}). Run it? [y/N] "
        )
        return (answer or "").lower() in ("y", "yes")

    if auto or ((sys.stdin.isatty() or os.path.exists("/dev/tty")) and sys.stderr.isatty()):
        return approve
    return None


def _ask_user(question: str, options: list[str] | None) -> str:
    suffix = f" [{' / '.join(options)}]" if options else ""
    answer = _tty_prompt(f"{question}{suffix}\n> ")
    if answer is None:
        raise RuntimeToolError("no terminal to ask the user")
    return answer


def _human(result: ToolResult) -> None:
    """The result for a terminal: its JSON (escaped by ``_out``), or one error line whose
    every part is shown with control and format characters escaped. Hazard: a custom
    guest's or an external server's error message reached the terminal raw (a screen clear,
    an ``ESC]8`` hyperlink to anywhere, a bidi override)."""
    if result.success:
        _out(result.result)
    else:
        assert result.error is not None
        error = result.error
        _err(f"{visible(result.tool)}: {visible(str(error.type))}: {visible(error.message)}")


@app.command("exec")
def exec_(  # noqa: PLR0917 - typer maps parameters to options
    call: Annotated[str, typer.Argument(help="Call file (JSON) or '-' for stdin.")],
    policy: Annotated[Path | None, typer.Option(help="Policy file (TOML).")] = None,
    workspace: Annotated[Path, typer.Option(help="Workspace directory.")] = Path("workspace"),
    audit: Annotated[Path | None, typer.Option(help="Audit database (SQLite).")] = None,
    approve: Annotated[bool, typer.Option(help="Approve 'ask' decisions.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the ToolResult JSON.")] = False,
    profile: Annotated[str | None, typer.Option(help="Agent profile of the policy.")] = None,
    tools_dir: Annotated[
        list[Path] | None, typer.Option("--tools-dir", help="Extra manifest folder.")
    ] = None,
    session: Annotated[
        str,
        typer.Option(help="Session the call belongs to (its audit records name it)."),
    ] = "default",
) -> None:
    """Run one tool call and print its result."""
    if _not_text(session):
        # Bytes that are not UTF-8 in argv arrive as lone surrogates, which no audit record
        # can hold: the call failed as internal_error (exit 70).
        raise typer.BadParameter("--session must be valid UTF-8 text")
    raw = _read_call(call)
    try:
        with _signals_stop():
            result = _exec(raw, workspace, policy, audit, approve, profile, tools_dir, session)
    except _Stopped as exc:
        # The broker closed on the way out: the call was cancelled and recorded.
        raise typer.Exit(128 + exc.signum) from None
    result, shown = _written(result)
    if as_json or not sys.stdout.isatty():
        _out(shown)
    else:
        _human(result)
    raise typer.Exit(exit_code_for(result))


def _written(result: ToolResult) -> tuple[ToolResult, dict[str, Any]]:
    """``result`` and its JSON; an ``internal_error`` result (exit 70) in its place when it
    cannot be written as JSON. Hazard: a result nested past pydantic's serialiser (255
    levels) raised out of here as a traceback, exit 1 and nothing on stdout, after the audit
    log recorded a success. The broker refuses such results now (``RESULT_MAX_DEPTH``);
    whatever else fails here still ends as a result, never a traceback."""
    try:
        return result, result.to_json_dict()
    except (ValueError, TypeError, RecursionError) as exc:
        failed = result.model_copy(
            update={
                "success": False,
                "result": None,
                "error": ErrorInfo(
                    type=ErrorType.INTERNAL_ERROR,
                    message=f"{result.tool}: the result could not be written as JSON "
                    f"({type(exc).__name__}: {str(exc)[:200]})",
                ),
            }
        )
        return failed, failed.to_json_dict()


class _Stopped(BaseException):
    """SIGTERM or SIGHUP arrived during ``runtime exec`` (a BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` on the way takes it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM (``timeout 5 runtime exec …``, a cancelled CI job) and SIGHUP end the call
    as Ctrl-C does: raised in this (the main) thread, the exception leaves the broker's
    ``with``, whose close cancels the call, ends its sandbox and records it. By default
    either signal killed the process on the spot, and the call's completion was never
    recorded. The previous handlers come back afterwards."""

    def stop(signum: int, frame: Any) -> None:
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exec(  # noqa: PLR0917 - exec_'s options, passed on
    raw: bytes,
    workspace: Path,
    policy: Path | None,
    audit: Path | None,
    approve: bool,
    profile: str | None,
    tools_dir: list[Path] | None,
    session: str,
) -> ToolResult:
    from runtime.broker import SyncBroker
    from runtime.cli._hint import sandboxed_tool

    try:
        broker = SyncBroker(
            workspace=workspace,
            policy=policy,
            audit=audit,
            approver=_approver(approve),
            ask_user=_ask_user if sys.stderr.isatty() else None,
            profile=profile,
            tool_folders=tools_dir or (),
            session=session,
            prespawn_sandbox=sandboxed_tool(raw, tools_dir or ()),
        )
        with broker:
            return broker.call(raw)
    except ConfigError as exc:
        _err(f"runtime: {exc.message}")
        # A policy or manifest file that does not load is a usage error: nothing ran.
        raise typer.Exit(EX_USAGE) from exc
    except RuntimeToolError as exc:
        # The broker could not open (an audit log that is locked, not a database, not
        # writable): nothing ran, and nothing was recorded. Not exit 1, which says the tool
        # ran and failed.
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_INTERNAL) from exc


@app.command("tools")
def tools(
    fmt: Annotated[
        str,
        typer.Option("--format", help="native | openai | openai-responses | anthropic | mcp"),
    ] = "native",
    tools_dir: Annotated[
        list[Path] | None, typer.Option("--tools-dir", help="Extra manifest folder.")
    ] = None,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
) -> None:
    """Print the tool definitions as JSON."""
    from runtime.catalogue import EXPORT_FORMATS, Catalogue, export_tool

    if fmt not in EXPORT_FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(EXPORT_FORMATS)}")
    try:
        catalogue = Catalogue(folders=tools_dir or ())
    except ConfigError as exc:  # a manifest that does not load, a folder that is not there
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_USAGE) from exc
    known = catalogue.categories()
    if category is not None and category not in known:
        raise typer.BadParameter(
            f"no category {category!r}; the categories are {', '.join(known)}",
            param_hint="--category",
        )
    specs = catalogue.list_by_category(category) if category else catalogue.list()
    _out([export_tool(s, fmt) for s in specs])
