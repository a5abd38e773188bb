"""The ``runtime`` command line (DESIGN §7)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from runtime._jsontext import json_text, visible
from runtime.cli.exitcodes import EX_INTERNAL, EX_USAGE, exit_code_for
from runtime.errors import ConfigError, ErrorType, RuntimeToolError, ToolNotFound
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


#: Set when ``runtime exec`` is stopped (SIGTERM, SIGHUP, or any way out of the call): a
#: prompt still waiting at the terminal gives up (raises _GaveUp). The broker asks in a
#: worker thread, which a cancelled call abandons; a prompt blocked in ``read`` there kept
#: the process from exiting (the thread is not a daemon) until someone answered.
_PROMPTS_STOP = threading.Event()
#: How often a waiting prompt looks at _PROMPTS_STOP (seconds).
_PROMPT_POLL_S = 0.1


class _GaveUp(BaseException):
    """A question at the terminal given up: ``runtime exec`` is stopping. A BaseException,
    so that the call is recorded as interrupted (cancelled) whether this or the call's
    cancellation reaches the broker first, never as the user's "no" (denied) nor as the
    tool's failure."""


def _tty_prompt(prompt: str) -> str | None:
    """Ask on the controlling terminal (stdin may be the call itself). None: no terminal.
    Raises _GaveUp when ``runtime exec`` is stopped while the question waits.

    Unbuffered bytes: a text-mode ``open("/dev/tty", "r+")`` needs a seekable file and
    raises UnsupportedOperation (an OSError) on every terminal, so nothing was ever asked.
    """
    try:
        with open("/dev/tty", "r+b", buffering=0) as tty:
            tty.write(prompt.encode("utf-8", "replace"))
            line = _read_line(tty.fileno())
    except OSError:
        return None
    if line is None:
        raise _GaveUp
    return line.decode("utf-8", "replace").strip()


def _read_line(fd: int, limit: int = 4096) -> bytes | None:
    """A line typed at the terminal ``fd`` (at most ``limit`` bytes; b"" at end of file);
    None once _PROMPTS_STOP is set."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    line = b""
    while not _PROMPTS_STOP.is_set():
        if not poller.poll(_PROMPT_POLL_S * 1000):
            continue
        chunk = os.read(fd, limit - len(line))
        line += chunk
        if not chunk or b"\n" in chunk or len(line) >= limit:
            return line
    return None


#: Characters of a question to the user, and of each of its options, shown at most (the
#: rest is said to be left out). Room for the longest a built-in tool asks, escapes aside:
#: review_with_feedback_content's title, 64 Ki-character content and prompt (the user
#: passes what they read), an ask_user option of 256.
_MAX_QUESTION = 100_000
_MAX_OPTION = 1024


def _approver(auto: bool, roles: Callable[[str], Mapping[str, str]]) -> Any:
    """The approver of ``runtime exec``: yes with ``--approve``, else the user's answer at
    the terminal to the call as it will run (``runtime.mcp._prompt.approval_text``, as the
    MCP server asks: deciding arguments whole, hidden characters escaped, what is left out
    said, the arguments' digest). It showed ``json.dumps(arguments)[:200]`` unmarked: a
    command with a long harmless head ran a tail nobody saw. Deciding arguments too long to
    show whole: refused, not asked about."""
    from runtime.mcp._prompt import MAX_DECIDING, approval_text, visible_lines

    def approve(call: ToolCall, decision: Decision) -> bool:
        if auto:
            return True
        reasons = visible_lines("; ".join(decision.reasons) or decision.rule, MAX_DECIDING)
        try:
            text = approval_text(call.tool, reasons, call.arguments, roles(call.tool))
        except (ValueError, RecursionError):  # not JSON text: nothing to show
            text = None
        if text is None:
            _err(
                f"runtime: {call.tool}: the arguments that decide what the call touches are "
                f"too long to show for approval (more than {MAX_DECIDING} characters); "
                "refused rather than asked about a partial view"
            )
            return False
        answer = _tty_prompt(f"runtime: {text}\nRun it? [y/N] ")
        return (answer or "").lower() in ("y", "yes")

    if auto or ((sys.stdin.isatty() or os.path.exists("/dev/tty")) and sys.stderr.isatty()):
        return approve
    return None


def _ask_user(question: str, options: list[str] | None) -> str:
    """Ask the user at the terminal. The question and options are the caller's (an LLM's):
    written raw, an escape sequence in them erased the real question and wrote another
    (cursor moves, line erases) or set the clipboard (OSC 52). Every character that hides,
    moves or reorders text is shown escaped, and each part is bounded with a marker
    (``runtime.mcp._prompt.visible_lines``)."""
    from runtime.mcp._prompt import visible_lines

    shown = [visible_lines(option, _MAX_OPTION) for option in options or ()]
    suffix = f" [{' / '.join(shown)}]" if shown else ""
    answer = _tty_prompt(f"{visible_lines(question, _MAX_QUESTION)}{suffix}\n> ")
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
        _PROMPTS_STOP.set()  # a question waiting at the terminal gives up
        raise _Stopped(signum)

    _PROMPTS_STOP.clear()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        _PROMPTS_STOP.set()  # Ctrl-C, an error: no prompt outlives the call
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

    def roles(tool: str) -> Mapping[str, str]:
        """``tool``'s arg_roles: the arguments an approval shows first and whole."""
        try:
            return dict(broker.catalogue.get(tool).arg_roles)
        except ToolNotFound:
            return {}

    try:
        broker = SyncBroker(
            workspace=workspace,
            policy=policy,
            audit=audit,
            approver=_approver(approve, roles),
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
