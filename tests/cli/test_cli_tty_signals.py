"""SIGTERM or SIGHUP while ``runtime exec`` waits at a prompt (``Run it? [y/N]``, the
ask_user tool's question) ends the call there: cancelled and recorded, exit 128 + the
signal. The approver ran inline on the broker's loop, blocked in the terminal's ``read``,
and the signal's cancel waited for that loop: the process sat at the prompt until someone
answered (``timeout 5 runtime exec …`` did not stop it), and a closed terminal was then read
as "no" (recorded ``denied``). Now a synchronous approver runs in a worker thread that the
cancelled call abandons, and a prompt gives up (interrupting its call) when the CLI is
stopped. Run under a real pseudo-terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests._pythonpath import python_path
from tests.cli.test_cli_tty import _ON_THE_TERMINAL, CALL, POLICY, ROOT, _read_until

_ASK = '{"tool": "ask_user", "arguments": {"question": "Which?", "options": ["a", "b"]}}'


@pytest.mark.parametrize(
    ("call", "prompt"), [(CALL, b"Run it? [y/N]"), (_ASK, b"]\r\n> ")], ids=["approval", "ask_user"]
)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_at_a_prompt_cancels_the_call(
    tmp_path: Path, sig: int, call: str, prompt: bytes
) -> None:
    (tmp_path / "p.toml").write_text(POLICY)
    (tmp_path / "call.json").write_text(call)
    audit = tmp_path / "audit.db"
    argv = ["-m", "runtime", "exec", "call.json", "--policy", "p.toml", "--audit", str(audit)]
    main, term = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _ON_THE_TERMINAL, *argv],
            stdin=term,
            stdout=term,
            stderr=term,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": python_path(ROOT)},
        )
    finally:
        os.close(term)
    try:
        out = _read_until(main, prompt, time.monotonic() + 90)
        assert prompt in out, out
        proc.send_signal(sig)  # the terminal stays open, unanswered
        t0 = time.monotonic()
        code = proc.wait(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    assert code == 128 + sig
    assert elapsed < 10, elapsed
    with AuditLog(audit) as log:
        assert log.verify().ok and log.interrupted() == []
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]
