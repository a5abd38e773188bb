"""Variables a call sets are judged as the same assignments written in a command are, and a
session may not set what ``[env] deny`` names (red-team: set_env LESSOPEN, HOME or PAGER
planted a hook that a later ordinary ``shell_exec`` ran, where the same value inline asks).

Judged with the built-in manifests (their ``arg_roles``: set_env's ``key`` is
``session_env``, shell_exec's ``env`` is ``env``)."""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from runtime.catalogue import Catalogue
from runtime.models import Decision, ToolCall
from runtime.policy import Policy

_LESSOPEN = "|echo 'echo LESSOPEN-HOOK-RAN > /workspace/HOOK' | sh; cat %s"
_CATALOGUE = Catalogue()


def _decide(policy: Policy, tool: str, **arguments: Any) -> Decision:
    return policy.decide(ToolCall(tool=tool, arguments=arguments), _CATALOGUE.get(tool))


def _set(policy: Policy, key: str, value: str | None) -> tuple[str, str]:
    d = _decide(policy, "set_env", key=key, value=value)
    return d.action, d.rule


#: The default policy without its [env] deny names: what the inline judge alone says.
_NO_DENY = Policy.from_toml(
    'default = "deny"\n[categories]\nsystem = "allow"\nshell = "allow"\n[env]\ndeny = []\n'
)


@pytest.mark.parametrize(
    "key",
    [
        "LESSOPEN",
        "LESSCLOSE",
        "HOME",
        "XDG_CONFIG_HOME",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "BROWSER",
        "SHELL",
        "GIT_PAGER",
        "VIMINIT",
        "EXINIT",
        "MANOPT",
        "LESSKEY",
        "LESS",
        "ZDOTDIR",
        "OPENSSL_CONF",
        "PYTHONWARNINGS",
        "PYTHONUSERBASE",
        "NODE_OPTIONS",
        "npm_config_node_options",
        "BASH_ENV",
        "PATH",
    ],
)
def test_the_default_policy_refuses_setting_hook_and_config_variables(
    default_policy: Policy, key: str
) -> None:
    assert _set(default_policy, key, "/workspace/x") == ("deny", "env.deny")
    d = _decide(default_policy, "set_env", key=key, value="x")
    assert key in d.reasons[0] and "[env] deny" in d.reasons[0]


def test_removing_a_denied_name_sets_nothing_and_is_allowed(default_policy: Policy) -> None:
    assert _set(default_policy, "HOME", None) == ("allow", "categories.system")


@pytest.mark.parametrize(
    ("key", "value"),
    [("NOTE", "hello"), ("MY_FLAG", "1"), ("OPENAI_API_KEY", "sk-x"), ("NOTE", "a;b | c")],
)
def test_ordinary_variables_are_still_set(default_policy: Policy, key: str, value: str) -> None:
    assert _set(default_policy, key, value) == ("allow", "categories.system")
    assert _set(_NO_DENY, key, value) == ("allow", "categories.system")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # The very values of the reproduction: inline, 'LESSOPEN=... less f' asks.
        ("LESSOPEN", _LESSOPEN, ("ask", "commands.hazard.unparseable")),
        ("PAGER", "sh -c 'rm -rf /'", ("deny", "commands.deny.rm-root")),
        ("LD_PRELOAD", "/workspace/x.so", ("ask", "commands.deny.export-loader-env")),
        ("VIMINIT", "!sh", ("ask", "commands.deny.export-loader-env")),
        ("EDITOR", "vim", ("allow", "categories.system")),
    ],
)
def test_without_deny_names_a_variable_is_judged_as_the_same_assignment_inline(
    key: str, value: str, expected: tuple[str, str]
) -> None:
    assert _set(_NO_DENY, key, value) == expected
    inline = _decide(_NO_DENY, "shell_exec", command=f"export {key}={shlex.quote(value)}")
    if expected[0] != "allow":
        assert inline.rule == expected[1]


def test_shell_execs_env_argument_is_judged_as_inline_assignments(
    default_policy: Policy,
) -> None:
    d = _decide(default_policy, "shell_exec", command="less notes.txt", env={"LESSOPEN": _LESSOPEN})
    assert (d.action, d.rule) == ("ask", "commands.hazard.unparseable")
    d = _decide(
        default_policy,
        "shell_exec",
        command="git log",
        env={"NOTE": "x", "GIT_PAGER": "sh -c 'rm -rf /'"},
    )
    assert (d.action, d.rule) == ("deny", "commands.deny.rm-root")
    d = _decide(default_policy, "shell_exec", command="echo $NOTE", env={"NOTE": "x"})
    assert (d.action, d.rule) == ("allow", "categories.shell")


def test_a_denied_session_variable_is_also_left_out_at_use(default_policy: Policy) -> None:
    """Filtered at use as well: a value in the store before the policy denied its name
    (or put there through the API) never reaches a tool."""
    env = default_policy.env({"HOME": "/workspace/h", "LESSOPEN": _LESSOPEN, "NOTE": "kept"})
    assert env["NOTE"] == "kept"
    assert "LESSOPEN" not in env
    assert env["HOME"] == "/tmp"  # the base environment's, not the session's


def test_the_default_env_deny_covers_every_variable_the_command_rules_run() -> None:
    """The default ``[env] deny`` lists its names for people to read; the command rules keep
    theirs in ``wrappers.COMMAND_ENV``. A name added there and not here would be judged
    inline but passed through the session environment unjudged: the lists must agree."""
    from fnmatch import fnmatchcase

    from runtime.policy.schema import EnvSection
    from runtime.policy.wrappers import COMMAND_ENV

    deny = EnvSection().deny
    missing = sorted(n for n in COMMAND_ENV if not any(fnmatchcase(n, g) for g in deny))
    assert missing == []


# -- variables holding a program's options that can run a command (red-team: set_env
# TAR_OPTIONS / ZIPOPT, then an ordinary 'tar cf' / 'zip' ran the hook, rm-root included) --

_HOOK = "rm -rf --no-preserve-root /"
_TAR_HOOK = "--checkpoint=1 --checkpoint-action=exec=" + _HOOK.replace(" ", "\\ ")
_ZIP_HOOK = f'-T -TT "{_HOOK}"'


@pytest.mark.parametrize(
    "key",
    [
        "TAR_OPTIONS",
        "ZIPOPT",
        "ZIP",
        "UNZIP",
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "RSYNC_RSH",
        "CVS_RSH",
        "GOFLAGS",
        "RUSTC_WRAPPER",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "FCEDIT",
        "PS0",
        "PS1",
        "LOCPATH",
        "HOSTALIASES",
        "TERMINFO",
        "XDG_DATA_DIRS",
        "PYTHONEXECUTABLE",
        "PERL_MB_OPT",
        "PERL_MM_OPT",
    ],
)
def test_the_default_policy_refuses_setting_option_and_hook_variables(
    default_policy: Policy, key: str
) -> None:
    assert _set(default_policy, key, _ZIP_HOOK) == ("deny", "env.deny")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"TAR_OPTIONS={shlex.quote(_TAR_HOOK)} tar cf /tmp/x.tar a.txt", "ask"),
        (f"ZIPOPT={shlex.quote(_ZIP_HOOK)} zip -q /tmp/q.zip a.txt", "ask"),
        (f"export MAKEFLAGS={shlex.quote('--eval=$(shell id)')}; make", "ask"),
        (f"RSYNC_RSH={shlex.quote(_HOOK)} rsync -a a/ host:b/", "deny"),
        (f"FCEDIT={shlex.quote(_HOOK)} fc", "deny"),
    ],
)
def test_an_inline_option_or_hook_variable_asks_or_is_denied(
    default_policy: Policy, command: str, expected: str
) -> None:
    d = _decide(default_policy, "shell_exec", command=command)
    rules = {"ask": ("commands.deny.loader-env", "commands.deny.export-loader-env")}
    assert d.action == expected, (command, d.rule)
    assert d.rule in rules.get(expected, ("commands.deny.rm-root",)), (command, d.rule)


def test_shell_execs_env_argument_with_an_option_variable_asks(default_policy: Policy) -> None:
    d = _decide(
        default_policy, "shell_exec", command="zip -q /tmp/q.zip a", env={"ZIPOPT": _ZIP_HOOK}
    )
    assert (d.action, d.rule) == ("ask", "commands.deny.export-loader-env")
    d = _decide(default_policy, "shell_exec", command="tar cf x a", env={"TAR_OPTIONS": _TAR_HOOK})
    assert (d.action, d.rule) == ("ask", "commands.deny.export-loader-env")
    d = _decide(default_policy, "shell_exec", command="rsync -a a/ b/", env={"RSYNC_RSH": _HOOK})
    assert (d.action, d.rule) == ("deny", "commands.deny.rm-root")
    # Without the deny names, set_env is judged as the inline assignment: it asks.
    assert _set(_NO_DENY, "TAR_OPTIONS", _TAR_HOOK) == ("ask", "commands.deny.export-loader-env")


def test_the_option_hook_list_is_in_every_place_that_judges_a_name() -> None:
    """``toolkit_env.OPTION_HOOK_ENV`` is the one list: the default ``[env] deny`` covers
    it, the command rules ask when a command sets or exports one, the tools refuse it."""
    from fnmatch import fnmatchcase

    from runtime.errors import ToolFailed
    from runtime.policy.schema import EnvSection
    from runtime.toolkit_env import OPTION_HOOK_ENV, check_env_key

    deny = EnvSection().deny
    assert sorted(n for n in OPTION_HOOK_ENV if not any(fnmatchcase(n, g) for g in deny)) == []
    for name in sorted(OPTION_HOOK_ENV):
        d = _decide(_NO_DENY, "shell_exec", command=f"{name}=x true")
        assert (d.action, d.rule) == ("ask", "commands.deny.loader-env"), name
        d = _decide(_NO_DENY, "shell_exec", command=f"export {name}=x")
        assert d.action == "ask" and d.rule.endswith("loader-env"), name
        with pytest.raises(ToolFailed):
            check_env_key(name)


def test_home_is_the_calls_private_tmp(default_policy: Policy) -> None:
    """Unset, `~` was not expanded in a shell_exec and npm, pip or git found no home; /tmp is
    the sandbox user's home in its /etc/passwd, private to the call."""
    assert default_policy.env({})["HOME"] == "/tmp"


# -- a rule on assigned names sees every way of setting the name (hunter: 'assigns =
# ["AWS_*"]' caught 'AWS_KEY=1 ls' and 'export AWS_X=$v' only; 'export AWS_X=1', 'declare
# -x', 'readonly', shell_exec's env and set_env, judged as 'export NAME=VALUE', all ran).

_ASSIGNS = Policy.from_toml(
    'version = 1\n[categories]\nshell = "allow"\nsystem = "allow"\n'
    '[[commands.rules]]\nid = "no-aws"\naction = "deny"\nassigns = ["AWS_*"]\n'
)


@pytest.mark.parametrize(
    "command",
    [
        "export AWS_X=1",
        "export AWS_X=1; ls",
        "export -n AWS_X=1",
        "declare -x AWS_X=1",
        "declare -r AWS_X=1",
        "typeset AWS_X+=1",
        "readonly AWS_X=1",
        "local AWS_X=1",
        "export AWS_X",
        "declare -x AWS_X",
        "export -- AWS_X=1",
        "export AWS_X=$v",
        "AWS_KEY=1 ls",
    ],
)
def test_an_assigns_rule_sees_every_declaring_builtin(command: str) -> None:
    d = _decide(_ASSIGNS, "shell_exec", command=command)
    assert (d.action, d.rule) == ("deny", "no-aws")


@pytest.mark.parametrize(
    "command", ["export OTHER=1", "declare -f AWS_X", "readonly AWS_X", "local AWS_X", "ls"]
)
def test_an_assigns_rule_leaves_other_names_alone(command: str) -> None:
    assert _decide(_ASSIGNS, "shell_exec", command=command).action == "allow"


def test_an_assigns_rule_judges_env_arguments_and_set_env() -> None:
    d = _decide(_ASSIGNS, "shell_exec", command="ls", env={"AWS_X": "1"})
    assert (d.action, d.rule) == ("deny", "no-aws")
    d = _decide(_ASSIGNS, "set_env", key="AWS_X", value="1")
    assert (d.action, d.rule) == ("deny", "no-aws")
    assert _decide(_ASSIGNS, "set_env", key="OTHER", value="1").action == "allow"
