"""Closing a SyncBroker while a call runs on its synchronous path (in another thread) ends
the call's backend; the call's result says the broker was closed (``sandbox_error``, reason
``broker_closed``), as on the async path. ``call_sync`` did not map the error: the result
said "the sandbox fork-server is gone" with no details, as if the sandbox had failed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from runtime.backends.mock import MockBackend
from runtime.broker import Broker, SyncBroker
from runtime.catalogue import Catalogue
from runtime.errors import SandboxError
from runtime.models import ToolResult

_ECHO = {"tool": "echo", "arguments": {"text": "hi"}}


def test_a_sync_call_ended_by_close_says_the_broker_closed(
    tmp_path: Path, catalogue: Catalogue
) -> None:
    entered = threading.Event()
    opened: list[Broker] = []

    def handler(request: Any) -> dict[str, Any]:
        if request.arguments.get("text") != "slow":
            return {"ok": True}
        entered.set()
        deadline = time.monotonic() + 30
        while not opened[0]._closed and time.monotonic() < deadline:  # ended by close()
            time.sleep(0.01)
        raise SandboxError("the sandbox fork-server is gone")

    broker = SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(handler)},
    )
    broker.open()
    assert broker.broker is not None
    opened.append(broker.broker)
    results: list[ToolResult] = []
    try:
        assert broker.call(_ECHO).success  # starts the backend: later calls are synchronous
        worker = threading.Thread(
            target=lambda: results.append(broker.call({**_ECHO, "arguments": {"text": "slow"}}))
        )
        worker.start()
        assert entered.wait(10)
    finally:
        broker.close()
    worker.join(30)
    [result] = results
    assert result.error is not None and result.error.type == "sandbox_error"
    assert "the broker was closed while the call ran" in result.error.message
    assert result.error.details["reason"] == "broker_closed"
