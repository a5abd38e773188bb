"""A SyncBroker its owner never closes must not hang interpreter exit, and is closed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from runtime.audit import AuditLog

ROOT = Path(__file__).resolve().parents[2]


def test_unclosed_sync_broker_exits_and_closes(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        from runtime.backends.mock import MockBackend
        from runtime.broker import SyncBroker
        from runtime.catalogue import Catalogue
        from runtime.models import ToolSpec

        spec = ToolSpec.model_validate({{
            "name": "echo", "description": "Echo.", "category": "data",
            "parameters": {{"type": "object"}}, "backend": "mock",
        }})
        catalogue = Catalogue(builtins=False)
        catalogue.register(spec)
        broker = SyncBroker(
            workspace={str(tmp_path / "ws")!r},
            audit={str(tmp_path / "audit.db")!r},
            catalogue=catalogue,
            backends={{"mock": MockBackend(side_effect_free=True)}},
        )
        broker.open()
        assert broker.call({{"tool": "echo", "arguments": {{}}}}).success
        print("done", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    # Closed cleanly: nothing logged (closing it once failed on a journal fd that the
    # journal's own exit-time finalizer had already closed).
    assert proc.stderr == ""
    # Closed at exit: the journal was inserted and removed, not left for recovery.
    assert list(tmp_path.glob("audit.db.rtj-*")) == []
    with AuditLog(tmp_path / "audit.db") as log:
        assert log.verify().count == 2
        assert log.interrupted() == []
