"""A write path is judged with everything below it (policy round two, gap 1).

``delete_file {path: "config", recursive: true}`` and ``move_file {source: "config", ...}``
take ``config/prod.env`` with them; the path rules looked at the argument only, so a protected
entry under ``paths.deny`` / ``paths.deny_write`` could be deleted, or moved to a name no
glob protects (the sandbox's masks are bound by glob at each call's start: a renamed
ancestor carries the masked entry to an unmasked name, and ``rename(2)`` of an ancestor of a
mount point succeeds).

The rule: a write path (delete, either end of a move, a write) is refused when a deny or
deny_write glob could match a path *below* it through its own names, decided lexically from
the globs (the broker never walks the tree). A glob's leading ``**`` absorbing every name of
the path is not such a match: ``**/.env`` matches below ``build`` only through names that
move along with it (``build/.env`` -> ``out/.env`` is still protected) and the masks make
the kernel refuse the deletion of an existing entry (EBUSY); refusing on it would refuse
every directory delete under the default policy.
"""

from __future__ import annotations

import pytest
from _policy_helpers import decide

from runtime.policy import Policy
from runtime.policy.paths import PathRules
from runtime.policy.schema import PathsSection

RULES = PathRules(
    PathsSection(
        deny=["config/prod.env", "**/.env", "secrets/*/key", ".runtime/**"],
        deny_write=[".git/hooks/**", "**/.github/workflows/*.yml", "deploy/*/prod/**"],
    )
)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("config", "paths.deny"),
        ("./config/", "paths.deny"),
        ("CONFIG", "paths.deny"),  # deny globs are case-insensitive
        ("\uff43onfig", "paths.deny"),  # fullwidth 'c': NFKC -> 'config'
        ("x/../config", "paths.deny"),
        ("secrets", "paths.deny"),
        ("secrets/prod", "paths.deny"),
        (".git", "paths.deny_write"),
        ("sub/.github", "paths.deny_write"),
        ("sub/.github/workflows", "paths.deny_write"),
        ("deploy", "paths.deny_write"),
        ("deploy/eu", "paths.deny_write"),
    ],
)
def test_a_write_path_holding_protected_entries_is_refused(path: str, rule: str) -> None:
    v = RULES.check(path, "write", role="write_path")
    assert not v.allowed
    assert v.rule == rule
    assert "below" in v.reason


@pytest.mark.parametrize(
    "path",
    [
        "build",  # '**/.env' could match below, but only through names that move along
        "config2",
        "configs/prod.env",
        "src/config",
        "secretsx",
        ".git/objects",  # nothing under '.git/hooks/**' is below it
        "sub/.github/other",
        "sub/github",
        "deploy/eu/dev",
        ".gitignore",
    ],
)
def test_a_write_path_with_nothing_protected_below_is_allowed(path: str) -> None:
    assert RULES.check(path, "write", role="write_path").allowed


def test_reads_are_not_judged_by_what_is_below() -> None:
    # Reading or listing a directory takes nothing with it; the masks hide its protected
    # entries from the tool.
    assert RULES.check("config", "read").allowed
    assert RULES.check(".git", "read").allowed


TOML = """
version = 1
default = "deny"
[categories]
file = "allow"
[paths]
read = ["**"]
write = ["**"]
deny = ["config/prod.env", "**/.env"]
deny_write = [".git/**", "**/.git/**"]
"""


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy.from_toml(TOML)


def test_recursive_delete_of_a_directory_holding_a_denied_file(policy: Policy) -> None:
    d = decide(policy, "delete_file", path="config", recursive=True)
    assert (d.action, d.rule) == ("deny", "paths.deny")


@pytest.mark.parametrize(
    ("source", "destination"),
    [("config", "x"), ("x", "config"), ("./config", "y/z")],
)
def test_moving_a_directory_holding_a_denied_file(
    policy: Policy, source: str, destination: str
) -> None:
    d = decide(policy, "move_file", source=source, destination=destination)
    assert (d.action, d.rule) == ("deny", "paths.deny")


def test_benign_directory_deletes_and_moves_stay_allowed(policy: Policy) -> None:
    assert decide(policy, "delete_file", path="build", recursive=True).action == "allow"
    assert decide(policy, "move_file", source="src", destination="lib").action == "allow"
    assert decide(policy, "delete_file", path="config/dev.env").action == "allow"
    assert decide(policy, "move_file", source="sub", destination="other").action == "allow"


def test_the_default_policy_still_allows_ordinary_directory_deletes() -> None:
    p = Policy.default()
    assert decide(p, "delete_file", path="build", recursive=True).action == "allow"
    assert decide(p, "delete_file", path="node_modules", recursive=True).action == "allow"
    assert decide(p, "move_file", source="docs", destination="old/docs").action == "allow"
    assert decide(p, "delete_file", path=".runtime", recursive=True).action == "deny"


# The shell's 'mv' moves a protected directory just as move_file did: the masks are bound
# by glob at each call's start and rename(2) of a directory holding a mount point succeeds.
SHELL_TOML = TOML.replace('file = "allow"', 'file = "allow"\nshell = "allow"')


@pytest.fixture(scope="module")
def shell_policy() -> Policy:
    return Policy.from_toml(SHELL_TOML)


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("mv config x", "paths.deny"),
        ("mv ./config/ x", "paths.deny"),
        ("mv x config", "paths.deny"),  # sources land in a protected directory
        ("mv -t config a b", "paths.deny"),
        ("mv --target-directory=config a", "paths.deny"),
        ("mv -S .bak -- config x", "paths.deny"),
        ("git mv config x", "paths.deny"),
        ("cd sub && mv ../config x", "paths.deny"),
        ("mv /workspace/config x", "paths.deny"),
        ("cd / && mv workspace/config x", "paths.deny"),
        ("mv .git g", "paths.deny_write"),
        ("mv sub/.git x", "paths.deny_write"),
        ("true; mv .env env.txt", "paths.deny"),
        ("rename config cfg config", "paths.deny"),
        ("rename 's/config/cfg/' config", "paths.deny"),
    ],
)
def test_shell_mv_of_a_protected_path(shell_policy: Policy, command: str, rule: str) -> None:
    d = decide(shell_policy, "shell_exec", command=command)
    assert (d.action, d.rule) == ("deny", rule)


@pytest.mark.parametrize(
    "command",
    [
        "mv app services/app",
        "mv configs x",
        "mv -f -v a.txt b.txt",
        "mv *.txt old/",
        "cp -r config x",
        "rename .txt .md a.txt",
    ],
)
def test_shell_mv_of_ordinary_paths_stays_allowed(shell_policy: Policy, command: str) -> None:
    assert decide(shell_policy, "shell_exec", command=command).action == "allow"


# A glob operand is judged by every path it could name (runtime/policy/_globreach.py), and
# 'rm -r' joins mv: each takes what is below its operands along.
@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("mv c*g cfg", "paths.deny"),
        ("mv conf[i]g cfg", "paths.deny"),
        ("mv -T ?onfig cfg", "paths.deny"),
        ("mv co* cfg", "paths.deny"),
        ("mv c*g a/", "paths.deny"),
        ("mv x c*g", "paths.deny"),
        ("mv config/p* x", "paths.deny"),
        ("mv ** x", "paths.deny"),
        ("mv .g* x", "paths.deny_write"),
        ("mv sub/.g?t x", "paths.deny_write"),
        ("mv config/.. x", "paths.root"),
        ("rm -rf config", "paths.deny"),
        ("rm -r c*g", "paths.deny"),
    ],
)
def test_shell_glob_operand_that_could_name_a_protected_path(
    shell_policy: Policy, command: str, rule: str
) -> None:
    d = decide(shell_policy, "shell_exec", command=command)
    assert (d.action, d.rule) == ("deny", rule)


@pytest.mark.parametrize(
    "command",
    [
        "mv *.txt docs/",
        "rm -rf build/*",
        "mv src/*.py lib/",
        "mv *.md notes/",
        "rm -f c*",
        "mv a.txt .",
    ],
)
def test_shell_glob_operands_naming_nothing_protected_stay_allowed(
    shell_policy: Policy, command: str
) -> None:
    assert decide(shell_policy, "shell_exec", command=command).action == "allow"
