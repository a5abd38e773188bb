"""Command-policy gaps and bypasses of policy round two (2026-11-23).

Each DENIED/ASKED command was allowed by the default policy before its fix. Commands run the
way shell_exec runs them: ``/bin/sh -c`` (dash on Debian). The benign controls keep the
fixes from refusing ordinary commands.
"""

from __future__ import annotations

import pytest
from _policy_helpers import verdict

from runtime.policy import Policy, PolicyError
from runtime.policy.commands import normalise_target, path_form

# Gap 2: a glob that names no fixed character sweeps a directory as '*' does: the names it
# leaves out are chosen by character class, not by name ('[a-z]*' is most of a directory).
SWEEPING = [
    "rm -rf [a-z]*",
    "rm -rf ./[a-z]*",
    "rm -rf -- [a-z]*",
    "rm -rf [[:alpha:]]*",
    "rm -rf [[:alnum:]_]*",
    "rm -rf [a-zA-Z0-9]*",
    "rm -rf [0-9a-z]?*",
    "rm -rf *?",
    "rm -r -f [b-y]*",
    "cd build && rm -rf [a-z]*",
    "rm -rf .[a-z]*",
]


@pytest.mark.parametrize("command", SWEEPING)
def test_a_glob_without_a_fixed_character_is_everything(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("deny", "commands.deny.rm-root")


@pytest.mark.parametrize(
    ("glob", "form"),
    [
        ("[a-z]*", "*"),
        ("?*", "*"),
        ("[!.]*", "*"),
        ("**", "*"),
        ("*[0-9]", "*"),
        ("[[:alpha:]]*", "*"),
        ("[]a]*", "*"),
        ("!(keep)", "*"),
        ("+([a-z])", "*"),
        ("@(*|x)", "*"),
        (".[a-z]*", ".*"),
        (".??*", ".*"),
        ("/tmp/[a-z]*", "/tmp/*"),
        # A fixed character keeps the glob what it says.
        ("*.pyc", "*.pyc"),
        ("build*", "build*"),
        ("[b]uild*", "[b]uild*"),
        ("@(build|dist)", "@(build|dist)"),
        ("*[.]o", "*[.]o"),
        ("a[0-9]", "a[0-9]"),
        ("[a-z]*/cache", "[a-z]*/cache"),
    ],
)
def test_path_form(glob: str, form: str) -> None:
    assert path_form(glob) == form
    assert path_form(glob) == path_form(normalise_target(glob))


BENIGN = [
    "rm -rf build dist",
    "rm -rf *.pyc __pycache__",
    "rm -rf build/[a-z]*.o",
    "rm -rf node_modules/.cache",
    "rm -f [a-z]*",  # not recursive: the rule is about recursive deletes
    # A glob of bounded length chooses names by length too: '?' is the one-character names
    # (round three: it was refused as a sweep; see _sweeps.sweeps).
    "rm -rf ?",
    "rm -rf [a-z][0-9]",
    "rm -rf a[0-9]",
    "ls [a-z]*",
    "cp -r [a-z]* /tmp/backup",
]


@pytest.mark.parametrize("command", BENIGN)
def test_ordinary_globs_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


@pytest.mark.parametrize("command", ["rm -rf {a..z}*", "rm -rf {a,b,c}*", "rm -rf {[a-m],[n-z]}*"])
def test_brace_expansions_are_never_allowed(policy: Policy, command: str) -> None:
    # Brace expansion makes words at run time: the rule may match, so it asks (no approver:
    # refused), never allows.
    assert verdict(policy, command) == ("ask", "commands.deny.rm-root")


# Bypass: a program the wrapper tables do not know runs its arguments. Each was 'allow'.
UNKNOWN_WRAPPERS = [
    "ifne rm -rf /",
    "eatmydata rm -rf /",
    "sem rm -rf ~",
    "pkexec rm -rf /",
    "lckdo /tmp/l rm -rf /",
    "with-lock-ex /tmp/l rm -rf /",
    "systemd-inhibit rm -rf /",
    "ssh-agent rm -rf /",
    "gpg-agent --daemon rm -rf /",
    "bwrap --bind / / rm -rf /",
    "docker exec c rm -rf /",
    "flatpak-spawn --host rm -rf /",
    "direnv exec . chmod -R 777 /",
    "ssh-agent dd if=/dev/zero of=/dev/sda",
]


@pytest.mark.parametrize("command", UNKNOWN_WRAPPERS)
def test_a_deny_rule_program_among_arguments_asks(policy: Policy, command: str) -> None:
    action, rule = verdict(policy, command)
    assert action == "ask"
    assert rule.startswith("commands.deny.")


@pytest.mark.parametrize(
    "command",
    [
        "npm install vite",  # program-only rules are not read among arguments
        "pip install rm",
        "man rm",
        "git rm -r --cached .",  # a subcommand, not a program
        "cargo rm -r serde",
        "grep -r rm .",
        "echo 'rm -rf /'",
        "ssh-agent rm -rf build",
    ],
)
def test_arguments_that_only_name_a_program_stay_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


# Bypass: 'find . -delete' is 'rm -rf ./*' (find-delete-root only named '/' and '~').
FIND_SWEEPS = [
    "find . -delete",
    "find -delete",  # no start path: '.'
    "find * -delete",
    "find -L . -maxdepth 1 -delete",
    "find . -type f -delete",
    "find . -name '*' -delete",
    "find . -name '[a-z]*' -delete",
    "find . -path './*' -delete",
    "find . -regex '.*' -delete",
    "find . ! -name keep -delete",
    "find . -not -name '*.md' -delete",
    "find . -name '*.pyc' -o -delete",
    "cd / && find . -delete",
]


@pytest.mark.parametrize("command", FIND_SWEEPS)
def test_find_delete_that_sweeps_the_directory(policy: Policy, command: str) -> None:
    action, rule = verdict(policy, command)
    assert action == "deny"
    assert rule in ("commands.deny.rm-root", "commands.deny.find-delete-root")


@pytest.mark.parametrize(
    "command",
    [
        "find . -mtime -99999 -delete",  # newer than: everything
        "find . -mmin +1 -delete",  # spares only the last minute
        "find . -size +1M -delete",
        "find . -name $x -delete",
        "find . \\( -name '*.pyc' -o -size 0 \\) -delete",
    ],
)
def test_find_delete_narrowed_only_by_age_size_or_run_time_asks(
    policy: Policy, command: str
) -> None:
    action, rule = verdict(policy, command)
    assert action == "ask"
    assert rule in ("commands.deny.rm-root", "commands.deny.find-delete-root")


@pytest.mark.parametrize(
    "command",
    [
        "find . -name '*.pyc' -delete",
        "find . -type f -name '*.o' -delete",
        "find . \\( -name '*.pyc' -o -name '*.pyo' \\) -delete",
        "find . -empty -delete",
        # Older than a day spares the directory's current work (round three: it asked).
        "find . -mtime +7 -delete",
        "find . -type d -empty -delete",
        "find build -delete",
        "find build dist -type f -delete",
        "find . -regex '.*\\.o' -delete",
        "find . -path './build/*' -delete",
        "find . -name '*.log'",
        "find . -type f | wc -l",
    ],
)
def test_find_delete_narrowed_by_name_stays_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


def test_find_delete_under_an_allowlist_is_not_an_rm_call() -> None:
    # The 'rm -r' that stands for find -delete is a reading: an allowlist without 'rm'
    # still allows 'find build -delete'.
    p = Policy.from_toml(
        'version = 1\ndefault = "deny"\n[categories]\nshell = "allow"\n'
        '[commands]\nmode = "allowlist"\nallow = ["find"]\n'
    )
    assert verdict(p, "find build -delete")[0] == "allow"


# Bypass: the sandbox shows the workspace at /workspace; 'rm -rf /workspace/*' is 'rm -rf *'.
@pytest.mark.parametrize(
    "command",
    [
        "rm -rf /workspace/*",
        "rm -rf //workspace/./*",
        "rm -rf /workspace/[a-z]*",
        "rm -rf /workspace/../workspace/*",
        "cd /workspace && rm -rf ./*",
    ],
)
def test_the_workspace_by_its_absolute_path(policy: Policy, command: str) -> None:
    assert verdict(policy, command) == ("deny", "commands.deny.rm-root")


def test_the_workspace_root_is_the_sandboxs() -> None:
    """The shell reaches the workspace at /workspace whatever [paths] says: with
    ``workspace_root = "/proj"`` (now refused at load) 'rm -rf /workspace/*' was allowed
    and really emptied a workspace. The one root a policy may name is /workspace."""
    p = Policy.from_toml(
        'version = 1\ndefault = "deny"\n[categories]\nshell = "allow"\n'
        '[paths]\nworkspace_root = "/workspace"\ndeny_write = [".git/**"]\n'
    )
    assert verdict(p, "rm -rf /workspace/*") == ("deny", "commands.deny.rm-root")
    assert verdict(p, "echo x > /workspace/.git/config")[0] == "deny"
    assert verdict(p, "rm -rf /workspace/build")[0] == "allow"
    with pytest.raises(PolicyError, match="workspace_root"):
        Policy.from_toml('[paths]\nworkspace_root = "/srv/ws"\n')


@pytest.mark.parametrize("command", ["rm -rf /workspace/build", "rm -rf /workspace/dist/*"])
def test_a_subdirectory_by_its_absolute_path_stays_allowed(policy: Policy, command: str) -> None:
    assert verdict(policy, command)[0] == "allow"


# Bypass: '~+' is the working directory and '~-' the previous one (bash), '~user' a home:
# 'rm -rf ~+/*' is 'rm -rf ./*'; the rules named '~/*' only.
@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("rm -rf ~+/*", "commands.deny.rm-root"),
        ("rm -rf ~-/*", "commands.deny.rm-root"),
        ("rm -rf ~root/*", "commands.deny.rm-root"),
        ("bash -c 'rm -rf ~+/[a-z]*'", "commands.deny.rm-root"),
        ("find ~+/* -delete", "commands.deny.find-delete-root"),
        ("chmod -R 000 ~root/*", "commands.deny.chmod-root"),
    ],
)
def test_tilde_prefixes(policy: Policy, command: str, rule: str) -> None:
    assert verdict(policy, command) == ("deny", rule)


def test_deeper_paths_below_a_home_stay_allowed(policy: Policy) -> None:
    assert verdict(policy, "rm -rf ~/.cache/pip")[0] == "allow"
    assert verdict(policy, "rm -rf ~+/build/out")[0] == "allow"
