"""The public surface: sorted ``__all__`` everywhere, and every name really exported
(httpx's ``tests/test_exported_members.py``, trio's ``_tests/test_exports.py``)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import runtime
from runtime import errors


def _isort_key(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    if name.isupper() or (name.replace("_", "").isupper() and len(name) > 1):
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


def _modules() -> list[str]:
    names = ["runtime"]
    for info in pkgutil.walk_packages(runtime.__path__, "runtime."):
        if info.name.endswith("__main__") or ".backends.sandbox.zygote" in info.name:
            continue
        names.append(info.name)
    return names


def test_public_names_exist() -> None:
    for name in runtime.__all__:
        assert hasattr(runtime, name), name
    assert runtime.__all__ == sorted(runtime.__all__, key=_isort_key)


def test_public_surface_is_what_users_rely_on() -> None:
    for name in ("Broker", "SyncBroker", "ToolResult", "ToolCall", "Policy", "MockBackend"):
        assert name in runtime.__all__


@pytest.mark.parametrize("modname", _modules())
def test_every_all_is_sorted_and_resolves(modname: str) -> None:
    module = importlib.import_module(modname)
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert list(exported) == sorted(exported, key=_isort_key), f"{modname}.__all__ unsorted"
    for name in exported:
        assert hasattr(module, name), f"{modname}.__all__ names missing {name!r}"


def test_every_error_maps_to_an_error_type() -> None:
    """A lower-layer error left unmapped would surface as a wrong error.type."""
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, errors.RuntimeToolError):
            assert isinstance(obj.error_type, errors.ErrorType), name
