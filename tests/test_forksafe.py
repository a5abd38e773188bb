"""Module-level locks and fork (``runtime/_forksafe.py``): a lock another thread held when
the process forked is unheld in the child, whose first build then runs instead of waiting
for a thread that does not exist there."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterator
from types import FunctionType, ModuleType

import pytest

from runtime._forksafe import ForkSafeLock
from runtime.backends.wasm import _build
from tests._forked import held_by_another_thread, in_a_forked_child
from tests.test_exported_members import _modules

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

_PLAIN_LOCKS = (type(threading.Lock()), type(threading.RLock()), threading.Condition)


def _module_level_locks() -> Iterator[tuple[str, object]]:
    """Every lock a module of ``runtime`` holds in a global, or in an attribute of a
    module-level object of its own (the spawner's ``_state.lock``)."""
    for modname in _modules():
        module = importlib.import_module(modname)
        for name, value in vars(module).items():
            if isinstance(value, (*_PLAIN_LOCKS, ForkSafeLock)):
                yield f"{modname}.{name}", value
            elif (
                not isinstance(value, (type, ModuleType, FunctionType))
                and type(value).__module__ == modname
                and hasattr(value, "__dict__")
            ):
                for attr, inner in vars(value).items():
                    if isinstance(inner, (*_PLAIN_LOCKS, ForkSafeLock)):
                        yield f"{modname}.{name}.{attr}", inner


def test_every_module_level_lock_is_fork_safe() -> None:
    found = dict(_module_level_locks())
    assert "runtime.backends.wasm._build._lock" in found  # the scan sees them
    assert "runtime.backends.sandbox._spawner._state.lock" in found
    plain = sorted(name for name, lock in found.items() if not isinstance(lock, ForkSafeLock))
    assert plain == []


def _acquires(lock: ForkSafeLock) -> Callable[[], str]:
    def body() -> str:
        if not lock.acquire(timeout=5):
            return "still held"
        lock.release()
        return "ok"

    return body


def test_every_module_level_lock_is_free_in_a_child_forked_while_held() -> None:
    for name, lock in _module_level_locks():
        assert isinstance(lock, ForkSafeLock), name
        with held_by_another_thread(lock):
            assert in_a_forked_child(_acquires(lock), timeout_s=20) == "ok", name
            assert not lock.acquire(blocking=False), name  # the parent's is still held


def test_a_child_forked_during_a_guest_build_builds() -> None:
    """The build lock held by another thread (a first build runs zig for seconds): the
    child's own build runs rather than waiting for that thread, gone in the child."""
    built = _build.build_guests()  # already up to date after this

    def child() -> str:
        return "ok" if _build.build_guests() == built else "another build"

    with held_by_another_thread(_build._lock):
        assert in_a_forked_child(child, timeout_s=30) == "ok"


def test_the_forking_threads_own_lock_stays_held_in_the_child() -> None:
    """Forked inside its own ``with`` block: the lock is still held there, and the block's
    exit releases it (a fresh, unheld lock would raise on that release)."""
    lock = ForkSafeLock()
    with lock:

        def body() -> str:
            if lock.acquire(blocking=False):
                return "not held"
            lock.release()  # what the with block would do next
            return "ok" if _acquires(lock)() == "ok" else "not released"

        assert in_a_forked_child(body) == "ok"
    assert in_a_forked_child(_acquires(lock)) == "ok"
