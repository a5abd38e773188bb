"""Whether a hook the embedding application gives (an approver, an event callback) is an
``async def`` one, before it is called: the broker awaits such an approver on its loop, and
refuses such an event callback (events are delivered inline; async consumers subscribe)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

__all__ = ["close_awaitable", "is_async_callable"]


def is_async_callable(hook: object) -> TypeGuard[Callable[..., Awaitable[Any]]]:
    """A coroutine function, a ``functools.partial`` of one, or an object whose
    ``__call__`` is one. ``inspect.iscoroutinefunction`` (3.11) says False for the last,
    and for a partial of such an object."""
    while isinstance(hook, functools.partial):
        hook = hook.func
    if inspect.iscoroutinefunction(hook):
        return True
    if inspect.isfunction(hook) or inspect.ismethod(hook):
        return False
    # The class's __call__ (for a class without one, type's own: not a coroutine function).
    return inspect.iscoroutinefunction(type(hook).__call__)


def close_awaitable(value: object) -> None:
    """Close an awaitable that will never be awaited (a coroutine: no "never awaited"
    warning, its body never run)."""
    close = getattr(value, "close", None)
    if callable(close):
        close()
