"""The async path's backend call: under the broker's wedge guard, or inline without it.

Backends enforce a call's timeout themselves; the broker adds a guard (a cancel scope with
the call's timeout plus a grace) that only catches a wedged backend. That scope costs
~5.5 µs a call on asyncio (``anyio.move_on_after``: the scope, a timer handle, its
cancellation; ~570 Python opcodes) — about the whole difference between the async and the
synchronous path for a backend that does no I/O (the mock; benchmarks/BROKER-CPU.md, round
five). A cancel scope acts only where the coroutine suspends, so for a backend coroutine
that finishes without suspending the guard cannot act at all: it is pure cost.

:class:`InlineRuns` learns, per backend, whether its ``run`` finishes without suspending:
every call runs the coroutine's first step by hand (``send(None)``, inside the guard); a
backend whose first step finished :data:`LEARN` calls in a row then runs without the
guard. The first of its calls that suspends after all ends that for good (it is never
inline again) and finishes — that one call — without the broker's guard: the guard cannot
be entered after the step, because the backend may have entered cancel scopes of its own
in it (``anyio.to_thread.run_sync`` does), and scopes must be left in the reverse order.
Backends that do I/O (the sandbox, wasm and host backends: a thread or a pipe) suspend on
their first call, so they are never inline and keep the guard on every call; their own
timeouts stand behind that one call in any case.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator
from typing import Any

import anyio

from runtime.backends.base import Backend, ExecOutcome, ExecRequest

__all__ = ["LEARN", "InlineRuns"]

#: Calls in a row whose first step finished before a backend runs without the guard.
LEARN = 64
#: A backend that suspended once: always guarded.
_NEVER = -1


@types.coroutine
def _resume(coro: Any, pending: Any) -> Generator[Any, Any, Any]:
    """Finish a coroutine whose first step ran by hand and yielded ``pending``: what
    ``await`` would have done with it (values up to the event loop, what it sends or
    throws back down, ``close`` passed on)."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                pending = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as done:
                return done.value


class InlineRuns:
    """Per backend name: how many calls in a row finished in their first step."""

    def __init__(self) -> None:
        self._streak: dict[str, int] = {}

    def inline(self, kind: str) -> bool:
        """Whether ``kind``'s calls now run without the guard."""
        return self._streak.get(kind, 0) >= LEARN

    async def run(
        self, kind: str, backend: Backend, request: ExecRequest, guard_s: float
    ) -> tuple[ExecOutcome | None, bool]:
        """``(outcome, False)``, or ``(None, True)`` when the guard ran out first."""
        streak = self._streak.get(kind, 0)
        if streak >= LEARN:
            coro = backend.run(request)
            if type(coro) is types.CoroutineType:
                try:
                    pending = coro.send(None)
                except StopIteration as done:
                    outcome: ExecOutcome = done.value
                    return outcome, False
                self._streak[kind] = _NEVER
                return await _resume(coro, pending), False
            self._streak[kind] = _NEVER  # not a coroutine: cannot be stepped by hand
            return await _guarded(coro, guard_s)
        if streak == _NEVER:
            return await _guarded(backend.run(request), guard_s)
        with anyio.move_on_after(guard_s) as scope:
            coro = backend.run(request)
            if type(coro) is not types.CoroutineType:  # not a coroutine: never inline
                self._streak[kind] = _NEVER
                outcome = await coro
            else:
                try:
                    pending = coro.send(None)
                except StopIteration as done:
                    self._streak[kind] = streak + 1
                    return done.value, False
                self._streak[kind] = _NEVER
                outcome = await _resume(coro, pending)
        if scope.cancelled_caught:
            return None, True
        return outcome, False


async def _guarded(awaitable: Awaitable[ExecOutcome], guard_s: float) -> tuple[Any, bool]:
    with anyio.move_on_after(guard_s) as scope:
        return await awaitable, False
    return None, scope.cancelled_caught
