"""Plans whose decision cannot depend on the arguments (no conditional rule, no argument
role) carry their verdict; a decision through it equals one through the full candidate walk."""

from __future__ import annotations

import pytest
from _policy_helpers import make_spec
from test_policy_engine import POLICY

from runtime.models import ToolCall
from runtime.policy import Policy

_TOOLS = [
    "json_parse",
    "delete_file",
    "web_search",
    "mcp_thing",
    "custom_tool",
    "sleep",
    "read_file",
]
_POLICIES = {
    "engine": POLICY,
    "default": Policy.default(),
    "deny": Policy.from_toml('default = "deny"\n[tools.custom_tool]\naction = "ask"\n'),
}


@pytest.mark.parametrize("policy_name", sorted(_POLICIES))
@pytest.mark.parametrize("tool", _TOOLS)
@pytest.mark.parametrize("profile", [None, "nope"])
def test_a_carried_verdict_equals_the_full_walk(
    policy_name: str, tool: str, profile: str | None
) -> None:
    policy = _POLICIES[policy_name]
    spec = make_spec(tool)
    call = ToolCall(tool=tool, arguments={"path": "a.txt"}, context={"env": {}})
    fast = policy.decide(call, spec, profile=profile)
    # The same plan without its verdict takes the candidate walk.
    key = (id(spec), tool, profile)
    plan = policy._plans[key]
    assert (plan.verdict is None) == bool(plan.conditional or plan.roles)
    policy._plans[key] = plan._replace(verdict=None)
    try:
        slow = policy.decide(call, spec, profile=profile)
    finally:
        policy._plans[key] = plan
    assert fast == slow
    assert fast.reasons is not slow.reasons  # a fresh list each time: callers may edit it
