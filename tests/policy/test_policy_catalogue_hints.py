"""The policy's view of the built-in catalogue for checking ``[[examples]]`` at load time
(``runtime.policy._catalogue``) must match the manifests: an example of a tool missing
there was decided as category ``custom`` with no argument roles, so a policy whose example
said ``memory_write`` is allowed by ``[categories] memory`` failed to load."""

from __future__ import annotations

from runtime.catalogue import Catalogue
from runtime.policy import Policy
from runtime.policy._catalogue import CATALOGUE_HINTS


def test_hints_match_every_builtin_manifest() -> None:
    for spec in Catalogue().list():
        want = (spec.category, dict(spec.arg_roles), spec.sandbox.egress)
        assert CATALOGUE_HINTS.get(spec.name) == want, spec.name


def test_example_of_a_memory_tool_loads() -> None:
    Policy.from_toml(
        'default = "deny"\n[categories]\nmemory = "allow"\n'
        '[[examples]]\ntool = "memory_write"\narguments = { content = "x" }\n'
        'match = "allow"\nrule = "categories.memory"\n'
    )


def test_builtin_parameters_are_each_manifests_own() -> None:
    """What examples' arguments are checked against at load, read without the catalogue."""
    from runtime.policy._catalogue import builtin_parameters

    specs = Catalogue().list()
    for spec in specs:
        assert builtin_parameters(spec.name) == spec.parameters, spec.name
    assert builtin_parameters("no_such_tool") is None
