"""A signal whose handler raises (Ctrl-C's KeyboardInterrupt, ``runtime exec``'s SIGTERM and
SIGHUP) landing while :meth:`SyncBroker.open` waits for its loop thread to start hung the
process forever: anyio's ``start_blocking_portal`` then joined a loop thread nobody stopped
(``runtime exec`` hung on ~1 in 60 SIGTERMs sent in its first second). Now the signal is
held until the portal can be stopped, then raised from open(), which stops it.

Deterministic: in a child process, the first ``Future.result`` (open() waiting for the
portal) sends the signal to its own process, so that the handler raises right there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import concurrent.futures, os, signal, sys, threading

    from runtime.broker import SyncBroker

    sig = int(sys.argv[1])
    workspace = sys.argv[2]

    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped(signum)

    if sig != signal.SIGINT:
        signal.signal(sig, stop)
    else:
        # Python's own handler (KeyboardInterrupt). Installed explicitly: a test run started
        # as a background job of a non-interactive shell inherits SIGINT ignored, and then
        # Python installs no handler and the signal is simply dropped.
        signal.signal(sig, signal.default_int_handler)

    original = concurrent.futures.Future.result

    def result(self, timeout=None):
        concurrent.futures.Future.result = original
        os.kill(os.getpid(), sig)  # its handler runs here, as this call waits
        return original(self, timeout)

    concurrent.futures.Future.result = result
    try:
        with SyncBroker(workspace=workspace) as broker:
            print("opened", flush=True)
    except (KeyboardInterrupt, Stopped) as exc:
        print("interrupted", type(exc).__name__, flush=True)
    # the portal's loop thread was stopped (daemon threads aside, none is left)
    print("threads", sorted(t.name for t in threading.enumerate() if not t.daemon), flush=True)
    """
)


def _run_script(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``source`` run as a script in a child with ``args``; it must exit 0."""
    script = tmp_path / "script.py"
    script.write_text(source)
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_the_portal_starts_interrupts_open(tmp_path: Path, sig: int) -> None:
    proc = _run_script(tmp_path, _SCRIPT, str(int(sig)), str(tmp_path / "ws"))
    expected = "KeyboardInterrupt" if sig == signal.SIGINT else "Stopped"
    assert proc.stdout.splitlines() == [f"interrupted {expected}", "threads ['MainThread']"]


# The same signal landing while close() waits for the broker's aclose (the CLI's ``with``
# leaving on a first SIGTERM, then ``timeout``'s second one to the group): close() still
# ends the broker, its fork-server and the loop thread, and the records are all there.
_CLOSE_SCRIPT = textwrap.dedent(
    """
    import concurrent.futures, os, signal, sys, threading

    import psutil

    from runtime.audit import AuditLog
    from runtime.broker import SyncBroker

    sig, workspace, audit = int(sys.argv[1]), sys.argv[2], sys.argv[3]

    class Stopped(BaseException):
        pass

    def stop(signum, frame):
        raise Stopped(signum)

    signal.signal(sig, stop if sig != signal.SIGINT else signal.default_int_handler)
    original = concurrent.futures.Future.result

    def result(self, timeout=None):
        concurrent.futures.Future.result = original
        os.kill(os.getpid(), sig)  # its handler runs here, as close() waits
        return original(self, timeout)

    try:
        with SyncBroker(workspace=workspace, audit=audit) as broker:
            call = {"tool": "shell_exec", "arguments": {"command": "echo hi"}}
            print("called", broker.call(call).success, flush=True)
            concurrent.futures.Future.result = result
    except (KeyboardInterrupt, Stopped) as exc:
        print("interrupted", type(exc).__name__, flush=True)
    print("threads", sorted(t.name for t in threading.enumerate() if not t.daemon), flush=True)
    print("children", len(psutil.Process().children(recursive=True)), flush=True)
    with AuditLog(audit) as log:
        print("audit", log.verify().ok, [r.kind for r in log.tail(2)], flush=True)
    """
)


@pytest.mark.sandbox
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_close_waits_loses_nothing(tmp_path: Path, sig: int) -> None:
    args = (str(int(sig)), str(tmp_path / "ws"), str(tmp_path / "a.db"))
    proc = _run_script(tmp_path, _CLOSE_SCRIPT, *args)
    expected = "KeyboardInterrupt" if sig == signal.SIGINT else "Stopped"
    assert proc.stdout.splitlines() == [
        "called True",
        f"interrupted {expected}",
        "threads ['MainThread']",
        "children 0",
        "audit True ['request', 'completion']",
    ]
