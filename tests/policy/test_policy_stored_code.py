"""Command substitutions stored in a literal value and run where bash reads it as code again.

``x=a[\\$\\(rm\\ -rf\\ /\\)]`` stores the text ``a[$(rm -rf /)]``: nothing runs when it is
assigned, but an arithmetic context evaluates a variable's value as an expression and
expands the array subscript in it, so ``echo $((x))`` runs ``rm -rf /``. The walker reads
the substitutions of every literal value it sees assigned (plain assignments, ``read
<<<``, ``declare``/``export``) as a guess: a deny rule that matches them asks.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy

RM = "commands.deny.rm-root"


def test_bash_runs_a_subscript_stored_in_a_value(tmp_path: Path) -> None:
    """Why the rule exists: the stored text runs, with no eval in the command line."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    subprocess.run(
        [bash, "-c", r"x=a[\$\(touch\ ran\)]; echo $((x)) >/dev/null"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
    )
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "command",
    [
        r"x=a[\$\(rm\ -rf\ /\)]; echo $((x))",
        r"x=a[\`rm\ -rf\ /\`]; echo $((x))",
        r'x="a[\$(rm -rf /)]"; ((x))',
        r'x="a[\$(rm -rf /)]"; let y=x',
        r'x="a[\$(rm -rf /)]"; [[ $x -eq 0 ]]',
        r'x="a[\$(rm -rf /)]"; echo "${b[x]}"',
        r"declare x=a[\$\(rm\ -rf\ /\)]; echo $((x))",
        r"export x=a[\$\(rm\ -rf\ /\)]; bash -c 'echo $((x))'",
        "read -r x <<< 'a[$(rm -rf /)]'; echo $((x))",
        r"p=\$\(rm\ -rf\ /\); echo ${p@P}",
    ],
)
def test_stored_substitution_is_judged(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("ask", RM), command


@pytest.mark.parametrize(
    "command",
    [
        # The stored commands are harmless, or there are none.
        "PS1='\\u@\\h $(git branch 2>/dev/null)'",
        "x='$(date)'; echo \"$x\"",
        "n=$(wc -l < data.txt); echo $((n + 1))",
        "i=0; ((i++)); echo $i",
        # An escaped '$' is literal: no parameter, nothing built at run time.
        r"echo \$HOME",
        r'echo "price: \$5"',
        r"rm -f \$HOME",  # a file named '$HOME' in the workspace
    ],
)
def test_literal_values_without_harm_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


def test_escaped_substitution_in_a_shell_string_is_fixed_text(policy: Policy) -> None:
    """'bash -c "echo \\$(rm -rf /)"' hands the inner shell the fixed text 'echo $(rm -rf
    /)', which runs rm: read as that text, the rule denies (it asked before, as code built
    at run time)."""
    assert verdict(policy, r'bash -c "echo \$(rm -rf /)"') == ("deny", RM)
