from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema_rs
import pytest
from _policy_helpers import decide

from runtime.policy import Policy, default_policy_path
from runtime.policy.schema import schema_text

POLICY_DIR = Path(__file__).resolve().parents[2] / "policy"
FILES = [POLICY_DIR / "default.toml", *sorted((POLICY_DIR / "examples").glob("*.toml"))]


def test_shipped_schema_is_current() -> None:
    # Regenerate with: python -c "from runtime.policy.schema import schema_text;
    #   open('policy/policy.schema.json', 'w').write(schema_text())"
    assert (POLICY_DIR / "policy.schema.json").read_text() == schema_text()


def test_every_field_has_a_description_with_default() -> None:
    schema = json.loads(schema_text())
    missing = []
    for name, model in schema["$defs"].items():
        for field, prop in model.get("properties", {}).items():
            if "description" not in prop and "$ref" not in prop and "allOf" not in prop:
                missing.append(f"{name}.{field}")
    # Free-text fields and example bodies need no unit.
    allowed = {
        "Example.name",
        "Example.tool",
        "Example.arguments",
        "Example.profile",
        "ExampleSpec.category",
        "ExampleSpec.arg_roles",
        "ExampleSpec.egress",
        "ProfileSection.description",
        "Rule.reason",
        "Rule.action",
        "Rule.id",
        "CommandRule.reason",
        "CommandRule.action",
        "ToolEntry.reason",
    }
    assert set(missing) <= allowed, sorted(set(missing) - allowed)


def test_examples_exist() -> None:
    names = {f.stem for f in FILES}
    assert {"default", "read_only_agent", "network", "ci_strict"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_policy_files_validate_and_load(path: Path) -> None:
    validator = jsonschema_rs.validator_for(json.loads(schema_text()))
    data = tomllib.loads(path.read_text())
    errors = [e.message for e in validator.iter_errors(data)]
    assert errors == []
    policy = Policy.load(path)
    assert policy.document.examples, "every shipped policy carries examples"


def test_schema_rejects_unknown_keys() -> None:
    validator = jsonschema_rs.validator_for(json.loads(schema_text()))
    assert not validator.is_valid({"tools": {"read_file": "allow"}, "bogus": 1})
    assert validator.is_valid({"tools": {"read_file": "allow"}})


def test_default_policy_path() -> None:
    assert default_policy_path() == POLICY_DIR / "default.toml"


def test_schema_rejects_unknown_categories() -> None:
    validator = jsonschema_rs.validator_for(json.loads(schema_text()))
    assert not validator.is_valid({"categories": {"shel": "deny"}})
    assert not validator.is_valid({"rules": [{"id": "a", "action": "deny", "categories": ["x"]}]})
    assert not validator.is_valid({"profiles": {"r": {"categories": ["flie"]}}})
    assert validator.is_valid({"categories": {"shell": "deny", "mcp": "ask"}})


def test_cpu_s_is_documented_per_process() -> None:
    """``cpu_s`` is RLIMIT_CPU, a limit of each process: a shell with cpu_s = 1 ran four
    1-CPU-second programs and succeeded. Every description of it says so, as memory_mb's
    do (the policy's [limits], a tool's limits, the policy README)."""
    from runtime.models import Limits

    schema = json.loads(schema_text())
    policy_limits = schema["$defs"]["LimitsSection"]["properties"]
    model = Limits.model_json_schema()["properties"]
    for props in (policy_limits, model):
        assert "per process" in props["cpu_s"]["description"]
        assert "RLIMIT_CPU" in props["cpu_s"]["description"]
        assert "each process" in props["memory_mb"]["description"]
    readme = (POLICY_DIR / "README.md").read_text()
    assert "`cpu_s` is per process" in readme


def test_a_command_rule_decision_names_its_id_as_the_description_says() -> None:
    """The description said 'commands.<action>.<id>'; decisions name the bare id (as
    ci_strict.toml's own [[examples]] expect)."""
    policy = Policy.from_toml(
        'version = 1\n[categories]\nshell = "allow"\n'
        '[[commands.rules]]\nid = "ci.no-push"\naction = "deny"\nprogram = ["git"]\n'
        'args_seq = [["push"]]\n'
    )
    assert decide(policy, "shell_exec", command="git push").rule == "ci.no-push"
    described = json.loads(schema_text())["$defs"]["CommandRule"]["properties"]["id"]
    assert "commands.<action>" not in described["description"]
    assert "'<id>'" in described["description"]


def test_the_readme_says_which_path_rules_judge_a_commands_writes() -> None:
    """Only deny and deny_write are checked on a command's writes; the README said 'as
    write_file is', which also checks the write globs."""
    policy = Policy.load(POLICY_DIR / "examples" / "ci_strict.toml")
    assert decide(policy, "write_file", path="src/x.txt").rule == "paths.write"
    assert decide(policy, "shell_exec", command="echo hi > src/x.txt").action == "allow"
    assert decide(policy, "shell_exec", command="echo hi > .git/x").rule == "paths.deny_write"
    text = " ".join((POLICY_DIR / "README.md").read_text().split())
    assert "judged by the path rules as `write_file` is" not in text
    assert "judged by the `deny` and `deny_write` globs of the path rules" in text
