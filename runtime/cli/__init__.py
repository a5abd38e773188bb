"""The ``runtime`` command line. ``main`` maps usage errors to exit 64 (DESIGN §7)."""

from __future__ import annotations

import sys

import typer
from typer.exceptions import TyperException

from runtime.cli import admin as _admin  # registers its commands on the app
from runtime.cli import bench as _bench
from runtime.cli import serve as _serve
from runtime.cli._stdout import EX_SIGPIPE, StdoutClosed, discard, guarded
from runtime.cli.app import app
from runtime.cli.exitcodes import EX_USAGE

__all__ = ["app", "main"]

_ = (_admin, _bench, _serve)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if sys.stdout is None and not (args[:1] == ["serve"] and "--http" in args):
        # Started with descriptor 1 closed: every command but an HTTP server prints its
        # answer there, and exec would run the call and then fail to say how it went.
        sys.stderr.write("runtime: standard output is closed: nothing was run\n")
        return EX_USAGE
    stdout = sys.stdout
    if stdout is not None:
        sys.stdout = guarded(stdout)
    try:
        return _run(argv)
    except StdoutClosed:
        discard(stdout)
        return EX_SIGPIPE
    finally:
        sys.stdout = stdout


def _run(argv: list[str] | None) -> int:
    try:
        code = app(args=argv, standalone_mode=False)
        if sys.stdout is not None:  # a closed reader is seen here, not at the exit's flush
            sys.stdout.flush()
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except TyperException as exc:
        # typer vendors click: its usage errors carry click's exit code 2; the contract
        # (DESIGN §7) says usage errors exit 64.
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            sys.stderr.write(f"{exc}\n")
        return EX_USAGE if getattr(exc, "exit_code", 2) == 2 else int(getattr(exc, "exit_code", 1))
    return int(code or 0) if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
