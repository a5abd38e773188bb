"""Code hidden in git's subcommand options and config keys, in environment variables that
programs read as start-up commands, and in interpreters' modes that run a file or their
input. Each command here was allowed before (found by a red-team run): 'git clone
--template=T' copies T's hooks and runs post-checkout, 'git grep -OCMD' runs CMD as the
pager, 'trailer.x.cmd' is a shell command, VIMINIT holds ex commands, a lesskey source
sets LESSOPEN, 'python3 -m timeit CODE' runs CODE."""

from __future__ import annotations

import shutil
import subprocess
import sys
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


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None, stdin: str = "") -> None:
    """Run ``argv`` in ``cwd`` (HOME there too, no terminal), skipping when the program is
    missing."""
    program = sys.executable if argv[0] == "python3" else shutil.which(argv[0])
    if program is None:
        pytest.skip(f"{argv[0]} is not installed")
    full = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "TERM": "dumb", **(env or {})}
    subprocess.run(
        [program, *argv[1:]],
        cwd=cwd,
        env=full,
        input=stdin,
        text=True,
        capture_output=True,
        timeout=30,
        check=False,
    )


_WRITE = 'call writefile([], "ran")'
_LESSKEY = "#env\nLESSOPEN=|touch ran; cat %s\n"


@pytest.mark.parametrize(
    ("files", "argv", "env", "stdin"),
    [
        ({}, ["vim", "-c", "qa", "f"], {"VIMINIT": _WRITE}, ""),
        ({}, ["vi", "-c", "qa", "f"], {"EXINIT": _WRITE}, ""),
        ({"s.vim": _WRITE + "\n"}, ["vim", "-S", "s.vim", "-c", "qa", "f"], {}, ""),
        ({"k": _LESSKEY}, ["less", "f"], {"LESSKEYIN": "k"}, ""),
        ({"k": _LESSKEY}, ["less", "--lesskey-src=k", "f"], {}, ""),
        ({"k": _LESSKEY}, ["less", "f"], {"LESS": "--lesskey-src=k"}, ""),
        ({"x.pl": "1;\n"}, ["perl", "-d", "x.pl"], {"PERL5DB": "BEGIN{open F,'>ran'}"}, ""),
        ({"x.pl": "junk\n#!perl\nopen F, '>ran';\n"}, ["perl", "-x", "x.pl"], {}, ""),
        ({}, ["python3", "-m", "timeit", "-n1", "-r1", "-s", "open('ran','w')", "pass"], {}, ""),
        ({}, ["python3", "-i", "/dev/null"], {}, "open('ran', 'w')\n"),
        ({}, ["python3", "-m", "code"], {}, "open('ran', 'w')\n"),
    ],
)
def test_the_start_up_code_runs(
    tmp_path: Path, files: dict[str, str], argv: list[str], env: dict[str, str], stdin: str
) -> None:
    """Why: each variable, option or mode below runs code the command gives it."""
    (tmp_path / "f").write_text("hello\n")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    _run(argv, tmp_path, env, stdin)
    assert (tmp_path / "ran").exists(), argv


@pytest.mark.parametrize(
    "command",
    [
        # 8. vim's start-up commands and sourced scripts
        "VIMINIT='!rm -rf /' vim f",
        "EXINIT='!rm -rf /' vi f",
        "GVIMINIT='!rm -rf /' gvim f",
        "VIMRUNTIME=./rt vim f",
        "export VIMINIT='!rm -rf /'",
        "export EXINIT=x",
        "printf 'call system(\"rm -rf /\")' > s.vim; vim -S s.vim f",
        "printf x > Session.vim; vim -S",
        "printf x > v; vim -u v f",
        "printf x > k; vim -s k f",
        "printf x > k; nvim -l k",
        # 9. lesskey files can set LESSOPEN
        "printf '#env\\nLESSOPEN=|rm -rf /' > k; LESSKEYIN=k less f",
        "LESSKEY=k less f",
        "LESSKEYIN_SYSTEM=k less f",
        "LESSKEY_SYSTEM=k less f",
        "export LESSKEYIN=k",
        "printf x > k; less --lesskey-src=k f",
        "printf x > k; less --lesskey-s k f",
        "printf x > k; less --lesskey-file=k f",
        "printf x > k; less -k k f",
        "printf x > k; less -kk f",
        "printf x > k; LESS=--lesskey-src=k less f",
        "LESS='+!rm -rf /' less f",
        "less --lesskey-content='#env' f",
        # 10. man's options in the environment
        "MANOPT='-P./pg.sh' man ls",
        "export MANOPT='-P./pg.sh'",
        # 11. perl's debugger code and -x
        "PERL5DB='system(\"rm -rf /\")' perl -d f",
        "export PERL5DB=x",
        "printf 'system(1)' > x.pl; perl -x x.pl",
        "printf 'system(1)' > x.pl; perl -xdir x.pl",
        "printf 'system(1)' > .perldb; perl -d x.pl",
        # 12. python's modules and modes that run code
        "python3 -m timeit -s 'import os; os.system(\"rm -rf /\")' pass",
        "python3 -m timeit 'CODE'",
        "python3 -mtimeit -s'import os' pass",
        "python3 -m timeit -n 1 --setup='import os' pass",
        "python3 -m pdb -c '!import os' x.py",
        "python3 -m pdb x.py <<< '!import os'",
        "printf x > .pdbrc; python3 -m pdb x.py",
        "python3 -m code <<< CODE",
        "python3 -m asyncio <<< CODE",
        "echo CODE | python3 -m code",
        "python3 -i /dev/null <<< CODE",
        "python3 -i x.py <<< CODE",
        "printf x > f.txt; python3 -m doctest f.txt",
        "printf x > a.py; python3 -m cProfile a.py",
        "printf x > a.py; python3 -m cProfile -o out a.py",
        "printf x > a.py; python3 -m profile -s time a.py",
        "printf x > a.py; python3 -m trace --count -C . a.py",
        "printf x > a.py; python3 -m pdb a.py",
        "printf x > a.py; python3 -m cProfile -m a",
        "printf x > a.py; python3 -m a",
        "printf x > p; python3 -m pickle p",
        "python3 -m pickle < p",
    ],
)
def test_start_up_code_is_not_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] != "allow", command


@pytest.mark.parametrize(
    "command",
    [
        "vim f",
        "vim -es k",
        "less -R log.txt",
        "LESS=-R less f",
        "export LESS=-R",
        "LESS=-FRX git log",
        "man ls",
        "perl -x x.pl",
        "perl -d x.pl",
        "perl -I lib x.pl",
        "python3 -m pytest -q",
        "python3 -m venv .venv",
        "python3 -m pip install -r requirements.txt",
        "python3 -m json.tool a.json",
        "echo '{}' | python3 -m json.tool",
        "python3 -m timeit",
        "python3 -m code",
        "python3 -i x.py",
        "python3 -m doctest f.txt",
        "python3 -m cProfile a.py",
        "python3 -m pdb a.py",
        "python3 -W ignore x.py",
    ],
)
def test_plain_start_up_is_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("vim -c wq f", ("ask", "commands.hazard.interpreter")),
        ("perl -ne 'print' f", ("ask", "commands.hazard.interpreter")),
        ("python3 -m http.server", ("deny", "commands.service.python-http")),
        ("python3 -c 1", ("ask", "commands.hazard.interpreter")),
    ],
)
def test_verdicts_kept(policy: Policy, command: str, expected: tuple[str, str]) -> None:
    """What these gave before the fixes: unchanged."""
    assert verdict(policy, command) == expected, command
