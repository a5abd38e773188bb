"""Options that run a program, second red-team round on the readers of
runtime/policy/_tool_options.py: compiler drivers by every name (O1), a gcc response file
and the variables that play '-B' (O2), the files ed's commands write (O3), and the general
rule's spellings of program-running options, go's and gm4's (O7). Each attack below was
allowed before."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from _policy_helpers import verdict

from runtime.catalogue import Catalogue
from runtime.errors import ToolFailed
from runtime.models import ToolCall
from runtime.policy import Policy
from runtime.policy._tool_options import response_file_words
from runtime.toolkit_env import check_env_key

RM = ("deny", "commands.deny.rm-root")
ASK = ("ask", "commands.hazard.interpreter")


# O1: every GCC driver runs its subprograms through '-wrapper' (c89 and c99 are
# 'exec gcc ... "$@"'); versioned and target-prefixed names too.
@pytest.mark.parametrize(
    "command",
    [
        "c99 -wrapper rm,-rf,/ -c a.c",
        "c89 -wrapper rm,-rf,/ -c a.c",
        "cpp -wrapper rm,-rf,/ a.c",
        "gfortran -wrapper rm,-rf,/ -c a.f90",
        "gccgo -wrapper rm,-rf,/ -c a.go",
        "gdc -wrapper rm,-rf,/ -c a.d",
        "gnat -wrapper rm,-rf,/ a.adb",
        "gm2 -wrapper rm,-rf,/ -c a.mod",
        "gfortran-12 -wrapper rm,-rf,/ -c a.f90",
        "x86_64-linux-gnu-cpp-12 -wrapper rm,-rf,/ a.c",
        "aarch64-linux-gnu-gccgo -wrapper rm,-rf,/ -c a.go",
    ],
)
def test_every_compiler_driver_is_read(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == RM, command


@pytest.mark.parametrize(
    "command", ["c99 -B ./x -c a.c", "cpp -B./x a.c", "gfortran -fplugin=./p.so -c a.f90"]
)
def test_every_compiler_driver_asks_for_code_it_cannot_read(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ASK, command


@pytest.mark.parametrize(
    "command",
    [
        "c99 -O2 -o app a.c",
        "c89 -c a.c",
        "cpp -P -DDEBUG=1 a.h",
        "gfortran -O2 -o sim sim.f90",
        "gccgo -o app main.go",
    ],
)
def test_ordinary_compiler_driver_calls_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize("driver", ["c99", "c89", "cpp"])
def test_the_posix_drivers_run_the_wrapper(tmp_path: Path, driver: str) -> None:
    """Why: c99, c89 and cpp run their subprograms through '-wrapper' as gcc does."""
    if shutil.which(driver) is None or shutil.which("gcc") is None:
        pytest.skip(f"{driver} is not installed")
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    subprocess.run(
        [driver, "-wrapper", "sh,-c,touch ran", "-c" if driver != "cpp" else "-P", "a.c"],
        cwd=tmp_path,
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert (tmp_path / "ran").exists(), driver


# O2: the directories gcc runs its subprograms from are '-B' (a planted ./x/as runs), and
# clang's CCC_OVERRIDE_OPTIONS edits its command line: set inline, exported, through env,
# shell_exec's 'env' or a session's set_env.
_LOADER_ENV = ("ask", "commands.deny.loader-env")
_EXPORT_ENV = ("ask", "commands.deny.export-loader-env")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("COMPILER_PATH=./x gcc -c a.c", _LOADER_ENV),
        ("GCC_EXEC_PREFIX=./x/ gcc -c a.c", _LOADER_ENV),
        ("env COMPILER_PATH=./x gcc -c a.c", _LOADER_ENV),
        ("env GCC_EXEC_PREFIX=./x/ cc -c a.c", _LOADER_ENV),
        ("export COMPILER_PATH=./x; gcc -c a.c", _EXPORT_ENV),
        ("declare -x GCC_EXEC_PREFIX=./x/; gcc -c a.c", _EXPORT_ENV),
        ("CCC_OVERRIDE_OPTIONS='+-fplugin=./p.so' clang -c a.c", _LOADER_ENV),
    ],
)
def test_variables_that_move_the_compilers_programs_ask(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize("key", ["COMPILER_PATH", "GCC_EXEC_PREFIX", "CCC_OVERRIDE_OPTIONS"])
def test_compiler_variables_are_judged_for_calls_and_sessions(policy: Policy, key: str) -> None:
    catalogue = Catalogue()
    call = ToolCall(tool="shell_exec", arguments={"command": "gcc -c a.c", "env": {key: "./x"}})
    d = policy.decide(call, catalogue.get("shell_exec"))
    assert (d.action, d.rule) == _EXPORT_ENV
    d = policy.decide(
        ToolCall(tool="set_env", arguments={"key": key, "value": "./x"}), catalogue.get("set_env")
    )
    assert (d.action, d.rule) == ("deny", "env.deny")
    with pytest.raises(ToolFailed):
        check_env_key(key)


@pytest.mark.parametrize("variable", ["COMPILER_PATH=x", "GCC_EXEC_PREFIX=x/"])
def test_the_compiler_variables_run_a_planted_assembler(tmp_path: Path, variable: str) -> None:
    """Why: gcc looks for cc1, as and collect2 where these name first, as with -B."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "x").mkdir()
    for program in ("cc1", "as"):
        planted = tmp_path / "x" / program
        planted.write_text("#!/bin/sh\ntouch ran\n")
        planted.chmod(0o755)
    name, _, value = variable.partition("=")
    subprocess.run(
        ["gcc", "-c", "a.c"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", name: f"{tmp_path}/{value}"},
        check=False,
        capture_output=True,
        timeout=60,
    )
    assert (tmp_path / "ran").exists(), variable


# O2: 'gcc @FILE' reads FILE's words in its place, before any option is read: a file this
# command writes is read so, any other asks.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo '-wrapper rm,-rf,/' > o; gcc @o -c a.c", RM),
        ("echo '-wrapper rm,-rf,/' > o.rsp; c99 @./o.rsp -c a.c", RM),
        ("echo 'rm,-rf,/' > o; gcc -wrapper @o -c a.c", RM),  # an option's value too
        ("cat > o <<'E'\n-wrapper\n\"rm,-rf,/\"\nE\ngcc @o -c a.c", RM),
        ("echo '@p' > o; echo '-wrapper rm,-rf,/' > p; gcc @o -c a.c", RM),  # nested
        ("echo '-wrapper rm,-rf,/' > o; cd sub; gcc @../o -c a.c", RM),
        # Written after it in a loop: every text written there is read.
        ("for i in 1 2; do echo -O2 > o; gcc @o -c a.c; echo '-wrapper rm,-rf,/' > o; done", RM),
        # A script this command writes that runs the compiler on it, and the reverse.
        ("echo 'gcc @o -c a.c' > s.sh; echo '-wrapper rm,-rf,/' > o; sh s.sh", RM),
        ("echo '-wrapper ./h' > o; printf '#!/bin/sh\\nrm -rf ./*\\n' > h; gcc @o -c a.c", RM),
        ("echo '-B ./x' > o; gcc @o -c a.c", ASK),
        ("echo '-o key.pem' > o; gcc @o -c a.c", ("deny", "paths.deny")),
        # Content only known when it runs, a file this command does not write, a name
        # only known at run time: its words cannot be read.
        ("printf -- '-wrapper\\nrm,-rf,/\\n' > o; gcc @o -c a.c", ASK),
        ("gcc @o -c a.c", ASK),
        ("echo -O2 > o; gcc @o @q -c a.c", ASK),
        ('gcc @"$F" -c a.c', ASK),
        ("clang --config=./x.cfg -c a.c", ASK),
        ("clang --config-user-dir=. -c a.c", ASK),
    ],
)
def test_a_compiler_response_file_is_read(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "echo '-O2 -Wall' > o; gcc @o -c a.c",
        "printf '%s\\n' -O2 > o; cat o",
        "gcc -c a.c; echo '-wrapper rm,-rf,/' > o",  # written, never read
        "gcc -DAT=@ -c a.c",
        "echo '@o' > o; gcc @o -c a.c",  # gcc refuses a response file that names itself
    ],
)
def test_ordinary_response_file_uses_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-O2 -Wall\n-c", [["-O2", "-Wall", "-c"]]),
        ('-wrapper\n"rm,-rf,/"', [["-wrapper", "rm,-rf,/"]]),
        ("-DA=a\\ b", [["-DA=a b"]]),
        # GCC 12 reads the backslash in quotes too, GCC 13 as the shell does: both kept.
        ("-DA='x\\y'", [["-DA=xy"], ["-DA=x\\y"]]),
        ('-DA="p\\q"', [["-DA=pq"], ["-DA=p\\q"]]),
        ("-wrap\\per", [["-wrapper"]]),
        ("  ", [[]]),
    ],
)
def test_response_file_words_are_split_as_gcc_splits_them(
    text: str, expected: list[list[str]]
) -> None:
    assert response_file_words(text) == expected, text


def test_a_response_file_gives_gcc_its_wrapper(tmp_path: Path) -> None:
    """Why: gcc reads '@FILE' in its place before it reads an option, '-wrapper' included
    (and splits it as response_file_words' first reading does)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    (tmp_path / "a.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "o").write_text("-wrapper\n'sh,-c,touch ran'\n")
    subprocess.run(
        ["gcc", "@o", "-c", "a.c"], cwd=tmp_path, check=False, capture_output=True, timeout=60
    )
    assert (tmp_path / "ran").exists()


# O3: the files ed's commands write: a 'w' with no name writes the default file name (the
# operand, or the last 'f'/'e'/'E' name, an 'r' name when there was none), a global
# command's 'g/re/w FILE', and red reads as ed does.
_PEM = ("deny", "paths.deny")
_GIT = ("deny", "paths.deny_write")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ed -s x <<< $'f .git/hooks/pre-commit\\nw\\nq'", _GIT),
        ("ed -s x <<< $'e .git/config\\na\\n[core]\\n.\\nw\\nq'", _GIT),
        ("ed -s x <<< $'E .git/config\\nwq'", _GIT),
        ("ed -s x <<< $'w\\nf key.pem\\nW'", _PEM),
        ("ed -s <<< $'r key.pem\\nw'", _PEM),  # no operand: 'r' names the default file
        ("ed -s x <<< $'g/h/w key.pem\\nq'", _PEM),
        ("ed -s x <<< $'v/h/w key.pem\\nq'", _PEM),
        ("ed -s x <<< $'G/h/w key.pem\\nq'", _PEM),
        ("ed -s x <<< $'V/h/w key.pem\\nq'", _PEM),
        ("ed -s x <<< $'1,$g|h|W key.pem\\nq'", _PEM),
        ("ed -s x <<< $'g/a\\\\/b/w key.pem\\nq'", _PEM),
        ("ed -s -- key.pem <<< w", _PEM),
        ("red -s x <<< 'w key.pem'", _PEM),
        ("red -s key.pem <<< w", _PEM),
        ("red -s x <<< $'f key.pem\\nwq'", _PEM),
        ("red -s x <<< '!rm -rf /'", RM),
        ("cat s.ed | red -s x", ASK),
    ],
)
def test_the_files_ed_commands_write_are_judged(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "ed -s notes.txt <<< $'1d\\nw\\nq'",
        "ed -s notes.txt <<< $',s/foo/bar/g\\nw\\nq'",
        "ed -s notes.txt <<< $'g/TODO/d\\nw\\nq'",
        "ed -s notes.txt <<< $'a\\nhello\\n.\\nw out.txt\\nq'",
        "ed -s notes.txt <<< $'r header.txt\\nw\\nq'",  # 'r' keeps the operand's name
        "ed -s notes.txt <<< $'f copy.txt\\nw\\nq'",
        "red notes.txt",
        "red -s notes.txt <<< $'1d\\nw'",
    ],
)
def test_ordinary_ed_scripts_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("program", "script"),
    [
        ("ed", "f written\nw\nq\n"),
        ("ed", "e written\na\nz\n.\nw\nq\n"),  # a name that does not exist yet too
        ("ed", "E written\nw\nq\n"),
        ("ed", "g/h/w written\nq\n"),
        ("ed", "v/zzz/w written\nq\n"),
        ("red", "w written\nq\n"),
    ],
)
def test_ed_writes_what_its_commands_name(tmp_path: Path, program: str, script: str) -> None:
    """Why: each of these writes a file other than the one ed was given."""
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    (tmp_path / "x").write_text("h\n")
    subprocess.run(
        [program, "-s", "x"],
        input=script,
        text=True,
        cwd=tmp_path,
        check=False,
        capture_output=True,
        timeout=20,
    )
    assert (tmp_path / "written").exists(), script


# O7: the general rule reads the spellings of program-running options (abbreviations,
# '_', one dash, the bare names), go's own flags and gm4.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("frob --diff-prog=rm a b", ASK),
        ("frob --diff-progr=rm a b", ASK),
        ("frob --rsh-comm=/bin/sh h:x", ASK),
        ("frob --diff_program=rm", ASK),
        ("frob --PRE_COMMAND rm", ASK),
        ("frob -pre-command=rm", ASK),
        ("frob -toolexec=rm", ASK),
        ("frob --vettool ./x", ASK),
        ("frob --exec='rm -rf /'", ASK),
        ("frob --cmd='rm -rf /'", ASK),
        ("frob --command=rm", ASK),
        ("frob --program=rm", ASK),
        ("frob --prog rm", ASK),
        ("frob --shell=./s.sh", ASK),
        ("frob --merge-tool ./m", ASK),
        ("go test -exec 'rm -rf /' ./...", RM),
        ("go run -exec='rm -rf /' .", RM),
        ("go build -toolexec 'rm -rf /' .", RM),
        ('go build --toolexec="rm -rf /" .', RM),
        ("go vet -vettool=/bin/rm .", ("ask", "commands.deny.rm-root")),
        ('go test -exec "$X" ./...', ASK),
        ("printf '#!/bin/sh\\nrm -rf ./*\\n' > h; chmod +x h; go test -exec ./h ./...", RM),
        ("go env -w 'GOFLAGS=-exec=rm -rf /'", ("ask", "commands.deny.rm-root")),
        ("go env -w CC=./x", ASK),
        ("gm4 <<< 'syscmd(rm -rf /)'", ASK),
        ("echo 'esyscmd(rm -rf /)' | gm4", ASK),
    ],
)
def test_more_spellings_of_program_running_options_are_read(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "systemctl status x --no-pager",
        "journalctl -u x --no-pager -n 50",
        "docker run --rm -it img",
        "docker compose up -d --build",
        "kubectl exec pod -- ls",
        "kubectl logs pod --tail=10",
        "pytest -x",
        "pytest --tb=short -q",
        "cargo build --release",
        "cargo test -- --nocapture",
        "npm run build",
        "git commit -m x",
        "ls -lash",
        "du -sh .",
        "pip install -e .",
        "base64 --wrap=0 f",
        "valgrind --tool=memcheck ./a",
        "./configure --prefix=/usr --program-prefix=g",
        "terraform plan -out=tf.plan",
        "node --inspect x.js",
        "ruff check --fix .",
        "mypy --strict x.py",
        "gh pr list --limit 5",
        "frob --programs x",
        "frob --no-exec x",
        "frob --noexec x",
        "frob --no_shell x",
        "go test ./...",
        "go test -run TestX -v ./pkg",
        "go build -o bin/app .",
        "go vet ./...",
        "go env -w GOPRIVATE=example.com",
        "gm4 -D X=1 x.m4",
    ],
)
def test_everyday_commands_stay_allowed_by_the_general_rule(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command
