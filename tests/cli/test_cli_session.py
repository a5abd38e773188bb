"""``runtime exec --session NAME``: the call's audit records name the session; ``audit
tail`` shows it and ``audit export --jsonl`` carries it as ``gen_ai.conversation.id``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run


def test_exec_session_is_recorded_tailed_and_exported(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    call = '{"tool": "nope"}'  # refused before running: still two records
    proc = run("exec", "-", "--audit", str(audit), "--session", "s-42", cwd=tmp_path, stdin=call)
    assert proc.returncode == 65, proc.stderr
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=call)
    tail = run("audit", "tail", "-n", "4", "--audit", str(audit), cwd=tmp_path)
    assert [json.loads(line)["session"] for line in tail.stdout.splitlines()] == [
        "s-42",
        "s-42",
        "default",
        "default",
    ]
    export = run("audit", "export", "--jsonl", "--audit", str(audit), cwd=tmp_path)
    ids = [json.loads(line)["gen_ai.conversation.id"] for line in export.stdout.splitlines()]
    assert ids == ["s-42", "s-42", "default", "default"]
    assert run("audit", "verify", "--audit", str(audit), cwd=tmp_path).returncode == 0
