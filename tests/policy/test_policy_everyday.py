"""Commands coding agents run every day, judged by the default policy.

With no approver an ``ask`` is a refusal, so a needless ask on an everyday command is an
agent that cannot work. Each benign command here was asked before its fix; the attack
controls beside it must still ask or be refused.
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy
from runtime.policy._word_shape import word_shape

RM = "commands.deny.rm-root"
CHMOD = "commands.deny.chmod-root"


# 1. A double-quoted run-time word is one argument: it may be the option or the path a
#    rule needs, not both ('chmod 755 "$f"' is no 'chmod -R 755 /'), and one that starts
#    with text other than '-' is never an option ('rm -f ./"$f"').


@pytest.mark.parametrize(
    "command",
    [
        'for f in scripts/*.sh; do chmod +x "$f"; done',
        'chmod 644 "$f"',
        'chmod 755 "$d"',
        'chown "$(id -u)" build',
        'chown "$USER" build',
        'rm -f ./"$f"',
        'sudo chmod 755 "$d"',
        'for f in *.o; do rm -f ./"$f"; done',
        # rm --no-preserve-root needs something to remove: one word is the flag or that.
        'rm -f "$tmp"',
        "trap 'rm -f \"$tmp\"' EXIT",
    ],
)
def test_one_quoted_runtime_word_is_one_argument(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        # The option is on the command line: the one word may be the path.
        ('chmod -R 755 "$d"', CHMOD),
        ('chown -R "$(id -u)" "$d"', CHMOD),
        ('rm -rf "$f"', RM),
        ('rm -rf ./"$f"', RM),  # './..'
        # The path is on the command line: the one word may be the option.
        ('chmod "$m" /', CHMOD),
        ('rm -f "$f" /', RM),
        # Unquoted, globbed or braced: split into several words, any of them an option.
        ("chmod 755 $d", CHMOD),
        ('chmod 755 "$d"*', CHMOD),
        ('chmod 755 "$d"{,x}', CHMOD),
        ('rm -f "$f"*', RM),
        # Several words: "$@", "${a[@]}", two run-time words.
        ('chmod 755 "$@"', CHMOD),
        ('chmod 755 "${a[@]}"', CHMOD),
        ('chmod 755 "$d" "$e"', CHMOD),
        ('rm -f "$f" "$g"', RM),
        ('rm --no-preserve-root "$d"', "commands.deny.rm-no-preserve-root"),
        # Quoting nested in a substitution is not followed: as before.
        ('chmod 755 "$(echo "$x")"', CHMOD),
        # A directory only known at run time makes every operand run-time.
        ('cd "$x" && chmod 755 "$d"', CHMOD),
        # Through wrappers and inner shells, the same reading.
        ('sudo chmod -R 755 "$d"', CHMOD),
        ("sh -c 'chmod -R 755 \"$1\"' _ /", CHMOD),
        ("sh -c 'rm -rf \"$1\"' _ /", RM),
        ('echo x | xargs chmod 755 "$d"', CHMOD),
        # Input at run time (xargs) is any number of words.
        ("xargs chmod 755", CHMOD),
        ("find . -name '*.orig' | xargs rm -f", RM),
    ],
)
def test_attack_controls_still_ask(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("ask", rule), command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ('rm "$f" -r /', RM),
        ('chmod "$m" -R /', CHMOD),
        ("rm --no-preserve-root x", "commands.deny.rm-no-preserve-root"),
    ],
)
def test_static_matches_still_deny(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule), command


@pytest.mark.parametrize(
    ("raw", "shape"),
    [
        ('"$f"', (True, "")),
        ('./"$f"', (True, "./")),
        ('GOPATH="$x"', (True, "GOPATH=")),
        ('-D"$x"', (True, "-D")),
        ('"$(id -u)"', (True, "")),
        ('"`id`"', (True, "")),
        ('"${x:-a}"/y', (True, "")),
        ('"$*"', (True, "")),
        ("$f", (False, "")),
        ('"a"$x', (False, "a")),
        ('"$@"', (False, "")),
        ('"${a[@]}"', (False, "")),
        ('"${!p@}"', (False, "")),
        ('"$d"*', (False, "")),
        ('"$d"{a,b}', (False, "")),
        ('"$(echo "$x")"', (False, "")),
        ('"$(echo x', (False, "")),
        ("$'\\x2dR'", (False, "")),
    ],
)
def test_word_shape(raw: str, shape: tuple[bool, str]) -> None:
    assert word_shape(raw) == shape


# 2. export/declare/local with a run-time value: the name is still known. It is judged by
#    the rules on assigned names, as 'NAME=VALUE cmd' is, so a name that merely ends in
#    PATH is no PATH.


@pytest.mark.parametrize(
    "command",
    [
        "export GOPATH=$HOME/go",
        'export CFLAGS="$CFLAGS -O2"',
        "export JAVA_HOME=$(dirname $(dirname $(readlink -f $(which java))))",
        'local out="$1"',
    ],
)
def test_exports_with_runtime_values(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("export PATH=$PATH:./node_modules/.bin", "commands.deny.loader-env"),
        ('export LD_PRELOAD="$x"', "commands.deny.loader-env"),
        ('local PATH="$1"', "commands.deny.loader-env"),
        ("declare -x BASH_ENV=$f", "commands.deny.loader-env"),
        ("export LD_PRELOAD=/tmp/x.so", "commands.deny.export-loader-env"),
        ('export "$v"=x', "commands.hazard.dynamic"),
        ("export $v", "commands.hazard.dynamic"),
    ],
)
def test_exports_that_change_what_runs_still_ask(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("ask", rule), command


# 3. Word sequences ('cmake -E remove_directory'): a double-quoted run-time word whose
#    literal start agrees with no word of a sequence cannot be one.


@pytest.mark.parametrize(
    "command",
    ['cmake -DCMAKE_INSTALL_PREFIX="$HOME/.local" ..', 'cmake -B build -S . -DFOO="$bar"'],
)
def test_sequence_rules_read_the_word_shape(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    "command",
    [
        'cmake "$op" remove_directory ..',
        'cmake -E "$x" ..',
        "cmake $args ..",  # unquoted: any number of words
        "cmake -DCMAKE_INSTALL_PREFIX=$HOME/.local ..",  # unquoted $HOME may split
    ],
)
def test_sequence_rules_still_ask(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("ask", "commands.deny.cmake-remove-root"), command
