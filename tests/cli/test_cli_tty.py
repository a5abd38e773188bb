"""``runtime exec`` at a terminal asks before it runs an ``ask`` call (DESIGN §7 ``--approve``
is the unattended way). Before, the question was never shown and the call was refused:
``open("/dev/tty", "r+")`` in text mode raises ``UnsupportedOperation`` (a terminal is not
seekable), which the prompt took for "no terminal". Run under a real pseudo-terminal."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]

POLICY = 'version = 1\ndefault = "deny"\n[categories]\nshell = "ask"\n'
CALL = '{"tool": "shell_exec", "arguments": {"command": "echo approved-and-ran"}}'


def _read_until(fd: int, needle: bytes, deadline: float) -> bytes:
    seen = b""
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    return seen


# The child makes the terminal its controlling one (what a login shell's job does), then
# becomes the CLI. Through subprocess, not pty.fork(): a fork of the multi-threaded test
# process warns (an error here).
_ON_THE_TERMINAL = (
    "import fcntl, os, sys, termios\n"
    "os.setsid()\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


def _exec_at_a_terminal(tmp_path: Path, answer: bytes) -> tuple[int, bytes]:
    (tmp_path / "p.toml").write_text(POLICY)
    (tmp_path / "call.json").write_text(CALL)
    argv = ["-m", "runtime", "exec", "call.json", "--policy", "p.toml"]
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
    deadline = time.monotonic() + 90
    try:
        out = _read_until(main, b"Run it? [y/N]", deadline)
        assert b"Run it? [y/N]" in out, out
        os.write(main, answer + b"\r")
        out += _read_until(main, b"\x00", deadline)  # to the end
    finally:
        code = proc.wait(timeout=60)
        os.close(main)
    return code, out


@pytest.mark.sandbox
def test_yes_at_the_prompt_runs_the_call(tmp_path: Path) -> None:
    code, out = _exec_at_a_terminal(tmp_path, b"y")
    assert code == 0, out
    assert b"approved-and-ran" in out


def test_no_at_the_prompt_refuses_the_call(tmp_path: Path) -> None:
    code, out = _exec_at_a_terminal(tmp_path, b"n")
    assert code == 77, out
    assert b"the approver refused the call" in out
