"""``read_write_path``: an argument the tool reads and changes (move_file's source,
edit_file's path) must be readable and writable. Red team: with logs/** writable only,
move_file logs/app.log out/app.log (readable) showed it, and edit_file's 'not found' /
'replaced' answered guesses about its content."""

from __future__ import annotations

import pytest

from runtime.catalogue import Catalogue
from runtime.models import ToolCall
from runtime.policy import Policy

CATALOGUE = Catalogue()
POLICY = Policy.from_toml(
    '[paths]\nread = ["out/**", "src/**"]\nwrite = ["out/**", "logs/**"]\n'
    '[categories]\nfile = "allow"\n',
    "t",
)


@pytest.mark.parametrize(
    ("tool", "arguments", "action", "rule"),
    [
        ("move_file", {"source": "logs/a.log", "destination": "out/a.log"}, "deny", "paths.read"),
        ("move_file", {"source": "out/a.log", "destination": "logs/a.log"}, "allow", None),
        ("move_file", {"source": "src/a.py", "destination": "out/a.py"}, "deny", "paths.write"),
        (
            "edit_file",
            {"path": "logs/a.log", "old_string": "a", "new_string": "b"},
            "deny",
            "paths.read",
        ),
        ("edit_file", {"path": "out/a.txt", "old_string": "a", "new_string": "b"}, "allow", None),
        ("write_file", {"path": "logs/a.log", "content": "x"}, "allow", None),
    ],
)
def test_a_path_read_and_changed_needs_both(
    tool: str, arguments: dict[str, str], action: str, rule: str | None
) -> None:
    # The real manifests: their roles are what this is about.
    d = POLICY.decide(ToolCall(tool=tool, arguments=arguments), CATALOGUE.get(tool))
    assert d.action == action, d
    if rule is not None:
        assert d.rule == rule


def test_the_manifests_say_so() -> None:
    assert CATALOGUE.get("move_file").arg_roles == {
        "source": "read_write_path",
        "destination": "write_path",
    }
    assert CATALOGUE.get("edit_file").arg_roles == {"path": "read_write_path"}
