"""Conditions on call arguments (``[[rules]] when = [...]``), compiled once."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

from runtime.policy.schema import Condition

__all__ = ["CompiledCondition", "holds_on_paths"]

_MISSING = object()


def _lookup(arguments: dict[str, Any], dotted: str) -> Any:
    cur: Any = arguments
    for key in dotted.split("."):
        if not isinstance(cur, dict) or key not in cur:
            return _MISSING
        cur = cur[key]
    return cur


def _number(v: Any) -> float | None:
    # bool is an int in Python; 'true > 0' must not hold.
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


class CompiledCondition:
    __slots__ = ("_checks", "arg")

    def __init__(self, cond: Condition) -> None:
        self.arg = cond.arg
        checks: list[Any] = []
        if cond.exists is not None:
            want = cond.exists
            checks.append(lambda v: (v is not _MISSING) == want)
        if cond.equals is not None:
            eq = cond.equals
            checks.append(lambda v: v is not _MISSING and v == eq)
        if cond.not_equals is not None:
            ne = cond.not_equals
            checks.append(lambda v: v is not _MISSING and v != ne)
        if cond.glob is not None:
            g = cond.glob
            checks.append(lambda v: isinstance(v, str) and fnmatchcase(v, g))
        if cond.regex is not None:
            rx = re.compile(cond.regex)
            checks.append(lambda v: isinstance(v, str) and rx.search(v) is not None)
        if cond.in_ is not None:
            options = list(cond.in_)
            checks.append(lambda v: v is not _MISSING and v in options)
        if cond.not_in is not None:
            excluded = list(cond.not_in)
            checks.append(lambda v: v is not _MISSING and v not in excluded)
        for op, bound in (("gt", cond.gt), ("ge", cond.ge), ("lt", cond.lt), ("le", cond.le)):
            if bound is not None:
                checks.append(_numeric(op, bound))
        self._checks = tuple(checks)

    def holds(self, arguments: dict[str, Any]) -> bool:
        value = _lookup(arguments, self.arg)
        return all(check(value) for check in self._checks)


def _numeric(op: str, bound: float) -> Any:
    def check(v: Any) -> bool:
        n = _number(v)
        if n is None:
            return False
        if op == "gt":
            return n > bound
        if op == "ge":
            return n >= bound
        if op == "lt":
            return n < bound
        return n <= bound

    return check


def holds_on_paths(
    conditions: Iterable[CompiledCondition],
    arguments: dict[str, Any],
    path_args: Iterable[str],
    normal: Callable[[str], str | None],
) -> bool:
    """Whether ``conditions`` hold once each path argument is read in its normal form.

    A condition compares the argument as written, so ``glob = "config/*"`` missed
    './config/a', 'config//a' and 'x/../config/a', which name the same file. The engine
    asks this for deny and ask rules whose conditions did not hold as written (never for
    allow rules: reading a path more ways must only make a decision stricter). ``normal``
    gives the workspace-relative form, or None when there is none (the path rules refuse
    such a path anyway).
    """
    alt: dict[str, Any] | None = None
    for name in path_args:
        value = arguments.get(name)
        if isinstance(value, str):
            form = normal(value)
            if form is not None and form != value:
                alt = dict(arguments) if alt is None else alt
                alt[name] = form
    return alt is not None and all(c.holds(alt) for c in conditions)
