"""Catalogue.on_change: listeners hear of every registration and removal (the MCP server's
tools/list_changed), once per change, never of a change that did not happen."""

from __future__ import annotations

import pytest

from runtime.catalogue import Catalogue
from runtime.errors import ManifestError, ToolNotFound
from tests.broker.test_catalogue_register_many import spec


def test_listeners_hear_each_change_until_stopped() -> None:
    cat = Catalogue(builtins=False)
    heard: list[int] = []
    stop = cat.on_change(lambda: heard.append(len(cat)))
    cat.register(spec("a"))
    cat.register_many([spec("b"), spec("c")])  # one batch, one call
    cat.register(spec("a", description="Replaced."), replace=True)
    cat.unregister("b")
    assert heard == [1, 3, 3, 2]  # each after its change
    stop()
    stop()  # idempotent
    cat.register(spec("d"))
    assert heard == [1, 3, 3, 2]


def test_a_refused_change_is_not_heard() -> None:
    cat = Catalogue([spec("a")], builtins=False)
    heard: list[None] = []
    cat.on_change(lambda: heard.append(None))
    with pytest.raises(ManifestError):
        cat.register(spec("a"))  # already registered
    with pytest.raises(ManifestError):
        cat.register_many([spec("b"), spec("b")])  # given twice: none registered
    with pytest.raises(ToolNotFound):
        cat.unregister("missing")
    cat.register_many([])
    assert heard == []


def test_a_listener_may_read_the_catalogue() -> None:
    # Called outside the lock: a listener that reads (or registers) does not deadlock.
    cat = Catalogue(builtins=False)
    seen: list[list[str]] = []
    cat.on_change(lambda: seen.append([s.name for s in cat.list()]))
    cat.register(spec("a"))
    assert seen == [["a"]]
