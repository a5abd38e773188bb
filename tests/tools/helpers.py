"""Helpers shared by the tool tests (a module, not conftest: tests import it by name)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]


def fails(fn: Tool, args: dict[str, Any], ctx: ToolContext, reason: str) -> ToolFailed:
    """Call ``fn`` and return the ToolFailed it must raise, with ``reason`` in its details."""
    with pytest.raises(ToolFailed) as exc:
        fn(args, ctx)
    assert exc.value.details["reason"] == reason, exc.value.message
    return exc.value
