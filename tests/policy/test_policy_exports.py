from __future__ import annotations

import importlib

import pytest

import runtime.policy

MODULES = [
    "runtime.policy",
    "runtime.policy._git_config",
    "runtime.policy._moves",
    "runtime.policy._shell_code",
    "runtime.policy._shell_parse",
    "runtime.policy._shell_state",
    "runtime.policy._shell_words",
    "runtime.policy._shell_wrappers",
    "runtime.policy._sql_clients",
    "runtime.policy._sweeps",
    "runtime.policy._tool_commands",
    "runtime.policy._writes",
    "runtime.policy.argv",
    "runtime.policy.commands",
    "runtime.policy.conditions",
    "runtime.policy.engine",
    "runtime.policy.globs",
    "runtime.policy.network",
    "runtime.policy.paths",
    "runtime.policy.schema",
    "runtime.policy.shell",
    "runtime.policy.wrappers",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    assert list(module.__all__) == sorted(module.__all__)
    for member in module.__all__:
        assert hasattr(module, member), member


def test_public_api_names() -> None:
    from runtime.errors import PolicyError

    assert runtime.policy.PolicyError is PolicyError
    for name in ("Policy", "NetworkRules", "NetworkVerdict"):
        assert name in runtime.policy.__all__
