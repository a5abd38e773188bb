"""Files a program writes through its own script or commands, and more output options
(runtime/policy/_writes.py). Found by a red-team run: each write below was 'allow' while
'sort -o .git/hooks/pre-commit README.md' (the same write, by an option) was denied.
The sandbox's masks held; the policy now refuses what it can see, as it does for sort."""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy
from runtime.policy._shell_model import SimpleCommand
from runtime.policy._writes import awk_outputs, sed_script_writes, written_operands
from runtime.policy.argv import Word

WRITE = ("deny", "paths.deny_write")
DENY = ("deny", "paths.deny")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # sed: the 'w'/'W' commands and the 's' command's 'w' flag.
        ("sed -n 'w .git/hooks/pre-commit' README.md", WRITE),
        ("sed 's/a/b/w .git/hooks/pre-commit' README.md", WRITE),
        ("sed -n 'W .git/hooks/pre-commit' README.md", WRITE),
        ("sed -n '1,5w .git/config' README.md", WRITE),
        ("sed -n '/x/!w .git/config' README.md", WRITE),
        ("sed -e 'p' -e 's|a|b|gw .git/config' README.md", WRITE),
        ("sed -ne 'w .git/config' README.md", WRITE),
        ("sed --expression='1w .git/config' README.md", WRITE),
        ("sed --expr '1w .git/config' README.md", WRITE),
        ("sed -n '/a/{w .git/config\n}' README.md", WRITE),
        ("sed -n 'p;w .git/config' README.md", WRITE),
        # awk: a print statement's '>'/'>>' to a string; one named at run time asks.
        ("awk '{print > \".git/config\"}' README.md", WRITE),
        ('awk \'{printf "%s", $0 >> ".git/hooks/pre-commit"}\' README.md', WRITE),
        ("gawk -F: '{print $1 > \".git/config\"; next}' README.md", WRITE),
        ("awk '{print > $1}' README.md", ("ask", "commands.hazard.dynamic")),
        ("awk '{f = \"x\"; print > f}' README.md", ("ask", "commands.hazard.dynamic")),
        # find's output actions.
        ("find . -fprintf .git/hooks/pre-commit '%p'", WRITE),
        ("find . -fls .git/config", WRITE),
        ("find . -fprint0 .git/config", WRITE),
        ("find . -maxdepth 0 -fprint key.pem", DENY),
        # ed's 'w FILE' among its commands.
        ("ed -s README.md <<< $'w .git/config\\nq'", WRITE),
        ("ed -s README.md <<'EOF'\n1,$W .git/hooks/pre-commit\nq\nEOF", WRITE),
        (
            "printf '1d\\nwq .git/config\\n' | ed -s README.md",
            ("ask", "commands.hazard.interpreter"),
        ),
        # Output options and destination operands.
        ("gpg -o .git/config -d x.gpg", WRITE),
        ("gpg --output=.git/config -d x.gpg", WRITE),
        ("openssl enc -in README.md -out .git/config", WRITE),
        ("openssl req -new -keyout key.pem -out r.csr", DENY),
        ("ssh-keygen -f .git/hooks/k -N ''", WRITE),
        ("ssh-keygen -qf .git/hooks/k -N ''", WRITE),
        ("script -q .git/hooks/pre-commit", WRITE),
        ("script -qc true .git/hooks/pre-commit", WRITE),
        ("git init .git/hooks", WRITE),
        ("git init -b main .git/hooks/x", WRITE),
        ("git -C .git init hooks", WRITE),
        ("git clone . .git/hooks/c", WRITE),
        ("git clone --depth 1 https://example.com/r.git .git/hooks/c", WRITE),
        ("git init --separate-git-dir .git/hooks/g x", WRITE),
        ("git bundle create .git/hooks/x HEAD", WRITE),
        ("git worktree add .git/hooks/w", WRITE),
        ("git worktree add -b topic .git/hooks/w main", WRITE),
        ("yq -i . .git/config", WRITE),
        ("yq -i '.a = 1' x.yml .git/config", WRITE),
        ("sqlite3 .git/config 'select 1'", WRITE),
        ("sqlite3 -cmd '.mode csv' .git/config", WRITE),
        ("exiftool -o .git/config x", WRITE),
        ("exiftool -Comment=x .git/config", WRITE),
    ],
)
def test_script_and_option_writes_are_judged(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "sed -n 's/x/y/p' notes.txt",
        "sed -i 's/world/earth/' notes.txt",
        "sed -n '/^#/!p' notes.txt",
        "sed 's/new world/old/' notes.txt",
        "sed -n 'w out.txt' notes.txt",
        "sed -e 's/a/b/w out.txt' notes.txt",
        "sed '/x/a\\\nwritten .git/config' notes.txt",  # appended text, not a 'w'
        "awk '$1 > 5 {print $2}' notes.txt",
        "awk '{print ($1 > 5)}' notes.txt",
        "awk '{print $1 > \"out.txt\"}' notes.txt",
        "awk '{print > \"/dev/stderr\"}' notes.txt",
        "find . -name '*.py' -fprint list.txt",
        "find . -print",
        "ed -s notes.txt <<< $'1d\\nw\\nq'",
        "ed -s notes.txt <<< $'1d\\nw copy.txt\\nq'",
        "gpg -o out.txt -d x.gpg",
        "openssl x509 -in c.pem -noout -text",
        "openssl req -new -key k.key -out r.csr",
        "ssh-keygen -t ed25519 -f ./deploy_key -N ''",
        "script -q typescript",
        "git init",
        "git init repo",
        "git clone https://example.com/r.git",
        "git clone https://example.com/r.git work/r",
        "git worktree add ../w",
        "git bundle create repo.bundle --all",
        "yq '.a' x.yml",
        "yq -i '.a = 1' x.yml",
        "sqlite3 app.db 'select 1'",
        "sqlite3 -readonly app.db 'select 1'",
        "exiftool photo.jpg",
        "exiftool -Comment=x photo.jpg",
    ],
)
def test_ordinary_script_writes_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


@pytest.mark.parametrize(
    ("args", "files"),
    [
        (("-n", "w a"), ["a"]),
        (("-n", "1w a;b"), ["a;b"]),  # the file name is the rest of the line
        (("-n", "w a\nw b"), ["a", "b"]),
        (("s/x/y/gpw c", "f"), ["c"]),
        (("y/ab/cd/;w d", "f"), ["d"]),
        (("-e", "p", "-e", "w e", "f"), ["e"]),
        (("-f", "s.sed", "f"), []),  # the script is a file: judged as a program
        (("-n", "s/w x/y/p", "f"), []),  # 'w' inside the regex
        (("-n", "/w x/p", "f"), []),
        (("-n", "\\%w%w g", "f"), ["g"]),
        # Text the grammar here does not read: any 'w' that may start a command counts.
        (("-n", "p;Zq w h", "f"), ["h"]),
    ],
)
def test_sed_script_writes(args: tuple[str, ...], files: list[str]) -> None:
    assert [w.value for w in sed_script_writes(tuple(Word(a) for a in args))] == files


def test_awk_outputs_named_at_run_time() -> None:
    args = (Word("{print > $2}"), Word("f"))
    assert awk_outputs("awk", args) == ([], True)
    files, unknown = awk_outputs("awk", (Word('{print "a" > "b"; print >> "c"}'),))
    assert [w.value for w in files] == ["b", "c"] and not unknown
    # A program only known at run time is not read here.
    assert awk_outputs("awk", (Word("$P", dynamic=True), Word("f"))) == ([], False)


def test_find_output_is_a_written_operand() -> None:
    cmd = SimpleCommand("find", tuple(Word(a) for a in (".", "-fprintf", "out", "%p")))
    assert [w.value for w in written_operands(cmd)] == ["out"]


# Red team (O4): a sed or awk program read from the input or from a file the same command
# writes was searched for 'e'/system() but not for the files it writes.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sed -n -f - x <<< 'w .git/config'", WRITE),
        ("sed -n -f /dev/stdin x <<< 'w other.pem'", DENY),
        ("sed -n -f - x <<'EOF'\nw .git/config\nEOF", WRITE),
        ("sed -nf- x <<< 's/a/b/w .git/hooks/pre-commit'", WRITE),
        ("printf 'w .git/config\\n' > x.sed; sed -n -f x.sed x", WRITE),
        ("cat > x.sed <<'EOF'\n1W .git/config\nEOF\nsed -n -f x.sed x", WRITE),
        ("awk -f - x <<< '{print > \".git/config\"}'", WRITE),
        ("printf '{print > \".git/config\"}' > p.awk; awk -f p.awk x", WRITE),
        ("cd .git && printf 'w config\\n' > /tmp/x.sed && sed -n -f /tmp/x.sed x", WRITE),
        ("awk -f - x <<< '{print > $1}'", ("ask", "commands.hazard.dynamic")),
        (
            "cat > p.awk <<'EOF'\n{print > $2}\nEOF\nawk -f p.awk x",
            ("ask", "commands.hazard.dynamic"),
        ),
        # A script only known at run time asks, as 'sh -c "$S"' does.
        ("S='1e rm -rf /'; sed \"$S\" x", ("ask", "commands.hazard.dynamic")),
        ('sed -n -e "$S" x', ("ask", "commands.hazard.dynamic")),
        ('sed -n "$(cat s)" x', ("ask", "commands.hazard.dynamic")),
        ('P=\'{system("id")}\'; awk "$P" x', ("ask", "commands.hazard.dynamic")),
        ('gawk -F: "$P" x', ("ask", "commands.hazard.dynamic")),
    ],
)
def test_program_text_from_input_or_a_written_file_is_read_for_writes(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "sed -n -f - notes.txt <<< 'w out.txt'",
        "printf 'w out.txt\\n' > x.sed; sed -n -f x.sed notes.txt",
        "awk -f - notes.txt <<< '{print > \"out.txt\"}'",
        # A program file this command does not write is not read (as for 'e'/system()).
        "sed -f x.sed notes.txt",
        "awk -f p.awk notes.txt",
        # A script whose literal start is text: that text is read.
        'sed "s/old/$new/" notes.txt',
        'sed -i "s|^version=.*|version=$V|" notes.txt',
        "awk -v n=\"$n\" '{print $n}' notes.txt",
        'awk "{print \\$$n}" notes.txt',
    ],
)
def test_ordinary_program_text_is_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


def test_program_text_writes_is_the_reader_for_both_programs() -> None:
    from runtime.policy._writes import program_text_writes

    assert [w.value for w in program_text_writes("sed", "1w a\ns/x/y/w b")[0]] == ["a", "b"]
    files, unknown = program_text_writes("awk", '{print > "a"; print >> $1}')
    assert [w.value for w in files] == ["a"] and unknown


# Red team (O5): more spellings of the output options, and outputs not read at all.
@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # openssl reads '--opt' and '-opt=V'; more options that write a file.
        ("openssl genrsa --out key.pem", DENY),
        ("openssl genrsa -out=key.pem", DENY),
        ("openssl genrsa --out=.git/config", WRITE),
        ("openssl rand -writerand key.pem 8", DENY),
        ("openssl s_client -sess_out key.pem", DENY),
        ("openssl s_client -keylogfile .git/config", WRITE),
        ("openssl ca -outdir .git/hooks", WRITE),
        # sqlite3: dot-commands and SQL that write files, in arguments and a literal input.
        ("sqlite3 x.db '.output key.pem' 'select 1'", DENY),
        ("sqlite3 x.db '.once key.pem' 'select 1'", DENY),
        ("sqlite3 x.db '.once -x .git/config'", WRITE),
        ("sqlite3 x.db '.backup key.pem'", DENY),
        ("sqlite3 x.db '.backup main .git/config'", WRITE),
        ("sqlite3 x.db '.save .git/config'", WRITE),
        ("sqlite3 x.db \"VACUUM INTO 'key.pem'\"", DENY),
        ("sqlite3 x.db \"ATTACH 'key.pem' AS k; create table k.t(x)\"", DENY),
        ("sqlite3 x.db \"attach database '.git/config' as k\"", WRITE),
        ("sqlite3 x.db <<< '.output key.pem'", DENY),
        ("sqlite3 x.db <<'EOF'\n.once .git/config\nselect 1;\nEOF", WRITE),
        ("sqlite3 -cmd '.output key.pem' x.db", DENY),
        ("sqlite3 -A -cf key.pem x", DENY),
        ("sqlite3 -A --create --file=.git/config x", WRITE),
        ("sqlite3 key.pem -A -c x", DENY),
        ("sqlite3 -readonly x.db '.output key.pem'", DENY),
        # git: checked-out paths below a prefix or another work tree, --output anywhere.
        ("git checkout-index --prefix=.git/hooks/ pre-commit", WRITE),
        ("git checkout-index -a --prefix=.git/hooks/", WRITE),
        ("git read-tree --prefix=.git/hooks/ -u HEAD", WRITE),
        ("git --work-tree=.git/hooks checkout HEAD -- pre-commit", WRITE),
        ("git --work-tree .git/hooks restore --source=HEAD pre-commit", WRITE),
        ("git --work-tree=.git/hooks co HEAD -- pre-commit", WRITE),  # an alias may check out
        ("git rev-list --all --output=.git/config", WRITE),
        ("git whatchanged --output .git/config", WRITE),
        ("git --git-dir=.git/hooks/x init", WRITE),
        # gawk: -i inplace rewrites its input files; profile, pretty-print and dump files.
        ("gawk -i inplace 1 .git/config", WRITE),
        ("gawk -iinplace '{print}' .git/config", WRITE),
        ("gawk --include=inplace.awk -f p.awk .git/config", WRITE),
        ("awk -i inplace -v n=1 1 notes.txt .git/config", WRITE),
        ("gawk --pretty-print=.git/config 1 x", WRITE),
        ("gawk --dump-variables=.git/config 1 x", WRITE),
        ("gawk --profile=.git/config 1 x", WRITE),
        ("gawk -o.git/config 1 x", WRITE),
        ("gawk -d.git/config 1 x", WRITE),
        ("gawk -p.git/config 1 x", WRITE),
        # exiftool: option names in any case, '-w' outputs, '-tagsFromFile' targets.
        ("exiftool -O .git/config x", WRITE),
        ("exiftool -OUT .git/config x", WRITE),
        ("exiftool -w .git/hooks/%f x.jpg", WRITE),
        ("exiftool -w pem x.jpg", DENY),
        ("exiftool -W! .git/hooks/%f.%s x.jpg", WRITE),
        ("exiftool -tagsfromfile a.jpg key.pem", DENY),
        ("exiftool -TagsFromFile a.jpg .git/config", WRITE),
        # Every compiler driver the -wrapper reader knows writes '-o FILE' too (red team O:
        # 'c99 -o key.pem' was allowed where 'gcc -o key.pem' was denied).
        ("c99 -o key.pem a.c", DENY),
        ("c89 -okey.pem a.c", DENY),
        ("cpp -o .git/config a.c", WRITE),
        ("gfortran -o .git/hooks/pre-commit a.f90", WRITE),
        ("x86_64-linux-gnu-gcc-12 -o key.pem a.c", DENY),
        ("clang++-16 -o .git/hooks/pre-commit a.cc", WRITE),
    ],
)
def test_more_output_spellings_are_judged(
    policy: Policy, command: str, expected: tuple[str, str]
) -> None:
    assert verdict(policy, command) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        "openssl req -new -key k.key -out=r.csr",
        "openssl rand -out rand.bin 16",
        "sqlite3 app.db '.output out.txt' 'select 1'",
        "sqlite3 app.db '.output stdout'",
        "sqlite3 app.db '.once' 'select 1'",
        "sqlite3 app.db \"ATTACH ':memory:' AS m\"",
        "sqlite3 app.db <<< '.backup app.bak'",
        "sqlite3 -A -tf app.sqlar",
        "sqlite3 -A -cf app.sqlar src",
        "git --work-tree=. status",
        "git --work-tree=build checkout HEAD -- .",
        "git --git-dir=.git --work-tree=. checkout main",
        "git --git-dir=.git log",
        "git checkout-index --prefix=export/ -a",
        "git log --output=log.txt",
        "gawk -i inplace '{sub(/a/,\"b\")}1' notes.txt",
        "gawk -i lib.awk '{print}' notes.txt",
        "gawk -d 1 notes.txt",
        "gawk --profile 1 notes.txt",
        "awk -F: '{print $1}' notes.txt",
        "exiftool -w txt photo.jpg",
        "exiftool -tagsfromfile a.jpg b.jpg",
        "c99 -o build/app a.c",
        "gcc-12 -O2 -o app a.c",
        "cpp -P -o out.i a.c",
    ],
)
def test_ordinary_outputs_are_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow", command


def test_sqlite_text_writes() -> None:
    from runtime.policy._writes import sqlite_text_writes

    text = ".output a\nselect 1;\n.once -x b\n.backup main c\nvacuum into 'd''e'\n.output off"
    assert [w.value for w in sqlite_text_writes(text)] == ["a", "b", "c", "d'e"]
