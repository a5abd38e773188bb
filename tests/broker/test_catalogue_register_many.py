"""Catalogue.register_many (seed 000's ToolRegistry.registerMany): all or none."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.catalogue import Catalogue
from runtime.errors import ManifestError
from runtime.models import ToolSpec


def spec(name: str, **kw: Any) -> ToolSpec:
    data: dict[str, Any] = {
        "name": name,
        "description": "Echo the arguments.",
        "category": "custom",
        "parameters": {"type": "object", "properties": {"x": {"type": "string"}}},
        "result": {"type": "object"},
        "backend": "mock",
    }
    data.update(kw)
    return ToolSpec.model_validate(data)


def test_registers_every_tool() -> None:
    cat = Catalogue(builtins=False)
    cat.register_many([spec("a"), spec("b", category="data")])
    assert [s.name for s in cat.list()] == ["a", "b"]
    assert cat.categories() == {"custom": 1, "data": 1}
    assert cat.stats()["total"] == 2
    cat.register_many(iter([spec("c")]))  # any iterable
    assert "c" in cat


@pytest.mark.parametrize(
    ("batch", "match"),
    [
        # a bad schema in the last spec
        (
            lambda: [spec("x"), spec("y", parameters={"type": "object", "minProperties": -1})],
            "parameters",
        ),
        # a name already registered
        (lambda: [spec("x"), spec("a")], "already registered"),
        # a name given twice
        (lambda: [spec("x"), spec("x")], "given twice"),
    ],
)
def test_all_or_none(batch: Any, match: str) -> None:
    cat = Catalogue(builtins=False)
    cat.register(spec("a"))
    with pytest.raises(ManifestError, match=match):
        cat.register_many(batch())
    assert [s.name for s in cat.list()] == ["a"]
    assert cat.stats()["total"] == 1


def test_replace() -> None:
    cat = Catalogue(builtins=False)
    cat.register(spec("a"))
    cat.register_many([spec("a", description="new"), spec("b")], replace=True)
    assert cat.get("a").description == "new" and "b" in cat
