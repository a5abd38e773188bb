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


# -- argument globs meant to match literal braces ------------------------------------------
# An awk program, a JSON body, jq's object, a parameter expansion: in a command word a
# brace is one the shell left (quoted), so a glob for it means the brace. They were refused
# with the expansion as the main advice, and for the JSON glob that offered '***', which
# matches every word: copied into unless_args it turned the rule off.
_HUNTED = [
    # (glob, a word it is written for, the literal spelling; None: it loads as it is)
    ("{print $1,$2}", "{print $1,$2}", "[{]print $1,$2[}]"),
    ('*{"admin":true,*}*', '{"admin":true,"role":1}', '*[{]"admin":true,*[}]*'),
    ("{name,id}", "{name,id}", "[{]name,id[}]"),
    ("${A:-x,y}", "${A:-x,y}", None),  # '${' is bash's parameter expansion, never braces
]
_COMMAND_RULE = 'version = 1\n[categories]\nshell = "allow"\n' + _RULE + 'program = ["x"]\n'
_FIELDS = {
    "args": _COMMAND_RULE + "args = ['{}']\n",
    "unless_args": _COMMAND_RULE + "unless_args = ['{}']\n",
    "args_seq": _COMMAND_RULE + "args_seq = [['{}']]\n",
    "glob condition": 'version = 1\n[categories]\ndata = "allow"\n[[rules]]\nid = "k"\n'
    'action = "deny"\ntools = ["json_parse"]\nwhen = [{{ arg = "text", glob = \'{}\' }}]\n',
}


def _suggestions(message: str) -> tuple[str, list[str]]:
    """The literal spelling a refusal offers first, and the alternatives it offers."""
    import ast
    import re

    literal = re.search(r"; to match these braces literally, write ('[^']*'|\"[^\"]*\")", message)
    assert literal is not None and message.index("write") > message.index("expanded"), message
    listed = re.search(r"if you meant alternatives, [^(]*\((.*)\)$", message)
    alternatives = list(ast.literal_eval(f"({listed.group(1)},)")) if listed else []
    return ast.literal_eval(literal.group(1)), alternatives


def _denied(policy: Policy, field: str, word: str) -> bool:
    from _policy_helpers import decide

    if field == "glob condition":
        return decide(policy, "json_parse", text=word).rule == "k"
    return decide(policy, "shell_exec", command=f"x '{word}'").rule == "k"


@pytest.mark.parametrize("field", list(_FIELDS))
@pytest.mark.parametrize(("glob", "word", "literal"), _HUNTED)
def test_a_literal_brace_glob_loads_or_is_refused_with_its_literal_spelling_first(
    field: str, glob: str, word: str, literal: str | None
) -> None:
    text = _FIELDS[field]
    try:
        policy = Policy.from_toml(text.format(glob))
    except PolicyError as exc:
        assert literal is not None, exc.message
        first, alternatives = _suggestions(exc.message)
        assert first == literal, exc.message
        assert "***" not in alternatives, exc.message
        policy = Policy.from_toml(text.format(first))  # the suggestion, copied, loads
    else:
        assert literal is None, f"{glob!r} loaded in {field}"
    # ... and matches the word it was written for: the rule applies (unless_args: it
    # does not), and not to another word.
    hits = field != "unless_args"
    assert _denied(policy, field, word) is hits
    assert _denied(policy, field, "other") is not hits


@pytest.mark.parametrize("field", list(_FIELDS))
@pytest.mark.parametrize(
    "glob",
    ['*{"admin":true,*}*', "*.{tmp,*}", "{,x}", "a{,b}", "{*,x}", "**/{*,a}", "*{?,ab}", "x{/,y}"],
)
def test_no_offered_alternative_is_empty_or_only_wildcards(field: str, glob: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(_FIELDS[field].format(glob))
    message = info.value.message
    literal, alternatives = _suggestions(message)
    Policy.from_toml(_FIELDS[field].format(literal))
    for alt in alternatives:
        assert alt.strip("*?/"), message  # not '', '*', '***', '**/*', '?'
    if not alternatives:
        assert "alternatives are not offered" in message, message


@pytest.mark.parametrize(
    "text",
    [
        '[tools."{*,x}"]\naction = "deny"\n',
        '[env]\ndeny = ["{,LD_PRELOAD}"]\n',
        '[paths]\ndeny = ["**/{*,a}"]\n',
    ],
)
def test_name_fields_offer_no_match_all_alternative_either(text: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.from_toml("version = 1\n" + text)
    message = info.value.message
    assert "alternatives are not offered" in message and "'[{]'" in message, message
    assert "'*'" not in message and "'**/*'" not in message and "''" not in message, message


def test_a_parameter_expansion_is_not_a_brace_group_but_braces_inside_it_are() -> None:
    Policy.from_toml("version = 1\n" + _RULE + "args = ['${v,,}', 'a${A:-x,y}b']\n")
    with pytest.raises(PolicyError, match="braces are not expanded"):
        Policy.from_toml("version = 1\n" + _RULE + "args = ['${A:-{a,b}}']\n")
    with pytest.raises(PolicyError, match="braces are not expanded"):
        Policy.from_toml("version = 1\n" + _RULE + "args = ['[$]{a,b}']\n")
