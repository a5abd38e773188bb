"""Shell braces and a negating leading '!' are refused in every glob field of a policy, not
only in [paths]: read literally by fnmatch, '[tools."{write,delete}_file"]', 'LD_{PRELOAD,
LIBRARY_PATH}' in [env] deny, a command rule's 'args = ["**/*.{pem,key}"]' and a glob
condition '*.{pem,key}' matched only names with braces in them, so the rule denied nothing."""

from __future__ import annotations

import pytest

from runtime.errors import PolicyError
from runtime.policy import Policy

_RULE = '[[commands.rules]]\nid = "k"\naction = "deny"\n'


@pytest.mark.parametrize(
    ("text", "field", "line", "says"),
    [
        (
            '[tools."{write,delete}_file"]\naction = "deny"\n',
            "tools.{write,delete}_file",
            2,
            "list the globs separately ('write_file', 'delete_file')",
        ),
        ('[tools]\n"!read_file" = "deny"\n', "tools.!read_file", 3, "a leading '!'"),
        (
            '[env]\ndeny = ["LD_{PRELOAD,LIBRARY_PATH}"]\n',
            "env.deny.0",
            3,
            "('LD_PRELOAD', 'LD_LIBRARY_PATH')",
        ),
        ('[env]\npass = ["HOME", "!AWS_*"]\n', "env.pass.1", 3, "a leading '!'"),
        (
            '[[rules]]\nid = "x"\ntools = ["{read,write}_file"]\naction = "deny"\n',
            "rules.0.tools.0",
            4,
            "('read_file', 'write_file')",
        ),
        (
            '[[rules]]\nid = "x"\naction = "deny"\n'
            'when = [{ arg = "path", glob = "*.{pem,key}" }]\n',
            "rules.0.when.0.glob",
            5,
            "write a rule for each glob, or a regex condition ('*.pem', '*.key')",
        ),
        (_RULE + 'args = ["**/*.{pem,key}"]\n', "commands.rules.0.args.0", 5, "'**/*.pem'"),
        (_RULE + 'unless_args = ["x{1..3}"]\n', "commands.rules.0.unless_args.0", 5, "sequence"),
        (
            _RULE + 'args_seq = [["run", "{dev,start}"]]\n',
            "commands.rules.0.args_seq.0.1",
            5,
            "('dev', 'start')",
        ),
        (_RULE + 'program = ["{rm,shred}"]\n', "commands.rules.0.program.0", 5, "'shred'"),
        (_RULE + 'piped_from = ["!curl"]\n', "commands.rules.0.piped_from.0", 5, "'!'"),
        (_RULE + 'redirect_to = ["*.{pem,key}"]\n', "commands.rules.0.redirect_to.0", 5, "'*.key'"),
        (_RULE + 'writes_to = ["!*.txt"]\n', "commands.rules.0.writes_to.0", 5, "'!'"),
        (_RULE + 'assigns = ["AWS_{A,B}"]\n', "commands.rules.0.assigns.0", 5, "'AWS_B'"),
        (
            '[commands]\nmode = "allowlist"\nallow = ["ls", "{cat,head}"]\n',
            "commands.allow.1",
            4,
            "('cat', 'head')",
        ),
        ('[profiles.p]\ntools = ["read_*", "{a,b}"]\n', "profiles.p.tools.1", 3, "('a', 'b')"),
    ],
)
def test_braces_and_a_leading_bang_are_refused_in_every_glob_field(
    text: str, field: str, line: int, says: str
) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_toml("version = 1\n" + text, "p.toml")
    err = info.value
    assert (err.details["field"], err.details["line"]) == (field, line), err.message
    assert err.message.startswith(f"p.toml:{line}: {field}: ")
    assert says in err.message, err.message
    assert "'[{]'" in err.message or "does not negate" in err.message


@pytest.mark.parametrize(
    "text",
    [
        # find's and test's '!' is an argument word; '{}' is find's placeholder (no comma).
        _RULE + 'program = ["find"]\nargs = ["!", "{}"]\nargs_seq = [["!", "-name"]]\n',
        '[[rules]]\nid = "x"\naction = "deny"\nwhen = [{ arg = "p", glob = "!*" }]\n',
        # A literal brace as a class, a lone '{x}', an inner '!' still load.
        _RULE + 'args = ["[{]a,b[}]", "{x}"]\nredirect_to = ["a!b"]\n',
        '[env]\ndeny = ["LD_*", "[!A]X"]\n',
    ],
)
def test_classes_lone_braces_and_argument_bangs_still_load(text: str) -> None:
    Policy.from_toml("version = 1\n" + text)


def test_a_literal_brace_written_as_a_class_is_matched_in_a_command_rule() -> None:
    from _policy_helpers import decide

    policy = Policy.from_toml(
        'version = 1\n[categories]\nshell = "allow"\n'
        + _RULE
        + 'program = ["awk"]\nargs = ["[{]print*,*[}]"]\n'
    )
    assert decide(policy, "shell_exec", command="awk '{print $1,$2}' f").rule == "k"
    assert decide(policy, "shell_exec", command="awk '{print $1}' f").action == "allow"
