"""ANSI-C quoting ($'...') read as the literal text bash makes of it
(runtime/policy/_ansi_c.py), against bash itself."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from _policy_helpers import verdict
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.policy import Policy
from runtime.policy._ansi_c import ansi_c_word, decode_ansi_c

BASH = shutil.which("bash")

_PIECES = ["a", "Z", "0", "7", "9", "x", "u", "U", "c", "e", "n", "?", " ", "/", ".", '"', "é"]
_ESCAPES = ["\\", "\\\\", "\\'", "\\x", "\\0", "\\c", "\\u", "\\U", "\\e", "\\n", "\\t", "\\?"]


def _bash_bytes(body: str) -> bytes:
    assert BASH is not None
    out = subprocess.run(
        [BASH, "-c", f"printf '%s' $'{body}' | od -An -tx1"],
        capture_output=True,
        text=True,
        check=True,
        env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"},
    ).stdout
    return bytes.fromhex("".join(out.split()))


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES + _ESCAPES), min_size=1, max_size=8))
def test_decoding_matches_bash(parts: list[str]) -> None:
    body = "".join(parts)
    # An unescaped quote would end the string, a trailing lone backslash escape it.
    stripped = body.replace("\\\\", "")
    if "'" in stripped.replace("\\'", "") or stripped.endswith("\\"):
        return
    decoded = decode_ansi_c(body)
    if decoded is None:
        return  # beyond ASCII: the word stays a run-time word
    assert decoded.encode() == _bash_bytes(body), body


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("$'.git'/hooks/x", ".git/hooks/x"),
        ("$'\\x2egit'", ".git"),
        ("a$'b\\nc'd", "ab\ncd"),
        ("'x'$'y'\"z\"", "xyz"),
        ("$'a\\0b'c", "ac"),
    ],
)
def test_ansi_c_word(raw: str, value: str) -> None:
    assert ansi_c_word(raw) == value


@pytest.mark.parametrize(
    "raw",
    [
        "$'a'$b",  # a parameter
        "$'a'*",  # a glob
        "$'a'\"$x\"",  # an expansion inside double quotes
        "$'unterminated",
        "$'/../.git'",  # dash reads '$/../.git', which is '.git'
        "$'\\xe9'",  # a byte beyond ASCII
        "plain",
    ],
)
def test_words_that_stay_run_time(raw: str) -> None:
    assert ansi_c_word(raw) is None


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat x > $'.git'/hooks/pre-commit", ("deny", "paths.deny_write")),
        ("cat x > $'\\x2egit'/hooks/pre-commit", ("deny", "paths.deny_write")),
        ("cd $'.git' && cat ../x > hooks/pre-commit", ("deny", "paths.deny_write")),
        ("rm -rf $'/'", ("deny", "commands.deny.rm-root")),
        ("rm -rf $'\\x2f'", ("deny", "commands.deny.rm-root")),
        ("sed $'s/x/y/\\ne rm -rf /' f", ("ask", "commands.hazard.interpreter")),
    ],
)
def test_ansi_c_words_are_judged_as_text(policy: Policy, command: str, expected: object) -> None:
    assert verdict(policy, command) == expected


@pytest.mark.parametrize(
    "command", ["echo $'hello\\nworld'", "printf $'%s\\n' a b", "IFS=$'\\n' read -r x"]
)
def test_everyday_ansi_c_words_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"
