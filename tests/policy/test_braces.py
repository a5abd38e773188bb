"""Brace expansion (runtime/policy/_braces.py) against bash itself, and the walker's use of
it: a braced literal word is judged as the words bash makes of it."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from _policy_helpers import verdict
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.policy import Policy
from runtime.policy._braces import MAX_WORDS, expand_braces

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def bash_words(word: str) -> list[str]:
    """What bash passes a program for the unquoted ``word`` (safe characters only)."""
    assert BASH is not None
    out = subprocess.run(
        [BASH, "-c", f"printf '%s\\0' {word}"], capture_output=True, text=True, check=True
    ).stdout
    # printf with no arguments still prints its format once: an empty field.
    return [w for w in out.split("\0")[:-1] if w]


@needs_bash
@pytest.mark.parametrize(
    "word",
    [
        "a{,}",
        "{a,b}",
        "{a,b{c,d}}",
        "x{1..3}y",
        "{01..3}",
        "{-1..2}",
        "{-01..2}",
        "{a..e..2}",
        "{1..3..0}",
        "{a,}",
        ",{a,b}",
        "{a..c}{1,2}",
        "{10..1..3}",
        "{0..-2}",
        "{a,b,}x",
        "config.json{,.bak}",
        "src/{components,utils}",
    ],
)
def test_expansions_match_bash(word: str) -> None:
    assert expand_braces(word) == bash_words(word)


@pytest.mark.parametrize(
    "word",
    # bash keeps some or all of these braces literal, or goes through characters other
    # than letters: not followed here.
    [
        *("{a}", "{}", "{a..C}", "{1..a}", "{a,b}}", "{{a,b}}", "{a,{b}}", "{a,b", "{..}"),
        *("{1..}", "{a,b}{}", "'{a,b}'", '"{a,b}"', "\\{a,b}", "{$x,b}", "{`id`,b}"),
        # Too many words; globs (together they may sweep what none does alone).
        *("{1..100}", "{a..z}*", "{a,b}*.o", "{[a-m],[n-z]}"),
    ],
)
def test_other_shapes_are_not_expanded(word: str) -> None:
    assert expand_braces(word) is None


def test_word_count_is_capped() -> None:
    assert len(expand_braces("{a,b}" * 6) or []) == 2**6 == MAX_WORDS
    assert expand_braces("{a,b}" * 7) is None


@needs_bash
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab01-.,{}", min_size=1, max_size=14))
def test_agrees_with_bash_whenever_it_expands(word: str) -> None:
    words = expand_braces(word)
    if words is not None:
        assert words == bash_words(word), word


@pytest.mark.parametrize(
    "command",
    [
        "cp config.json{,.bak}",
        "mv a.txt{,.old}",
        "chmod +x {a,b}.sh",
        "rm -f build/{a,b}.o",
        "mkdir -p src/{components,utils}",
        "touch file{1..3}.txt",
    ],
)
def test_braced_words_are_judged_as_their_expansion(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm -rf {a,/}", ("deny", "commands.deny.rm-root")),
        # Was a command name only known at run time (ask); it is 'rm -rf /'.
        ("{rm,-rf,/}", ("deny", "commands.deny.rm-root")),
        ("chmod -R 777 {x,/}", ("deny", "commands.deny.chmod-root")),
        # Not expanded here: as before, a word that may be any number of words.
        ("rm -rf {a,$d}", ("ask", "commands.deny.rm-root")),
    ],
)
def test_braced_attacks(policy: Policy, command: str, expected: tuple[str, str]) -> None:
    assert verdict(policy, command) == expected
