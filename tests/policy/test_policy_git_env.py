"""Code hidden in git's subcommand options and config keys, in environment variables that
programs read as start-up commands, and in interpreters' modes that run a file or their
input. Each command here was allowed before (found by a red-team run): 'git clone
--template=T' copies T's hooks and runs post-checkout, 'git grep -OCMD' runs CMD as the
pager, 'trailer.x.cmd' is a shell command, VIMINIT holds ex commands, a lesskey source
sets LESSOPEN, 'python3 -m timeit CODE' runs CODE."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy


def _git(tmp_path: Path) -> tuple[str, Path]:
    """git and a repository with one committed file 'a' holding 'foo'."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "r"
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("foo\n")
    subprocess.run([git, "add", "a"], cwd=repo, check=True)
    subprocess.run([git, *ident, "commit", "-qm", "m"], cwd=repo, check=True)
    return git, repo


def test_git_grep_runs_its_pager_option(tmp_path: Path) -> None:
    """Why: 'git grep -OCMD' runs CMD through the shell with the matching files."""
    git, repo = _git(tmp_path)
    subprocess.run([git, "grep", "-Otouch ran", "foo"], cwd=repo, check=False)
    assert (repo / "ran").exists()


def test_git_clone_template_runs_its_hooks(tmp_path: Path) -> None:
    """Why: the template's hooks are copied into the clone and post-checkout runs."""
    git, _repo = _git(tmp_path)
    hooks = tmp_path / "T" / "hooks"
    hooks.mkdir(parents=True)
    hook = hooks / "post-checkout"
    hook.write_text("#!/bin/sh\ntouch ran\n")
    hook.chmod(0o755)
    subprocess.run([git, "clone", "-q", "--template=T", "r", "d"], cwd=tmp_path, check=False)
    assert (tmp_path / "d" / "ran").exists()


def test_git_trailer_cmd_is_a_shell_command(tmp_path: Path) -> None:
    """Why: interpret-trailers runs trailer.<x>.cmd through the shell."""
    git, repo = _git(tmp_path)
    subprocess.run(
        [git, "-c", "trailer.s.cmd=touch ran; echo", "interpret-trailers", "--trailer", "s=x"],
        cwd=repo,
        input="",
        text=True,
        capture_output=True,
        check=False,
    )
    assert (repo / "ran").exists()


@pytest.mark.parametrize(
    "command",
    [
        # 1. templates carry hooks
        "mkdir -p T/hooks; printf 'rm -rf /' > T/hooks/post-checkout;"
        " git clone --template=T src dst",
        "git clone --template=T src dst",
        "git clone --templ T src dst",
        "git init --template=T d",
        "git init --te=T d",
        'git clone --template="$t" src dst',
        # 2. clone's own -c sets keys in the new repository
        "git clone -c core.hooksPath=/abs/h src d",
        "git clone -c core.fsmonitor='rm -rf /' src d",
        "git clone --config core.fsmonitor='rm -rf /' src d",
        "git clone --config=core.fsmonitor='rm -rf /' src d",
        "git clone --conf=core.hooksPath=h src d",
        "git clone -qc core.hooksPath=h src d",
        "git clone -qccore.hooksPath=h src d",
        'git clone -c "$kv" src d',
        # 3. filter-branch --setup is shell
        "git filter-branch --setup 'rm -rf /' HEAD",
        "git filter-branch --setup='rm -rf /' HEAD",
        # 4. grep's pager
        "git grep -O'rm -rf /' x",
        "git grep -nO'rm -rf /' x",
        "git grep --open-files-in-pager='rm -rf /' x",
        "git grep --open='rm -rf /' x",
        # 5. config keys that hold commands or program paths
        "git config trailer.x.cmd 'rm -rf /'",
        "git config trailer.x.command 'rm -rf /'",
        "git -c trailer.x.cmd='rm -rf /' interpret-trailers",
        "git config browser.x.path /tmp/x",
        "git config browser.x.cmd 'rm -rf /'",
        "git config man.x.path /tmp/x",
        "git config man.x.cmd 'rm -rf /'",
        "git -c man.x.path=./x help -m log",
        # 6. the daemon's access hook
        "git daemon --access-hook='rm -rf /' --base-path=.",
        # 7. send-email's commands and sendmail program
        "git send-email --sendmail-cmd='rm -rf /' x",
        "git send-email --to-cmd='rm -rf /' x",
        "git send-email --cc-cmd 'rm -rf /' x",
        "git send-email --header-cmd='rm -rf /' x",
        "git send-email --smtp-server=/tmp/evil x",
        "git -c sendemail.toCmd='rm -rf /' send-email x",
        "git instaweb --httpd='rm -rf /'",
    ],
)
def test_git_code_is_not_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "git filter-branch --setup 'rm -rf /' HEAD",
        "git grep -O'rm -rf /' x",
        "git config trailer.x.cmd 'rm -rf /'",
        "git daemon --access-hook='rm -rf /' --base-path=.",
        "git send-email --to-cmd='rm -rf /' x",
        "git clone -c core.fsmonitor='rm -rf /' src d",
    ],
)
def test_git_shell_values_are_read(policy: Policy, command: str) -> None:
    """A visible command line is read as shell: 'rm -rf /' in it is denied."""
    assert verdict(policy, command) == ("deny", "commands.deny.rm-root"), command


@pytest.mark.parametrize(
    "command",
    [
        "git clone https://x/y.git",
        "git clone --depth 1 src dst",
        'git clone "$url" dst',
        "git clone -c user.name=x src dst",
        "git init --template= d",
        "git init d",
        "git config user.name x",
        "git config trailer.x.cmd 'echo hi'",
        "git grep -n foo",
        "git grep -O foo",
        "git send-email --to=a@example.com --smtp-server=smtp.example.com x",
        "git send-email --smtp-server-port=25 x",
    ],
)
def test_plain_git_is_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command
