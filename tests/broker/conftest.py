from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.mock import MockBackend
from runtime.catalogue import Catalogue
from runtime.models import ToolSpec


def mock_spec(name: str, category: str = "data", **kw: Any) -> ToolSpec:
    data: dict[str, Any] = {
        "name": name,
        "description": f"Mock {name}.",
        "category": category,
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "token": {"type": "string"},
                "url": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "result": {"type": "object"},
        "backend": "mock",
    }
    data.update(kw)
    return ToolSpec.model_validate(data)


@pytest.fixture
def catalogue() -> Catalogue:
    cat = Catalogue(builtins=False)
    cat.register(mock_spec("echo"))
    cat.register(mock_spec("http_get", category="network", arg_roles={"url": "url"}))
    return cat


@pytest.fixture
def make_broker(tmp_path: Path, catalogue: Catalogue) -> Callable[..., Any]:
    from runtime.broker import Broker

    def make(handler: Any = None, **kw: Any) -> Broker:
        backend = kw.pop("backend", None) or MockBackend(handler)
        kw.setdefault("catalogue", catalogue)
        return Broker(workspace=tmp_path / "ws", backends={"mock": backend}, **kw)

    return make
