"""A SyncBroker does not survive ``os.fork()`` (``runtime/_forksafe.py``).

The child has none of the parent's threads: the broker's loop thread, the audit log's idle
flusher. A call in the child used to succeed and journal its records into the parent's
journal, which the parent's close then removed with only its own records inserted (the
child's call was in no record); a call needing the loop, and the child's exit (the
finalizer's portal call), waited for ever. In the child every call is now refused as
internal_error, nothing is written, close and exit let go of the parent's broker without
ending any of it, and a broker opened in the child works as usual."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.backends.mock import MockBackend
from runtime.broker import SyncBroker
from runtime.catalogue import Catalogue
from tests._forked import in_a_forked_child
from tests.broker.conftest import mock_spec

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")

ROOT = Path(__file__).resolve().parents[2]
FORKED = "a broker does not survive fork(): open a new one in the child"
ECHO = {"tool": "echo", "arguments": {"text": "x"}}
PARSE = {"tool": "json_parse", "arguments": {"text": "[1]"}}


def _broker(tmp_path: Path) -> SyncBroker:
    catalogue = Catalogue()  # the built-ins (json_parse: wasm) and the mock echo
    catalogue.register(mock_spec("echo"))
    return SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend()},
    )


def _journal(sb: SyncBroker) -> Path:
    journal = sb.audit._journal
    assert journal is not None
    return journal.path


def test_a_call_in_a_forked_child_is_refused_and_recorded_nowhere(tmp_path: Path) -> None:
    sb = _broker(tmp_path)
    with sb:
        assert sb.call(ECHO).success  # the mock backend runs on the calling thread
        journal = _journal(sb)
        journaled = journal.stat().st_size

        def child() -> str:
            seen = []
            # echo: a started sync backend (Broker.call_sync); json_parse: the wasm backend
            # is not started, which took the portal to the parent's loop thread and hung.
            for call in (ECHO, PARSE, {**PARSE, "call_id": "child-call"}):
                result = sb.call(call)
                assert result.error is not None, result
                seen.append((result.error.type.value, result.error.message))
            batch = sb.call_many([ECHO, PARSE])
            seen += [(r.error.type.value, r.error.message) for r in batch if r.error]
            assert journal.stat().st_size == journaled, "the child wrote to the parent's journal"
            sb.close()  # lets go of the parent's broker: no portal call, nothing ended
            return json.dumps(seen)

        report = in_a_forked_child(child, timeout_s=30)
        assert json.loads(report) == [["internal_error", FORKED]] * 5, report
        assert journal.stat().st_size == journaled
        assert sb.call(ECHO).success  # the parent's broker and its log go on
        parent_ids = {sb.call(PARSE).call_id}
    with AuditLog(tmp_path / "audit.db") as log:
        assert log.verify().ok
        assert log.interrupted() == []
        ids = {record.call_id for record in log.tail(100)}
    assert "child-call" not in ids
    assert parent_ids <= ids
    assert len(ids) == 3  # the parent's three calls, nothing of the child's


def test_a_broker_opened_in_a_forked_child_works(tmp_path: Path) -> None:
    sb = _broker(tmp_path)
    with sb:
        assert sb.call(ECHO).success

        def child() -> str:
            with _broker(tmp_path) as mine:
                results = [mine.call({**ECHO, "call_id": "child-echo"}), mine.call(PARSE)]
            return json.dumps([r.success for r in results])

        assert in_a_forked_child(child, timeout_s=60) == "[true, true]"
        assert sb.call(ECHO).success
    with AuditLog(tmp_path / "audit.db") as log:
        assert log.verify().ok
        assert "child-echo" in {record.call_id for record in log.tail(100)}


def test_a_forked_child_that_exits_without_closing_does_not_hang(tmp_path: Path) -> None:
    """sys.exit in the child runs the exit-time finalizer of the SyncBroker it inherited
    open: its portal call waited for ever for the parent's loop thread."""
    script = textwrap.dedent(
        f"""
        import os, sys
        from runtime.broker import SyncBroker

        sb = SyncBroker(workspace={str(tmp_path / "ws")!r}, audit={str(tmp_path / "a.db")!r})
        sb.open()
        assert sb.call({{"tool": "json_parse", "arguments": {{"text": "1"}}}}).success
        pid = os.fork()
        if pid == 0:
            result = sb.call({{"tool": "json_parse", "arguments": {{"text": "2"}}}})
            print("child", result.error.type.value, flush=True)
            sys.exit(0)  # the finalizers run: the broker was never closed here
        _, status = os.waitpid(pid, 0)
        print("status", status, flush=True)
        assert sb.call({{"tool": "json_parse", "arguments": {{"text": "3"}}}}).success
        sb.close()
        print("closed", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the bound ends the forked child too
    )
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    assert proc.returncode == 0, (out, err)
    assert out.split("\n")[:3] == ["child internal_error", "status 0", "closed"]
    with AuditLog(tmp_path / "a.db") as log:
        assert log.verify().ok
        assert log.interrupted() == []
        assert len(log.tail(100)) == 4  # the parent's two calls, a request and a completion
