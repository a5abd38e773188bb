"""The arguments digest of a redacted call is keyed with a per-log secret (``_digestkey``).

The red team recovered ``winter2024`` from ``DB_PASSWORD=[REDACTED]`` by putting dictionary
words in its place and comparing sha256(canonical arguments) with the stored digest.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from runtime.audit import REDACTED, AuditLog, canonical_json
from runtime.audit._canonical import sha256_hex
from runtime.audit._digestkey import KEY_BYTES, key_path
from runtime.errors import AuditError

SECRET = "winter2024"
WORDS = ["password", "letmein", "summer2023", SECRET, "hunter2", "winter2025"]


def _request(log: AuditLog, call_id: str, arguments: dict[str, object]) -> str:
    rec = log.record_request(
        call_id=call_id,
        tool="shell_exec",
        arguments=arguments,
        decision=None,
        backend=None,
        sandbox=None,
    )
    assert rec.arguments_digest is not None
    return rec.arguments_digest


def test_a_redacted_call_cannot_be_guessed_from_its_record(log: AuditLog) -> None:
    arguments = {"command": f"export DB_PASSWORD={SECRET} && ./migrate"}
    _request(log, "c1", arguments)
    (stored,) = log.tail(1)
    assert stored.arguments == {"command": f"export DB_PASSWORD={REDACTED} && ./migrate"}
    digest = stored.arguments_digest
    assert digest is not None and digest.startswith("hmac-sha256:")
    # The attack: every guess put where [REDACTED] stands, hashed as the digest was.
    text = canonical_json(stored.arguments)
    guesses = {sha256_hex(text.replace(REDACTED.encode(), w.encode())) for w in WORDS}
    assert digest not in guesses and digest.removeprefix("hmac-sha256:") not in guesses
    # Nor is the key (or the secret) anywhere in the database.
    key = key_path(log.path).read_bytes()
    for name in ("audit.db", "audit.db-wal"):
        data = (log.path.parent / name).read_bytes()
        assert key not in data and key.hex().encode() not in data and SECRET.encode() not in data
    # Whoever holds the key and the call still matches them.
    assert log.digest_arguments(arguments) == digest
    assert log.digest_arguments({"command": "export DB_PASSWORD=x && ./migrate"}) != digest
    assert log.verify().ok


def test_an_unredacted_call_keeps_the_plain_digest(log: AuditLog) -> None:
    arguments = {"command": "ls -l", "path": "a"}
    assert _request(log, "c1", arguments) == sha256_hex(canonical_json(arguments))
    assert log.digest_arguments(arguments) == sha256_hex(canonical_json(arguments))
    assert not key_path(log.path).exists()  # made at the first redacted call only


def test_the_key_is_private_stable_and_shared_by_openers(log_path: Path) -> None:
    arguments = {"token": "t0ps3cret-value"}
    with AuditLog(log_path) as one, AuditLog(log_path) as two:
        first = _request(one, "c1", arguments)
        assert _request(two, "c2", arguments) == first
    key = key_path(log_path)
    st = key.stat()
    assert st.st_size == KEY_BYTES and st.st_mode & 0o777 == 0o600
    with AuditLog(log_path) as again:
        assert again.digest_arguments(arguments) == first
    with AuditLog(log_path, read_only=True) as reader:
        assert reader.digest_arguments(arguments) == first
        assert reader.verify().ok


def test_concurrent_first_use_makes_one_key(log_path: Path) -> None:
    logs = [AuditLog(log_path) for _ in range(6)]
    digests: list[str] = []
    barrier = threading.Barrier(len(logs))

    def run(i: int) -> None:
        barrier.wait()
        digests.append(_request(logs[i], f"c{i}", {"password": "same"}))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(logs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for one in logs:
        one.close()
    assert len(digests) == len(logs) and len(set(digests)) == 1
    leftovers = [p.name for p in log_path.parent.iterdir() if ".digest-key." in p.name]
    assert leftovers == []


def _first_use(path: str) -> None:
    with AuditLog(path) as log:
        _request(log, f"p{os.getpid()}", {"password": "same"})


def test_processes_share_the_key(log_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_first_use, args=(str(log_path),)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with AuditLog(log_path) as log:
        digests = {r.arguments_digest for r in log.tail(10)}
        assert digests == {log.digest_arguments({"password": "same"})}


def test_a_read_only_reader_without_the_key_says_so(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        _request(log, "c1", {"password": "hunter2"})
    key_path(log_path).unlink()
    with AuditLog(log_path, read_only=True) as reader:
        assert reader.verify().ok  # the chain needs no key
        with pytest.raises(AuditError, match="digest-key"):
            reader.digest_arguments({"password": "hunter2"})


@pytest.mark.parametrize("content", [b"", b"x" * 31, b"x" * 64])
def test_a_damaged_key_is_refused(log_path: Path, content: bytes) -> None:
    with AuditLog(log_path) as log:
        key_path(log_path).write_bytes(content)
        with pytest.raises(AuditError, match="not a key"):
            _request(log, "c1", {"password": "hunter2"})


def test_a_symlinked_key_is_refused(log_path: Path, tmp_path: Path) -> None:
    with AuditLog(log_path) as log:
        (tmp_path / "planted").write_bytes(b"k" * KEY_BYTES)
        key_path(log_path).symlink_to(tmp_path / "planted")
        with pytest.raises(AuditError, match="digest-key"):
            _request(log, "c1", {"password": "hunter2"})


def test_a_journaled_record_is_keyed_too(log: AuditLog) -> None:
    sandbox = log.prepare("sandbox", {"userns": True})
    decision = log.prepare("decision", {"action": "allow", "rule": "r"})
    arguments = {"command": f"mysql --password={SECRET}"}
    log.record_request(
        call_id="c1",
        tool="shell_exec",
        arguments=arguments,
        decision=decision,
        backend="subprocess",
        sandbox=sandbox,
        returning=False,
        defer=True,
    )
    (stored,) = log.tail(1)
    assert stored.arguments == {"command": f"mysql --password={REDACTED}"}
    assert stored.arguments_digest == log.digest_arguments(arguments)
    assert stored.arguments_digest is not None
    assert stored.arguments_digest.startswith("hmac-sha256:")
