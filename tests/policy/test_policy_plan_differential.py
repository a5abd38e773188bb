"""Differential: a decision through a warm plan (verdict, limits and budget computed once per
tool and kept) equals the decision of a freshly loaded policy deciding the call cold and the
full candidate walk (the plan without its verdict, limits computed afresh), on generated
policies, tools, profiles and calls."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from _policy_helpers import make_spec
from hypothesis import given, settings

from runtime.errors import ManifestError
from runtime.models import ToolCall, ToolSpec
from runtime.policy import Policy

_TOOLS = ["json_parse", "delete_file", "web_search", "read_file", "custom_tool", "sleep"]
_ACTIONS = st.sampled_from(["allow", "ask", "deny"])


@st.composite
def _policies(draw: st.DrawFn) -> str:
    lines = [f'default = "{draw(_ACTIONS)}"']
    for key in draw(st.lists(st.sampled_from([*_TOOLS, "*", "json_*", "web_*"]), unique=True)):
        lines.append(f'[tools."{key}"]')
        if draw(st.booleans()):
            lines.append(f'action = "{draw(_ACTIONS)}"')
        if draw(st.booleans()):
            lines.append(f"budget = {draw(st.integers(0, 5))}")
        if draw(st.booleans()):
            lines.append(f"limits = {{ timeout_s = {draw(st.integers(1, 100))} }}")
    if draw(st.booleans()):
        lines.append("[profiles.p]")
        tools = draw(st.lists(st.sampled_from(_TOOLS), max_size=3, unique=True))
        lines.append("tools = [" + ", ".join(f'"{t}"' for t in tools) + "]")
    for i, action in enumerate(draw(st.lists(_ACTIONS, max_size=3))):
        lines.append("[[rules]]")
        lines.append(f'id = "r{i}"')
        lines.append(f'action = "{action}"')
        tools = draw(st.lists(st.sampled_from(_TOOLS), max_size=2, unique=True))
        lines.append("tools = [" + ", ".join(f'"{t}"' for t in tools) + "]")
        if draw(st.booleans()):
            lines.append(f'when = [{{ arg = "n", gt = {draw(st.integers(-3, 3))} }}]')
    return "\n".join(lines) + "\n"


def _decide(policy: Policy, spec: ToolSpec, args: Any, profile: Any) -> Any:
    tool = spec.name
    try:
        decision = policy.decide(
            ToolCall(tool=tool, arguments=args, context={"env": {"A": "1"}}), spec, profile=profile
        )
    except ManifestError as exc:
        return ("ManifestError", str(exc))
    return decision.model_dump(), policy.budget(tool)


@settings(max_examples=150, deadline=None)
@given(
    text=_policies(),
    calls=st.lists(
        st.tuples(
            st.sampled_from(_TOOLS),
            st.fixed_dictionaries({}, optional={"timeout_s": st.integers(0, 200)}),
            st.fixed_dictionaries(
                {}, optional={"n": st.integers(-5, 5), "path": st.sampled_from(["a", "/etc/x"])}
            ),
            st.sampled_from([None, "p", "nope"]),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_warm_plans_decide_like_a_fresh_policy(text: str, calls: list[Any]) -> None:
    warm = Policy.from_toml(text)
    for tool, caps, args, profile in calls:
        spec = make_spec(tool, limits=caps)
        first = _decide(warm, spec, args, profile)
        again = _decide(warm, spec, args, profile)  # through the kept plan and budget
        cold = _decide(Policy.from_toml(text), make_spec(tool, limits=caps), args, profile)
        assert first == cold
        assert again == cold
        # The full path: the same kept plan without its verdict walks the candidates, and
        # its limits are computed afresh.
        key = (id(spec), tool, profile)
        plan = warm._plans.get(key)
        if plan is None:  # the manifest's limits are invalid: no plan is kept
            continue
        assert plan.limits == warm._limits_uncached(tool, profile, plan.network_tool, plan.caps)
        warm._plans[key] = plan._replace(verdict=None)
        try:
            full = _decide(warm, spec, args, profile)
        finally:
            warm._plans[key] = plan
        assert full == cold
