"""``runtime exec`` at a terminal asks before it runs an ``ask`` call (DESIGN §7 ``--approve``
is the unattended way). Before, the question was never shown and the call was refused:
``open("/dev/tty", "r+")`` in text mode raises ``UnsupportedOperation`` (a terminal is not
seekable), which the prompt took for "no terminal". Run under a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.mcp._prompt import arguments_digest
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]

POLICY = 'version = 1\ndefault = "deny"\n[categories]\nshell = "ask"\ninteraction = "allow"\n'
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


def _exec_at_a_terminal(
    tmp_path: Path,
    answer: bytes,
    call: str = CALL,
    prompt: bytes | None = b"Run it? [y/N]",
) -> tuple[int, bytes]:
    """Run ``call`` at a terminal; at ``prompt`` (None: there must be none) type
    ``answer``. The exit code and every byte written to the terminal."""
    (tmp_path / "p.toml").write_text(POLICY)
    (tmp_path / "call.json").write_text(call)
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
        out = b""
        if prompt is not None:
            out = _read_until(main, prompt, deadline)
            assert prompt in out, out
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


# The prompt showed json.dumps(arguments)[:200], unmarked: a command with 190 spaces after a
# harmless head was approved by a user who never saw "; echo owned > PWNED; rm -f keep.txt".
_LONG = "python3 -c 'print(42)'" + " " * 190 + "; echo owned > PWNED; rm -f keep.txt\u202e\u001b[2K"


def test_the_prompt_shows_the_whole_command_escaped(tmp_path: Path) -> None:
    call = json.dumps({"tool": "shell_exec", "arguments": {"command": _LONG}})
    code, out = _exec_at_a_terminal(tmp_path, b"n", call)
    assert code == 77, out
    assert b"echo owned > PWNED; rm -f keep.txt" in out
    assert b"\\u202e\\u001b[2K" in out and b"\x1b[2K" not in out
    assert b"Arguments sha256: " + arguments_digest({"command": _LONG}).encode() in out
    assert not (tmp_path / "PWNED").exists()


def test_a_command_too_long_to_show_is_refused_unasked(tmp_path: Path) -> None:
    call = json.dumps({"tool": "shell_exec", "arguments": {"command": "true " + "x" * 9000}})
    code, out = _exec_at_a_terminal(tmp_path, b"y", call, prompt=None)
    assert code == 77, out
    assert b"Run it?" not in out and b"too long to show for approval" in out


# ask_user / request_confirmation wrote the model's text raw: this one erased the real question
# and wrote another in its place, and set the terminal's clipboard (OSC 52).
_HOSTILE = (
    "Delete ALL files in the project?\r\x1b[2K\x1b[1A\x1b[2KMay I format the README? "
    "(harmless)\x1b]52;c;ZWNobyBwd25lZAo=\x07\x9b2J\x7f\u200b"
)


@pytest.mark.parametrize(
    ("tool", "arguments", "exit_code"),
    [
        ("request_confirmation", {"message": _HOSTILE}, 0),
        # "no" is not one of its options: the tool fails (1), after asking.
        ("ask_user", {"question": "Which?", "options": ["a" + _HOSTILE, "b"]}, 1),
    ],
)
def test_questions_reach_the_terminal_escaped(
    tmp_path: Path, tool: str, arguments: dict[str, object], exit_code: int
) -> None:
    call = json.dumps({"tool": tool, "arguments": arguments})
    code, out = _exec_at_a_terminal(tmp_path, b"no", call, prompt=b"]\r\n> ")
    assert code == exit_code, out
    for raw in (b"\x1b", b"\x07", b"\xc2\x9b", b"\x7f", b"\xe2\x80\x8b", b"?\r"):
        assert raw not in out, (raw, out)
    shown = rb"Delete ALL files in the project?\u000d\u001b[2K\u001b[1A\u001b[2KMay I format"
    assert shown in out
    assert rb"\u0007\u009b2J\u007f\u200b" in out


def test_a_question_past_the_bound_says_what_is_left_out() -> None:
    from runtime.mcp._prompt import visible_lines as visible

    assert visible("abc\ndef", 100) == "abc\ndef"
    assert visible("a\\u001b", 100) == "a\\\\u001b"  # a spelled escape is not a real one
    assert visible("x" * 10, 4) == "xxxx … [6 more characters not shown]"
    assert visible("\x1b" * 3, 13) == "\\u001b\\u001b … [1 more characters not shown]"
