"""``case`` statements (runtime/policy/_case.py): bashlex cannot parse them, so every one
asked as unparseable; each is now rewritten into a group of its branches. The differential
test runs bash on generated statements: every command bash runs must be one the walker
sees (or the walker must say it cannot read the text)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.policy import Policy
from runtime.policy._case import rewrite_cases
from runtime.policy.shell import analyse

BASH = shutil.which("bash")
RM = ("deny", "commands.deny.rm-root")


@pytest.mark.parametrize(
    "command",
    [
        'case "$x" in a) echo a;; esac',
        'case "$1" in start) make run;; stop) pkill -f app;; *) echo usage; exit 1;; esac',
        'case "$f" in\n  *.py) python3 -m black "$f" ;;\n  *.js) npx prettier -w "$f" ;;\nesac',
        'for f in *; do case "$f" in *.txt) wc -l "$f";; esac; done',
        "case x in (a) echo one;; esac",
        "x=$(case $1 in a) echo 1;; *) echo 2;; esac)",
        "case x in a) esac",
        'case "$(uname)" in Linux) echo linux;; Darwin) echo mac;; esac',
    ],
)
def test_everyday_case_statements_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "case $x in a|b) rm -rf /;; esac",
        "case $(rm -rf /) in a) :;; esac",
        "case x in $(rm -rf /)) :;; esac",
        'case x in a) echo ";;" ; rm -rf / ;; esac',
        "case x in a) echo a;& b) rm -rf /;;& esac",
        "case x in a) case y in b) rm -rf /;; esac;; esac",
        "case x in a) echo 'esac'; rm -rf /;; esac",
        "case x in a) # ;; esac\nrm -rf /;; esac",
    ],
)
def test_commands_in_any_branch_are_judged(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == RM, command


@pytest.mark.parametrize(
    "command",
    [
        "case x in a) cat <<EOF\nhi\nEOF\n;; esac",  # a here-document inside
        "case x in a) echo 'unterminated;; esac",
        "case x a) echo;; esac",  # no 'in'
    ],
)
def test_statements_not_read_for_certain_stay_unparseable(command: str) -> None:
    assert rewrite_cases(command) is None


# --- differential against bash -----------------------------------------------------------

_SUBJECTS = ["a", '"a"', "'a b'", "$(m S{i}; echo a)", "x", "'esac'"]
_PATTERNS = ["a", "*", "x|a", '"a b"', "'a b'", "[ab]", "$(m P{i}; echo a)", "esac", "in"]
_BODIES = [
    "m B{i}",
    "m B{i}; m C{i}",
    "echo ';;'; m B{i}",
    "echo ')' ; m B{i}",
    "# ;; esac\nm B{i}",
    "{ m B{i}; }",
    "(m B{i})",
    "x=$(m B{i}; echo)",
    "case a in a) m N{i};; esac",
    "",
    "echo esac; m B{i}",
    'echo "$(m B{i})"',
]
_TERMINATORS = [";;", ";&", ";;&", "\n;;"]


def _statement(draw: st.DrawFn) -> str:
    n = draw(st.integers(1, 3))
    subject = draw(st.sampled_from(_SUBJECTS))
    parts = [f"case {subject} in"]
    for k in range(n):
        pattern = draw(st.sampled_from(_PATTERNS))
        lead = draw(st.sampled_from(["", "("]))
        body = draw(st.sampled_from(_BODIES))
        end = draw(st.sampled_from(_TERMINATORS)) if k < n - 1 or draw(st.booleans()) else ""
        parts.append(f" {lead}{pattern}) {body} {end}")
    parts.append("\nesac")
    text = "".join(parts)
    counter = iter(range(1000))
    return re.sub(r"\{i\}", lambda _: str(next(counter)), text)


statements = st.composite(_statement)


def _markers_run(script: str, tmp: Path) -> set[str]:
    assert BASH is not None
    log = tmp / "log"
    log.write_text("")
    prelude = 'm() { printf "%s\\n" "$1" >> log; }\n'
    subprocess.run(
        [BASH, "-c", prelude + script], cwd=tmp, check=False, capture_output=True, timeout=10
    )
    return set(re.findall(r"[SPBCNA][0-9]+", log.read_text()))


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(statement=statements())
def test_every_command_bash_runs_is_seen(statement: str, tmp_path: Path) -> None:
    analysis = analyse(statement)
    if any(h.kind == "unparseable" for h in analysis.hazards):
        return  # asked: nothing is allowed unread
    seen = {a.value for c in analysis.commands if c.program == "m" for a in c.args}
    ran = _markers_run(statement, tmp_path)
    assert ran <= seen, (statement, ran - seen)


# --- array assignments (runtime/policy/_arrays.py) ----------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "x=(a b); echo ${x[0]}",
        'arr=(one two three); for i in "${arr[@]}"; do echo "$i"; done',
        "files=(*.py); echo ${#files[@]}",
        "declare -a arr=(1 2 3)",
        "arr+=(four)",
        'x=( "a b" c )',
        "x=(\n  a # comment )\n  b\n)",
        "local -a parts=(a b)",
    ],
)
def test_array_assignments_are_read(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


def test_substitutions_in_array_words_are_judged(policy: Policy) -> None:
    assert verdict(policy, "x=(a $(rm -rf /))") == RM
    assert verdict(policy, 'x=(a "$(rm -rf /)")') == RM
    assert verdict(policy, 'cmds=(rm -rf /); "${cmds[@]}"')[0] == "ask"


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(
    "script",
    ["x=(a $(m A1) b)", 'x=("$(m A1)" `m A2`)', "x+=(\n$(m A1) # )\n)", "declare -a y=($(m A1))"],
)
def test_array_words_bash_runs_are_seen(script: str, tmp_path: Path) -> None:
    analysis = analyse(script)
    assert not any(h.kind == "unparseable" for h in analysis.hazards)
    seen = {a.value for c in analysis.commands if c.program == "m" for a in c.args}
    assert _markers_run(script, tmp_path) <= seen
