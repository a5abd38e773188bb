"""Inputs the CLI cannot use are usage errors (exit 64) with a clear message, never a
traceback or an internal error: stdin closed, a --session that is not UTF-8, a --policy
that never ends, an ``audit tail -n`` or ``--expect-head`` SEQ out of bounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._pythonpath import python_path
from tests.cli.test_cli import ROOT, run

CALL = '{"tool": "json_parse", "arguments": {"text": "1"}}'


def test_exec_from_closed_stdin_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -m runtime exec - --workspace ws <&-', sys.executable],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 64, proc.stderr
    assert "stdin is closed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_session_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("exec", "-", "--workspace", "ws", "--session", b"\xff", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "--session must be valid UTF-8" in proc.stderr
    assert proc.stdout == ""


def test_policy_file_without_end_is_refused(tmp_path: Path) -> None:
    proc = run("exec", "-", "--workspace", "ws", "--policy", "/dev/zero", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "/dev/zero: policy file is larger than 4194304 bytes" in proc.stderr


def _audited(tmp_path: Path) -> None:
    assert run("exec", "-", "--workspace", "ws", cwd=tmp_path, stdin=CALL).returncode == 0


@pytest.mark.parametrize("n", ["99999999999999999999", "1000000001", "-5"])
def test_audit_tail_count_out_of_bounds_is_a_usage_error(tmp_path: Path, n: str) -> None:
    # Past SQLite's integers: an OverflowError traceback (exit 1); negative: nothing, exit 0.
    _audited(tmp_path)
    proc = run("audit", "tail", "--workspace", "ws", "-n", n, cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "Invalid value for '-n'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_audit_tail_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    _audited(tmp_path)
    assert run("audit", "tail", "--workspace", "ws", "-n", "0", cwd=tmp_path).stdout == ""
    whole = run("audit", "tail", "--workspace", "ws", "-n", "1000000000", cwd=tmp_path)
    assert whole.returncode == 0 and len(whole.stdout.splitlines()) == 2


# A SEQ past SQLite's integers was read as a mismatch (exit 1); one in other scripts' digits
# ('١٢', which str.isdigit accepts) as the number 12.
@pytest.mark.parametrize("seq", ["99999999999999999999999", "\u0661\u0662"])
def test_expect_head_seq_that_is_no_log_position_is_a_usage_error(tmp_path: Path, seq: str) -> None:
    _audited(tmp_path)
    head = f"{seq}:{'a' * 64}"
    proc = run("audit", "verify", "--workspace", "ws", "--expect-head", head, cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "--expect-head wants SEQ:HASH" in proc.stderr


def _log_with_one_call(tmp_path: Path) -> tuple[Path, str]:
    audit = tmp_path / "a.db"
    call = tmp_path / "call.json"
    call.write_text('{"tool": "json_parse", "arguments": {"text": "[1]"}}')
    run("exec", str(call), "--audit", str(audit), "--workspace", "ws", cwd=tmp_path)
    verified = run("audit", "verify", "--audit", str(audit), cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    return audit, json.loads(verified.stdout)["head"]


def test_expect_head_of_record_0_needs_the_genesis_hash(tmp_path: Path) -> None:
    # 0:<any hash> verified as ok: no record 0 exists, and the chain's start has one hash.
    audit, _ = _log_with_one_call(tmp_path)
    other = run(
        "audit", "verify", "--audit", str(audit), "--expect-head", "0:" + "a" * 64, cwd=tmp_path
    )
    assert other.returncode == 64, (other.stdout, other.stderr)
    assert "record 0 is the start of every chain" in other.stderr and other.stdout == ""
    genesis = run(
        "audit", "verify", "--audit", str(audit), "--expect-head", "0:" + "0" * 64, cwd=tmp_path
    )
    assert genesis.returncode == 0, genesis.stderr


def test_expect_head_takes_the_hash_in_either_case(tmp_path: Path) -> None:
    audit, head = _log_with_one_call(tmp_path)
    upper = run(
        "audit", "verify", "--audit", str(audit), "--expect-head", head.upper(), cwd=tmp_path
    )
    assert upper.returncode == 0, (upper.stdout, upper.stderr)
    assert json.loads(upper.stdout)["ok"] is True


def test_the_api_refuses_an_anchor_that_names_no_record(tmp_path: Path) -> None:
    from runtime.audit import GENESIS_HASH, AuditLog

    audit, head = _log_with_one_call(tmp_path)
    seq, digest = head.split(":")
    with AuditLog(audit) as log:
        assert log.verify(expected_head=(int(seq), digest.upper())).ok
        assert log.verify(expected_head=(0, GENESIS_HASH)).ok
        for anchor in ((0, "a" * 64), (-1, digest)):
            report = log.verify(expected_head=anchor)
            assert not report.ok and "names no record" in report.reason


def test_export_is_json_lines_with_or_without_jsonl(tmp_path: Path) -> None:
    # --jsonl was a flag defaulting to True with no --no-jsonl: it said it chose a format
    # and chose nothing. Still accepted (the README shows it); its help now says what it is.
    audit, _ = _log_with_one_call(tmp_path)
    plain = run("audit", "export", "--audit", str(audit), cwd=tmp_path)
    flagged = run("audit", "export", "--jsonl", "--audit", str(audit), cwd=tmp_path)
    assert plain.returncode == flagged.returncode == 0
    assert plain.stdout == flagged.stdout and len(plain.stdout.splitlines()) == 2
    helped = run("audit", "export", "--help", cwd=tmp_path)
    assert "only export format" in " ".join(helped.stdout.split())
    assert "--no-jsonl" not in helped.stdout
