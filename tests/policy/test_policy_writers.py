"""More programs that write the files they name, and links as second names.

Found by a red-team pass: the path rules judged '> FILE', tee, cp and a few output options,
but not 'patch FILE', 'uniq IN OUT', 'split IN PREFIX', compilers' '-o', tar's archive and
extraction directory, git's --output/-o/-f, compressors replacing their operands..., and
'ln -s .git g' then gave '.git' a second name to write through ('cp x g/hooks/pre-commit').
The sandbox's masks are the wall for these writes; the policy refuses what it can see.
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy
from runtime.policy._shell_model import SimpleCommand
from runtime.policy._writes import written_operands
from runtime.policy.argv import Word

WRITE = ("deny", "paths.deny_write")


def written(program: str, *args: str) -> list[str]:
    cmd = SimpleCommand(program, tuple(Word(a) for a in args))
    return [w.value for w in written_operands(cmd)]


@pytest.mark.parametrize(
    "command",
    [
        "patch .git/config c.diff",
        "uniq x .git/hooks/pre-commit",
        "xxd -r - .git/hooks/pre-commit",
        "split -b 1000 x .git/hooks/pre-commi",
        "csplit -s -f .git/hooks/pre-commit x 2",
        "mktemp .git/hooks/XXXX",
        "mkfifo .git/hooks/pre-commit",
        "gzip .git/config",
        "shuf -o .git/hooks/pre-commit x",
        "iconv -f utf8 -t utf8 -o .git/hooks/pre-commit x",
        "gcc -o .git/hooks/pre-commit x.c",
        "cc -o.git/hooks/pre-commit x.c",
        "strip -o .git/hooks/pre-commit /bin/true",
        "objcopy /bin/true .git/hooks/pre-commit",
        "tar cf .git/hooks/pre-commit x",
        "tar -czf .git/hooks/pre-commit x",
        "tar --create --file=.git/hooks/pre-commit x",
        "tar -xf a.tar -C .git/hooks",
        "tar xf a.tar --directory=.git/hooks",
        "git diff HEAD --output=.git/config",
        "git log -1 --output .git/hooks/pre-commit",
        "git archive -o .git/hooks/pre-commit HEAD",
        "git config -f .git/config core.x 1",
        "curl -s --output-dir .git/hooks -O https://example.com/pre-commit",
        "ed -s .git/config",
        # Links: a second name for a protected path.
        "ln -s .git g; cp x g/hooks/pre-commit",
        "ln -s .git/hooks h",
        "ln .git/config c; echo x >> c",
        "ln -s ../.git sub/g",
    ],
)
def test_writes_to_protected_paths_are_denied(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == WRITE, command


@pytest.mark.parametrize(
    "command",
    [
        "patch -p1 < fix.diff",
        "patch -p1 -i fix.diff",
        "patch src/main.c fix.diff",
        "uniq in.txt out.txt",
        "gzip -c .git/config > /tmp/c.gz",
        "gzip -k build.log",
        "gcc -O2 -fno-omit-frame-pointer -o app main.c",
        "tar xzf a.tgz -C build",
        "tar czf backup.tgz .git",
        "git diff --stat",
        "git config -f .gitmodules submodule.x.url ../x",
        "sort -o out.txt in.txt",
        "ln -s ../shared/config.json config.json",
        "ln -sfn releases/v2 current",
        "ln -s /usr/bin/python3 python",
    ],
)
def test_ordinary_writes_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("argv", "files"),
    [
        (("tar", "cvbf", "20", "a.tar", "x"), ["a.tar"]),  # old style: letters take words in order
        (("tar", "-xvf", "a.tar", "-C", "out"), ["out"]),
        (("tar", "-tf", "a.tar"), []),  # listing writes nothing
        (("tar", "-cf-", "x"), ["-"]),
        (("tar", "xf", "a.tar", "-Cout"), ["out"]),
        (("gzip", "-d", "a.gz"), ["a.gz"]),
        (("gzip", "-dc", "a.gz"), []),
        (("gzip", "--stdout", "a"), []),
        (("split", "-l", "10", "in", "part-"), ["part-"]),
        (("patch", "-p", "1", "a.c", "d.diff"), ["a.c"]),
        (("xxd", "-c", "16", "in", "out"), ["out"]),
    ],
)
def test_written_operands(argv: tuple[str, ...], files: list[str]) -> None:
    assert written(*argv) == files


# --- glob targets: judged by every path they could name ------------------------------------


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("cp x .gi?/config", "paths.deny_write"),
        ("cp x .??t/config", "paths.deny_write"),
        ("cat x | tee -a .gi[t]/config", "paths.deny_write"),
        ("sed -i s/core/x/ .gi?/config", "paths.deny_write"),
        ("truncate -s0 .g*/config", "paths.deny_write"),
        ("chmod 777 .gi?/hooks/*", "paths.deny_write"),
        ("cat x >> .gi*/config", "paths.deny_write"),
        ("echo x >> .[g]it/config", "paths.deny_write"),
        ("cp x .e??", "paths.deny"),  # aimed at '**/.env'
        ("cp x .env*", "paths.deny"),
    ],
)
def test_glob_write_targets_are_judged(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule), command


@pytest.mark.parametrize(
    "command",
    [
        "cp *.txt backup/",
        "chmod +x scripts/*.sh",
        "touch src/*.py",
        "sed -i s/a/b/ src/*.js",
        "echo x > out-*.log",
        "cp x report*",
        "rm -f *.pyc",
        "rm .gi?/hooks/*.sample",  # a delete's glob is judged as a move's (see _moves)
    ],
)
def test_ordinary_glob_targets_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command
