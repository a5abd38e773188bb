"""Policy round 6b, read again: single-quoted text as fixed text, IFS scoped to ``read``.

Each refused or asked command was allowed before its fix; the allowed ones stay allowed.
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy

RM = "commands.deny.rm-root"
DYN = "commands.hazard.dynamic"


# 1. bashlex keeps a ${...} expansion's text unparsed: the commands inside it were never
# seen, at the top level and (since single-quoted code is parsed) in bash -c '...' alike.
@pytest.mark.parametrize(
    ("command", "verdict_"),
    [
        ("echo ${x:-$(rm -rf /)}", ("deny", RM)),
        ('echo "${x:-$(rm -rf /)}"', ("deny", RM)),
        ("echo ${x:-`rm -rf /`}", ("deny", RM)),
        ("bash -c 'echo ${x:-$(rm -rf /)}'", ("deny", RM)),
        ("echo ${x#$(id)}", ("ask", DYN)),
        ("echo ${a[$(id)]}", ("ask", DYN)),
        ("echo ${x:-<(id)}", ("ask", DYN)),
        # inside double quotes the single quotes are literal: bash runs id
        ("echo \"${x:-'$(id)'}\"", ("ask", DYN)),
    ],
)
def test_substitution_inside_parameter_expansion(
    policy: Policy, command: str, verdict_: tuple[str, str]
) -> None:
    assert verdict(policy, command) == verdict_


@pytest.mark.parametrize(
    "command",
    ['echo ${x:-$y} ${#x} ${x%.txt} ${!x} "${x:-default}"', 'f=${1:-a.txt}; wc -l "$f"'],
)
def test_parameter_expansion_without_substitution_is_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


# 2. IFS scoped to read: only while read is the builtin, and read's fields stay unknown.
LOADER = "commands.deny.loader-env"
NODE_DATA = "--import=data:text/javascript,1"


@pytest.mark.parametrize(
    ("command", "verdict_"),
    [
        # read's fields split at ':' are not the blank-split fields: not known here
        (
            f"IFS=: read -r x NODE_OPTIONS <<< 'a:{NODE_DATA}'; export NODE_OPTIONS; npm test",
            ("ask", DYN),
        ),
        # a function named read runs its whole body with that IFS
        ("read(){ :; }; IFS=: read; echo $x", ("ask", LOADER)),
        ("function read { :; }; IFS=: read", ("ask", LOADER)),
        ("for i in 1 2; do IFS=: read; read(){ :; }; done", ("ask", LOADER)),
        ("read(){ :; }; export -f read; bash -c 'IFS=: read; ls'", ("ask", LOADER)),
        ("enable -n read; IFS=: read", ("ask", LOADER)),
        ("function f { f | f & }; f", ("deny", "commands.deny.fork-bomb")),
    ],
)
def test_ifs_scoped_only_to_the_builtin(
    policy: Policy, command: str, verdict_: tuple[str, str]
) -> None:
    assert verdict(policy, command) == verdict_


@pytest.mark.parametrize(
    "command",
    [
        'while IFS= read -r line; do echo "$line"; done < a.txt',
        'IFS=: read -r a b < f; echo "$a"',
        "IFS=, mapfile -t rows < f",
        "f(){ echo hi; }; IFS= read -r x < f; f",
    ],
)
def test_ifs_scoped_to_the_builtin_is_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"
