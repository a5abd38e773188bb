"""Pydantic models built from values the runtime typed itself, without validating them again.

The broker builds three models per call (the ToolCall in ``shapes``, the Usage and the
ToolResult in ``broker._fast``) from values whose types are already exactly what validation
would store. Each was ``cls.__new__(cls)`` and four ``object.__setattr__`` (~25 Python
opcodes); :data:`model` is the C accelerator's ``model`` (one call, the same steps and the
same objects stored) once it is loaded, else :func:`py_model`, the reference the tests
compare it with.

Hazard: nothing is validated; callers pass only values they built and typed (their own
module docs say how, and their tests compare the result with the validated model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from runtime import _speedups

__all__ = ["model", "py_model"]

_set = object.__setattr__


def py_model(
    cls: Any, fields: dict[str, Any], fields_set: Iterable[str], extra: dict[str, Any] | None
) -> Any:
    """An instance of the pydantic model ``cls`` whose ``__dict__`` is ``fields`` (as is),
    whose fields set is a new set of ``fields_set``, whose extra is None or a new copy of
    ``extra``, and whose private attributes are None."""
    out = cls.__new__(cls)  # as the accelerator: __new__ looked up on the class
    _set(out, "__dict__", fields)
    _set(out, "__pydantic_fields_set__", set(fields_set))
    _set(out, "__pydantic_extra__", None if extra is None else dict(extra))
    _set(out, "__pydantic_private__", None)
    return out


def _first_model(
    cls: type[Any], fields: dict[str, Any], fields_set: Iterable[str], extra: dict[str, Any] | None
) -> Any:
    # Deferred to the first model built: only processes that build results load the
    # accelerator (every process imports this module).
    global model  # noqa: PLW0603 - the one switch, read on every call
    mod = _speedups.module()
    model = py_model if mod is None else mod.model
    return model(cls, fields, fields_set, extra)


#: :func:`py_model` or the accelerator's twin (module doc); read as ``_trusted.model``.
model: Callable[[type[Any], dict[str, Any], Iterable[str], dict[str, Any] | None], Any] = (
    _first_model
)
