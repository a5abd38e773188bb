"""Builtins and paths that hid a command (found by a red-team pass, each run for real):
'trap -- CMD EXIT', 'compgen -C CMD', 'mapfile -C CMD' (run with the index and the line
appended), a quoted array subscript holding a substitution ('let "a[$(cmd)]=1"': bash
evaluates it), and procfs links to the root and the working directory ('rm -rf
/proc/self/root/' is 'rm -rf /', '/proc/self/cwd/*' is './*')."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy
from runtime.policy.argv import proc_alias

RM = ("deny", "commands.deny.rm-root")
BASH = shutil.which("bash")


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
@pytest.mark.parametrize(
    "script",
    [
        "trap -- 'touch ran' EXIT",
        "compgen -C 'touch ran' x",
        "mapfile -t -C 'touch' -c 1 a <<< ran",
        "let 'a[$(touch ran)]=1'",
        "test -v 'a[$(touch ran)]'",
        "declare 'a[$(touch ran)]=1'",
    ],
)
def test_bash_runs_them(tmp_path: Path, script: str) -> None:
    assert BASH is not None
    subprocess.run([BASH, "-c", script], cwd=tmp_path, check=False, capture_output=True)
    assert (tmp_path / "ran").exists(), script


@pytest.mark.parametrize(
    "command",
    [
        "trap -- 'rm -rf /' EXIT",
        "trap -p -- 'rm -rf /' EXIT",
        "compgen -C 'rm -rf /' x",
        "compgen -aC 'rm -rf /' x",
        "rm -rf /proc/self/root/",
        "rm -rf /proc/self/cwd/",
        "rm -rf /proc/self/cwd/*",
        "rm -rf /proc/1/root/",
        "rm -rf /proc/thread-self/cwd/",
        "rm -rf /proc/1/task/1/root",
    ],
)
def test_hidden_commands_are_denied(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == RM, command


@pytest.mark.parametrize(
    "command",
    [
        "mapfile -t -C 'rm -rf' -c 1 a < list.txt",
        "let 'a[$(rm -rf /)]=1'",
        "let 'y = a[$(rm -rf /)] + 1'",
        "[[ -v 'a[$(rm -rf /)]' ]]",
        "test -v 'a[$(rm -rf /)]'",
        "printf -v 'a[$(rm -rf /)]' x",
        "read 'a[$(rm -rf /)]' <<< x",
        "declare 'a[$(rm -rf /)]=1'",
    ],
)
def test_run_time_callbacks_and_subscripts_ask(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "ask", command


def test_writes_through_proc_cwd_are_judged(policy: Policy) -> None:
    assert verdict(policy, "echo x > /proc/self/cwd/.git/config") == ("deny", "paths.deny_write")
    assert verdict(policy, "cp x /proc/self/cwd/.git/hooks/pre-commit") == (
        "deny",
        "paths.deny_write",
    )


@pytest.mark.parametrize(
    "command",
    [
        "trap - EXIT",
        "trap -l",
        "trap 'rm -f \"$tmp\"' EXIT",
        "compgen -c git",
        "mapfile -t lines < f.txt",
        "echo 'a[$(date)]'",
        "grep '[$(]' f",
        "sed 's/[$(]//g' f",
        "rm -rf /proc/self/cwd/build",
        "ls /proc/self/root/usr",
        "cat /proc/self/status",
    ],
)
def test_ordinary_uses_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("value", "alias"),
    [
        ("/proc/self/root/", "/"),
        ("/proc/self/root/etc", "/etc"),
        ("/proc/self/cwd", "."),
        ("/proc/42/cwd/a/b", "./a/b"),
        ("//proc//self//root//x", "/x"),
        ("/proc/self/root/proc/self/cwd/x", "./x"),
        ("/proc/self/status", "/proc/self/status"),
        ("/proc/self/rootx", "/proc/self/rootx"),
    ],
)
def test_proc_alias(value: str, alias: str) -> None:
    assert proc_alias(value) == alias
