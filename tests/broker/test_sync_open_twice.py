"""Opening a SyncBroker that is already open is refused: the second open() made a second
broker and dropped the first, whose backends (for the sandbox, a fork-server) then ran until
the interpreter exited — close() ended only the second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.backends.mock import MockBackend
from runtime.broker import SyncBroker


def test_open_twice_is_refused_and_the_broker_still_works(tmp_path: Path, catalogue: Any) -> None:
    backend = MockBackend(lambda r: {"ok": True})
    broker = SyncBroker(workspace=tmp_path / "ws", catalogue=catalogue, backends={"mock": backend})
    broker.open()
    try:
        first = broker.broker
        with pytest.raises(RuntimeError, match="already open"), broker:
            pass  # pragma: no cover - __enter__ refuses
        assert broker.broker is first
        assert broker.call({"tool": "echo", "arguments": {"text": "a"}}).success
    finally:
        broker.close()
    assert broker.broker is None
    # closed, it opens again
    with broker:
        assert broker.call({"tool": "echo", "arguments": {"text": "b"}}).success
