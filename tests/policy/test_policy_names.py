"""Names that run another program: 'hash -p FILE NAME' makes NAME run FILE, as an alias
does ('hash -p /bin/rm ls; ls -rf /' runs rm -rf /), and 'enable -f LIB NAME' loads a
builtin's code from a shared object. Before, both were allowed unseen."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy


def test_bash_runs_the_hashed_program(tmp_path: Path) -> None:
    """Why: the name runs the file bash was given for it."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    touch = shutil.which("touch")
    assert touch is not None
    subprocess.run(
        [bash, "-c", f"hash -p {touch} ls; ls ran"], cwd=tmp_path, check=False, capture_output=True
    )
    assert (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "command",
    [
        "hash -p /bin/rm ls; ls -rf /",
        "hash -p/bin/rm ls; ls -rf /",
        "hash -rp /bin/rm ls cat; cat -rf /",
        "hash -p /bin/rm -- ls; ls -rf /",
        'hash -p /bin/rm "$name"',
    ],
)
def test_hashed_names_ask(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("ask", "commands.hazard.dynamic"), command


def test_enable_f_loads_code(policy: Policy) -> None:
    assert verdict(policy, "enable -f ./lib.so evil; evil") == (
        "ask",
        "commands.hazard.interpreter",
    )


@pytest.mark.parametrize(
    "command", ["hash -r", "hash ls; ls", "hash -t ls", "enable -n echo", "enable -a"]
)
def test_plain_hash_and_enable_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command
