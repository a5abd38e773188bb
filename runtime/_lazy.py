"""Attributes of a package loaded on first use (PEP 562), for packages whose public names
live in modules a process may not need: ``runtime.mcp`` (the MCP SDK), ``runtime.audit``
(the log's models and pydantic, kept out of the sandbox's fork-server)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package``.

    ``__getattr__``: each name of ``homes`` is imported from its module
    (``package.<home>``) on first use, then kept in the package's namespace.
    ``__dir__``: the package's globals and the names of ``homes``, sorted, as ``dir()``
    would list them were they loaded (``help()`` and completion read ``dir()``); it
    imports nothing, so listing the package does not load what it defers.
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *homes})

    return __getattr__, __dir__
