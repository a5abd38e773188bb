from __future__ import annotations

from pathlib import Path

import pytest
from _policy_helpers import make_spec

from runtime.policy import Policy, PolicyError


def load_error(text: str, tmp_path: Path) -> PolicyError:
    f = tmp_path / "p.toml"
    f.write_text(text)
    with pytest.raises(PolicyError) as info:
        Policy.load(f)
    assert info.value.details["file"] == str(f)
    return info.value


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("version = 1\n[tools.read_file]\naction = 'alow'\n", 3, "tools.read_file.action"),
        ("[tools]\nread_file = 'maybe'\n", 2, "tools.read_file"),
        ("[paths]\nread = ['**']\nbogus = 1\n", 3, "paths.bogus"),
        ("unknown_top = 1\n", 1, "unknown_top"),
        ("[limits]\n\ntimeout_s = -1\n", 3, "limits.timeout_s"),
        ("[sandbox]\nmode = 'loose'\n", 2, "sandbox.mode"),
        (
            "[[rules]]\nid = 'a'\naction = 'deny'\n[[rules]]\nid = 'b'\naction = 'nope'\n",
            6,
            "rules.1.action",
        ),
        ("[[rules]]\nid = 'a'\naction = 'deny'\nwhen = [{ arg = 'x' }]\n", 4, "rules.0.when.0"),
        ("[network]\nallow = ['ok.com', 'not a host']\n", 2, "network.allow"),
        ("[commands]\ndynamic = 'allow'\n", 2, "commands.dynamic"),
        ("[commands]\nunparseable = 'allow'\n", 2, "commands.unparseable"),
        (
            "[[commands.rules]]\nid = 'x'\naction = 'deny'\nargs_regex = ['(']\n",
            4,
            "commands.rules.0.args_regex",
        ),
        ("[profiles.Reviewer]\ntools = 'read_file'\n", 2, "profiles.Reviewer.tools"),
        ("[commands]\ndisable = ['commands.deny.nope']\n", 2, "commands.disable"),
        ("[commands]\nallow = ['ls']\n", 1, "commands"),
        ("x = [\n", 1, None),
        # Categories are a closed set: a misspelt one matched no tool and failed open.
        ("default = 'allow'\n[categories]\nshel = 'deny'\n", 3, "categories.shel"),
        (
            "[[rules]]\nid = 'n'\naction = 'deny'\ncategories = ['netwrok']\n",
            4,
            "rules.0.categories.0",
        ),
        ("[profiles.r]\ncategories = ['flie']\n", 2, "profiles.r.categories.0"),
        # Strict types: a string where TOML has a number or a bool is refused, not coerced
        # (builtin = "off" was false and dropped every built-in command rule).
        ("[limits]\ntimeout_s = '30'\n", 2, "limits.timeout_s"),
        ("[commands]\nbuiltin = 'off'\n", 2, "commands.builtin"),
        ("[network]\nallow_private = 'yes'\n", 2, "network.allow_private"),
        ("[tools.x]\nbudget = 5.0\n", 2, "tools.x.budget"),
        # A sub-table of an array of tables is its latest entry's: the offending key's
        # line, not the entry's header.
        (
            "[[examples]]\ntool = 'x'\nmatch = 'deny'\n[[examples]]\ntool = 'y'\n"
            "match = 'deny'\n[examples.spec]\negress = true\ncategory = 'bogus'\n",
            9,
            "examples.1.spec.category",
        ),
        (
            "[[mcp_servers]]\nname = 'a'\ncommand = ['x']\n[mcp_servers.env]\nA = '1'\nB = 2\n",
            6,
            "mcp_servers.0.env.B",
        ),
    ],
)
def test_errors_name_file_line_field(
    text: str, line: int, field: str | None, tmp_path: Path
) -> None:
    err = load_error(text, tmp_path)
    assert err.details["line"] == line, err.message
    assert err.details["field"] == field, err.message
    assert f":{line}:" in err.message


def test_duplicate_rule_ids(tmp_path: Path) -> None:
    err = load_error(
        "[[rules]]\nid='a'\naction='deny'\n[[rules]]\nid='a'\naction='allow'\n", tmp_path
    )
    assert "duplicate rule id" in err.message
    # The second entry's id names the line (it was ':?:', a model validator's error).
    assert (err.details["line"], err.details["field"]) == (5, "rules.1.id"), err.message
    assert ":5: rules.1.id: " in err.message
    err = load_error(
        "[[rules]]\nid='a'\naction='deny'\n\n[[commands.rules]]\nid='a'\naction='deny'\n",
        tmp_path,
    )
    assert (err.details["line"], err.details["field"]) == (6, "commands.rules.0.id")


@pytest.mark.parametrize("rule_id", ["default", "paths.deny", "commands.deny.rm-root"])
def test_reserved_rule_ids(rule_id: str, tmp_path: Path) -> None:
    err = load_error(f"version = 1\n[[rules]]\nid='{rule_id}'\naction='deny'\n", tmp_path)
    assert "reserved" in err.message
    assert (err.details["line"], err.details["field"]) == (3, "rules.0.id"), err.message


def test_a_header_variable_passed_to_tools_names_its_server(tmp_path: Path) -> None:
    err = load_error(
        "version = 1\n[env]\npass = ['TOKEN']\n[[mcp_servers]]\nname = 'a'\n"
        "url = 'https://mcp.example.com/mcp'\nheaders = { Authorization = 'env:TOKEN' }\n",
        tmp_path,
    )
    assert "[env] pass" in err.message
    assert (err.details["line"], err.details["field"]) == (7, "mcp_servers.0.headers")


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * 900 + "]" * 900 + "\n", "a = " + "{x = " * 600 + "1" + "}" * 600 + "\n"],
    ids=["arrays", "inline-tables"],
)
def test_deep_nesting_is_a_policy_error(text: str, tmp_path: Path) -> None:
    # tomllib recurses per level: a 10 KB file used to end every front door in a
    # RecursionError traceback (exit 1) instead of config_error (exit 64).
    err = load_error(text, tmp_path)
    assert "nest too deeply" in err.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        Policy.load(tmp_path / "absent.toml")
    assert info.value.details["file"].endswith("absent.toml")


def test_failing_example_names_the_example(tmp_path: Path) -> None:
    text = """
[categories]
file = "allow"

[[examples]]
name = "fine"
tool = "read_file"
arguments = { path = "a" }
match = "allow"

[[examples]]
name = "wrong on purpose"
tool = "read_file"
arguments = { path = "/etc/passwd" }
match = "allow"
"""
    err = load_error(text, tmp_path)
    assert "wrong on purpose" in err.message
    assert err.details["field"] == "examples.1"
    assert err.details["line"] == 11
    assert err.details["decision"]["rule"] == "paths.absolute"


@pytest.mark.parametrize(
    ("example", "ok"),
    [
        ("tool='read_file'\narguments={path='a'}\nmatch='allow'\nrule='categories.file'", True),
        ("tool='read_file'\narguments={path='a'}\nmatch='allow'\nrule='default'", False),
        ("tool='read_file'\narguments={path='../a'}\nnot_match='allow'", True),
        ("tool='read_file'\narguments={path='a'}\nnot_match='allow'", False),
        (
            "tool='custom_x'\narguments={p='../a'}\n"
            "spec={category='file', arg_roles={p='read_path'}}\n"
            "match='deny'\nrule='paths.escape'",
            True,
        ),
        ("tool='custom_x'\nspec={category='file'}\nmatch='allow'", True),
        ("tool='bad name!'\nmatch='deny'", False),
        ("tool='read_file'\nmatch='allow'\nnot_match='deny'", False),
        ("tool='read_file'\nrule='x'\nnot_match='deny'", False),
    ],
)
def test_examples_checked_at_load(example: str, ok: bool) -> None:
    text = "[categories]\nfile = 'allow'\n[[examples]]\n" + example + "\n"
    if ok:
        Policy.from_toml(text)
    else:
        with pytest.raises(PolicyError) as info:
            Policy.from_toml(text, "inline.toml")
        assert info.value.details["file"] == "inline.toml"
        assert info.value.details["field"].startswith("examples.0")


def test_from_toml_and_default_paths() -> None:
    p = Policy.from_toml("")
    assert p.sandbox_mode == "strict"
    assert p.max_concurrent == 3
    assert Policy.default() is Policy.default()


def test_an_integer_is_a_float() -> None:
    doc = Policy.from_toml("[limits]\ntimeout_s = 30\n[network]\ntimeout_s = 5\n").document
    assert (doc.limits.timeout_s, doc.network.timeout_s) == (30.0, 5.0)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("{ paht = 'x' }", "'paht' was unexpected"),
        ("{}", '"path" is a required property'),
        ("{ path = 'a', offset = 'one' }", "[type]"),
        ("{ path = '' }", "[minLength]"),
    ],
)
def test_an_examples_arguments_must_be_a_call_its_builtin_tool_accepts(
    arguments: str, says: str
) -> None:
    """'{paht = "x"}' with match = "deny" passed vacuously: the call the broker would
    refuse as invalid_arguments had no path, so no path rule, so the default's deny."""
    text = (
        "version = 1\n\n[[examples]]\nname = 'typo'\ntool = 'read_file'\n"
        f"arguments = {arguments}\nmatch = 'deny'\n"
    )
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "p.toml")
    err = info.value
    assert (err.details["field"], err.details["line"], err.details["example"]) == (
        "examples.0.arguments",
        6,
        "typo",
    )
    assert err.message.startswith("p.toml:6: example 0 (typo): its arguments are not a valid")
    assert says in err.message


def test_an_examples_arguments_are_checked_against_a_folder_tools_manifest() -> None:
    """At load a folder tool is unknown (its example is decided with the hints); the
    re-check with the real manifest (broker, 'policy check --tools-dir') checks them."""
    policy = Policy.from_toml(
        "version = 1\n[tools]\ncatf = 'deny'\n"
        "[[examples]]\ntool = 'catf'\narguments = { fiel = 'x' }\nmatch = 'deny'\n",
        "p.toml",
    )
    spec = make_spec("catf").model_copy(
        update={
            "parameters": {
                "type": "object",
                "properties": {"file": {"type": "string"}},
                "required": ["file"],
                "additionalProperties": False,
            }
        }
    )
    with pytest.raises(PolicyError) as info:
        policy.check_examples(lambda name: spec if name == "catf" else None)
    assert info.value.details["field"] == "examples.0.arguments"
    assert "valid catf call" in info.value.message and "'fiel' was unexpected" in info.value.message
    # Valid arguments pass the same re-check.
    Policy.from_toml(
        "version = 1\n[tools]\ncatf = 'deny'\n"
        "[[examples]]\ntool = 'catf'\narguments = { file = 'x' }\nmatch = 'deny'\n"
    ).check_examples(lambda name: spec if name == "catf" else None)


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "says"),
    [
        (
            "write_file",
            "{ path = 'a', content = 1979-05-27T07:32:00Z }",
            "examples.0.arguments.content",
            "a TOML datetime (1979-05-27T07:32:00+00:00) is no JSON value",
        ),
        ("read_file", "{ path = 'a', limit = nan }", "examples.0.arguments.limit", "nan is no"),
        ("read_file", "{ path = 'a', limit = -inf }", "examples.0.arguments.limit", "-inf is no"),
        ("custom_x", "{ d = { when = 1979-05-27 } }", "examples.0.arguments.d.when", "TOML date"),
        ("custom_x", "{ t = [1, 07:32:00] }", "examples.0.arguments.t.1", "TOML time"),
    ],
)
def test_an_examples_arguments_are_json_values(
    tool: str, arguments: str, field: str, says: str
) -> None:
    """A TOML date/time reached the schema check, which raised a bare ValueError (a
    traceback from 'policy check' and exec); nan was reported as 'null', the wrong value."""
    text = (
        "version = 1\n[categories]\nfile = 'allow'\n\n[[examples]]\n"
        f"tool = '{tool}'\narguments = {arguments}\nmatch = 'allow'\n"
    )
    with pytest.raises(PolicyError) as info:
        Policy.from_toml(text, "p.toml")
    err = info.value
    assert (err.details["field"], err.details["line"]) == (field, 7)
    assert err.message.startswith(f"p.toml:7: {field}: ")
    assert says in err.message
