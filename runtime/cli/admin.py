"""``runtime policy``, ``runtime audit`` and ``runtime doctor``."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from runtime.cli.app import _err, _out, _read_call, app
from runtime.cli.exitcodes import EX_INTERNAL, EX_INVALID, EX_OK, EX_USAGE
from runtime.errors import AuditError, ConfigError, RuntimeToolError, ToolNotFound

__all__ = ["audit_app", "policy_app"]

policy_app = typer.Typer(help="Inspect policies.", no_args_is_help=True)
audit_app = typer.Typer(help="Verify, read and export the audit log.", no_args_is_help=True)
app.add_typer(policy_app, name="policy")
app.add_typer(audit_app, name="audit")


@policy_app.command("check")
def policy_check(
    policy: Annotated[str, typer.Argument(help="Policy file (TOML), or 'default'.")],
    call: Annotated[str, typer.Argument(help="Call file (JSON) or '-'.")],
    profile: Annotated[str | None, typer.Option(help="Agent profile.")] = None,
    tools_dir: Annotated[list[Path] | None, typer.Option("--tools-dir")] = None,
) -> None:
    """Print the policy's decision for CALL as JSON (action, rule id, reasons)."""
    from runtime.catalogue import Catalogue
    from runtime.mcp.external import placeholder_spec
    from runtime.policy import Policy
    from runtime.shapes import parse_call_bytes

    try:
        pol = Policy.default() if policy == "default" else Policy.load(policy)
        catalogue = Catalogue(folders=tools_dir or ())
        # The [[examples]] naming folder tools, with their real manifests, as the broker
        # checks them when it opens (at load the policy knew only the built-in tools).
        pol.check_examples(lambda name: catalogue.get(name) if name in catalogue else None)
    except ConfigError as exc:
        _err(f"runtime: {exc.message}")
        _out({"error": {"type": "config_error", "message": exc.message, **exc.details}})
        raise typer.Exit(EX_USAGE) from exc
    external = False
    try:
        tc = parse_call_bytes(_read_call(call))
        try:
            spec = catalogue.get(tc.tool)
        except ToolNotFound:
            # A tool of a [[mcp_servers]] entry: decided without starting the server.
            stand_in = placeholder_spec(list(pol.document.mcp_servers), tc.tool)
            if stand_in is None:
                raise
            spec, external = stand_in, True
        else:
            catalogue.argument_validator(spec.name).validate_arguments(spec.name, tc.arguments)
        decision = pol.decide(tc, spec, profile=profile)
    except RuntimeToolError as exc:
        _out({"error": {"type": str(exc.error_type), "message": exc.message}})
        raise typer.Exit(EX_INVALID) from exc
    report: dict[str, Any] = {
        "tool": tc.tool,
        "action": decision.action,
        "rule": decision.rule,
        "reasons": decision.reasons,
        "limits": decision.limits.model_dump(),
        "profile": decision.profile,
    }
    if external:
        report["arguments_checked"] = False  # the server's schema is known once it runs
    _out(report)


def _audit_log(audit: Path | None, workspace: Path) -> Any:
    from runtime.audit import AuditLog
    from runtime.audit._store import refuse_foreign_database

    try:
        path = _audit_path(audit, workspace)
    except ConfigError as exc:
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_USAGE) from exc
    if not path.exists():
        _err(f"runtime: no audit log at {path}")
        raise typer.Exit(EX_USAGE)
    if path.is_file() and path.stat().st_size == 0:
        # A log is never empty (its first open writes the schema and WAL mode into the
        # file): this one was truncated to nothing, and would "verify" as 0 records.
        raise AuditError(f"{path} is an empty file, not an audit log (truncated?)", path=str(path))
    # Another program's database: opening it as a log would write the schema and WAL mode
    # into it, and verify would call its zero records fine (the writer's check as well).
    refuse_foreign_database(path, allow_no_tables=False)
    try:
        return AuditLog(path)
    except AuditError as exc:
        # A reader without write access (an auditor, a copy on read-only media): opening
        # for writing fails, and these commands only read.
        if not _no_write_access(exc.__cause__):
            raise
        log = AuditLog(path, read_only=True)
    _err(
        f"runtime: no write access to {path}: read it read-only (records of a broker that "
        "died still in its journal file are not included)"
    )
    return log


def _audit_path(audit: Path | None, workspace: Path) -> Path:
    """The log to read. The default one gets the broker's checks (``runtime exec``'s): a
    checkout can carry ``.runtime/audit.db -> /another/log`` (whose records would be read
    as this workspace's) or a FIFO there (SQLite's open would wait for a writer for ever).
    An explicit ``--audit`` may be a symlink (the user named it), but must lead to a regular
    file. Raises ConfigError."""
    from runtime.broker._statedir import default_audit_path

    if audit is None:
        state_dir = workspace / ".runtime"
        # The directory as the broker would refuse it, but looked at only: a reader does
        # not tighten its mode (check_state_dir does, for the broker that writes there).
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISLNK(os.lstat(state_dir).st_mode):
                raise ConfigError(
                    f"state directory {state_dir} is a symlink (to {os.readlink(state_dir)}): "
                    "the runtime does not follow a link out of the workspace for its audit "
                    "log; name the log: --audit PATH",
                    path=str(state_dir),
                )
        return default_audit_path(state_dir)
    try:
        st = audit.stat()  # stat, not open: opening a FIFO or a device could block or act
    except FileNotFoundError:
        return audit  # said as "no audit log at" by the caller
    except OSError as exc:
        raise ConfigError(
            f"{audit} cannot be read: {exc.strerror or exc}", path=str(audit)
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{audit} is not a regular file, not an audit log", path=str(audit))
    return audit


def _not_creatable(directory: Path) -> str | None:
    """Why this user could not create (or use) ``directory``, else None. Looks only."""
    path = directory
    while not path.exists():
        if path.parent == path:
            return "no existing parent"
        path = path.parent
    if not path.is_dir():
        return f"{path} is not a directory"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable"
    return None


def _no_write_access(cause: BaseException | None) -> bool:
    if isinstance(cause, sqlite3.Error):
        return getattr(cause, "sqlite_errorcode", 0) & 0xFF in (_SQLITE_READONLY, _SQLITE_CANTOPEN)
    return isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


#: SQLite primary result codes: the file (or its directory, for the WAL files) is read-only.
_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14


AuditOpt = Annotated[Path | None, typer.Option("--audit", help="Audit database.")]
WorkspaceOpt = Annotated[Path, typer.Option(help="Workspace (default audit location).")]


@audit_app.command("verify")
def audit_verify(
    audit: AuditOpt = None,
    workspace: WorkspaceOpt = Path("workspace"),
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            help="An anchor kept elsewhere, 'SEQ:HASH' (a 'head' this command printed "
            "before): that record must still exist with that hash.",
        ),
    ] = None,
) -> None:
    """Check the hash chain; name the first bad record. The chain alone cannot show a
    rewritten or truncated log: keep the printed head elsewhere and pass it back."""
    anchor = None if expect_head is None else _parse_head(expect_head)
    try:
        with _audit_log(audit, workspace) as log:
            report = log.verify(expected_head=anchor)
            interrupted = log.interrupted()
    except RuntimeToolError as exc:
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_INTERNAL) from exc
    _out(
        {
            "ok": report.ok,
            "records": report.count,
            "first_bad": report.first_bad,
            "reason": report.reason,
            "interrupted": interrupted,
            "pending": report.pending,
            "head": None if report.head is None else f"{report.head[0]}:{report.head[1]}",
        }
    )
    raise typer.Exit(EX_OK if report.ok else 1)


def _parse_head(text: str) -> tuple[int, str]:
    """'SEQ:HASH' -> (SEQ, HASH in lower case: hex is case-insensitive, and a hash copied
    through a tool that upper-cased it was refused); a usage error (exit 64) otherwise. SEQ
    0 is the start of every chain, whose hash is the genesis hash: ``0:`` with another
    hash was accepted as ok, though it names no record of any log."""
    from runtime.audit import GENESIS_HASH

    seq, sep, digest = text.partition(":")
    digest = digest.lower()
    if (
        not sep
        or not (seq.isascii() and seq.isdigit())  # str.isdigit: '١٢' too
        or len(seq) > 18  # within SQLite's 64-bit integers
        or len(digest) != 64
        or any(c not in "0123456789abcdef" for c in digest)
    ):
        _err(f"runtime: --expect-head wants SEQ:HASH (a sha256 in hex), not {text!r}")
        raise typer.Exit(EX_USAGE)
    if int(seq) == 0 and digest != GENESIS_HASH:
        _err(
            f"runtime: --expect-head {text!r}: record 0 is the start of every chain, whose "
            f"hash is {GENESIS_HASH} (64 zeros); no record 0 has another: give the SEQ:HASH "
            "of a record ('head' as verify printed it)"
        )
        raise typer.Exit(EX_USAGE)
    return int(seq), digest


#: Most records ``audit tail -n`` prints: a bound, so that a count past SQLite's 64-bit
#: integers is a usage error (it was an OverflowError traceback) and a negative one too (it
#: printed nothing, exit 0).
_TAIL_MAX = 1_000_000_000


@audit_app.command("tail")
def audit_tail(
    n: Annotated[
        int, typer.Option("-n", min=0, max=_TAIL_MAX, help="Number of records (0 to 1e9).")
    ] = 20,
    audit: AuditOpt = None,
    workspace: WorkspaceOpt = Path("workspace"),
) -> None:
    """Print the last N records as JSON lines."""
    try:
        with _audit_log(audit, workspace) as log:
            records = log.tail(n)
    except RuntimeToolError as exc:
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_INTERNAL) from exc
    from runtime.audit._export import json_line

    for record in records:
        # One record a line to every reader (U+2028 and kin escaped; see json_line).
        sys.stdout.write(json_line(record.model_dump(mode="json")))


@audit_app.command("export")
def audit_export(
    jsonl: Annotated[
        bool,
        typer.Option(
            "--jsonl",
            help="JSON lines, the only export format (always used; the flag is accepted, as "
            "the README's usage shows it).",
        ),
    ] = False,
    audit: AuditOpt = None,
    workspace: WorkspaceOpt = Path("workspace"),
) -> None:
    """Export every record as JSON lines (OpenTelemetry GenAI keys next to ours)."""
    # --jsonl was a flag defaulting to True with no way to turn it off: it chose nothing,
    # and still does not (JSON lines is the one format); kept so that the documented
    # spelling works, and said so in its help.
    del jsonl
    try:
        with _audit_log(audit, workspace) as log:
            log.export_jsonl(sys.stdout)
    except RuntimeToolError as exc:
        # Lines before a malformed record may have been written: the exit code says the
        # export is incomplete.
        _err(f"runtime: {exc.message}")
        raise typer.Exit(EX_INTERNAL) from exc


#: How ``--tools-dir`` tools run (``runtime doctor``): what a user needs to know first.
_FOLDER_TOOLS = {
    "python_entry": "imported in each call's own sandboxed process, after every wall "
    "(seccomp last), from the manifest's folder bound read-only; never by the fork-server",
    "command": "argv template in the sandbox; a value making an item an option is refused",
    "category": "custom (a wasm tool may say data): allow each by name in the policy",
}


def _folder_problems(folders: list[Path]) -> dict[str, list[str]]:
    """Per folder tool of ``folders`` whose code its sandbox's user may not read, those
    files (``_binds.unreadable_code``: its calls are refused naming them)."""
    import os

    from runtime.backends.sandbox._binds import unreadable_code
    from runtime.backends.sandbox.backend import SANDBOX_UID
    from runtime.catalogue import Catalogue

    root = os.geteuid() == 0
    uid, gid = (SANDBOX_UID, SANDBOX_UID) if root else (os.geteuid(), os.getegid())
    problems: dict[str, list[str]] = {}
    for spec in Catalogue(builtins=False, folders=folders).list():
        entry = spec.entry or ""
        if (
            spec.backend.value != "subprocess"
            or spec.source is None
            or entry.startswith("runtime.")
        ):
            continue  # no module of the folder's to import
        module = entry.partition(":")[0]
        bad = unreadable_code(str(spec.source.parent.resolve()), module, uid, gid)
        if bad:
            problems[spec.name] = bad
    return problems


@app.command("doctor")
def doctor(
    tools_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--tools-dir",
            help="Tool folder to check too: code its sandbox's user may not read.",
        ),
    ] = None,
) -> None:
    """Report which isolation mechanisms this host offers."""
    from runtime.backends.sandbox.probe import limit_scopes, probe_host

    host = probe_host()
    caps = host.as_dict()
    from importlib.metadata import PackageNotFoundError, version

    wasm: dict[str, Any]
    try:
        wasm = {"available": True, "wasmtime": version("wasmtime")}
    except PackageNotFoundError as exc:  # pragma: no cover - a hard dependency
        wasm = {"available": False, "error": str(exc)}
    from runtime.backends.wasm import default_cache_dir

    cache = default_cache_dir()
    wasm["cache_dir"] = str(cache)
    unusable = _not_creatable(cache)
    if unusable is not None:  # every data tool would fail with a sandbox_error
        wasm["available"] = False
        wasm["error"] = (
            f"the guest cache {cache} cannot be created ({unusable}); set XDG_CACHE_HOME "
            "to a directory this user can write"
        )
    verdict = "ok" if not caps.get("missing_required") else "strict mode will refuse to run"
    from runtime.mcp.launch import isolation_available

    # External MCP servers ([[mcp_servers]]) run behind the same walls as calls, as one
    # long-lived sandboxed process each: strict mode starts them only when all are here.
    refused = isolation_available()
    mcp: dict[str, Any] = {"strict": "ok" if refused is None else f"refused: {refused}"}
    # A server uses the cgroups only when the broker is root (``process.plan_process``).
    server_limits = limit_scopes(host, cgroups=host.is_root)
    mcp["per_process_only"] = [
        name for name in server_limits["per_process_only"] if name in ("memory_mb", "pids")
    ]
    from runtime import _speedups

    # The C accelerator of the audit log's encoders (built here if it was not yet): when it
    # is not loaded, the pure-Python code runs, slower, and "error" says why.
    speedups = _speedups.status()
    folders: dict[str, Any] = dict(_FOLDER_TOOLS)
    if tools_dir:
        try:
            folders["unreadable"] = _folder_problems(tools_dir)
        except ConfigError as exc:  # a manifest that does not load
            folders["error"] = exc.message
    _out(
        {
            "sandbox": caps,
            "wasm": wasm,
            "strict_mode": verdict,
            # Strict mode may run without cgroups: which limits then bound each process only.
            "limits": limit_scopes(host),
            "mcp_servers": mcp,
            "speedups": speedups,
            "tool_folders": folders,
        }
    )
