"""The shared toolkit modules keep a sorted ``__all__`` naming things that exist."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["runtime.toolkit_fs", "runtime.toolkit_env"])
def test_all_sorted_and_present(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)

    # isort style, as runtime.models: CONSTANTS, then Classes, then functions
    def key(n: str) -> tuple[int, str]:
        return (0 if n.isupper() else 1 if n[0].isupper() else 2, n)

    assert exported == sorted(exported, key=key)
    for item in exported:
        assert hasattr(module, item), item
