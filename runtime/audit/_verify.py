"""Chain verification: what a hash chain in one file can and cannot prove.

Detected from the file alone: an edited field (the record's hash no longer matches its body),
a record deleted from the middle (a gap in ``seq``), records swapped or renumbered (``seq`` and
``prev_hash`` are hashed), and records deleted from the tail *if* SQLite's high-water mark
(``sqlite_sequence``, bumped by every insert) was left alone.

Not detectable from the file alone: an attacker with write access who truncates the tail and
also lowers ``sqlite_sequence``, or who rewrites the whole chain from some record on with fresh
hashes (there is no secret in the chain). Against that the caller keeps an anchor elsewhere —
``AuditLog.head()`` → ``(seq, hash)``, e.g. in another system's log, a signed note, a remote
append-only store — and passes it back as ``verify(expected_head=...)``: the record with that
seq must still exist and still have that hash, which pins every record up to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from runtime.audit._canonical import GENESIS_HASH
from runtime.audit._record import COLUMNS, body_bytes, chain_hash, json_column_problem

__all__ = ["VerifyReport", "verify_rows"]

_SEQ, _PREV, _HASH = COLUMNS.index("seq"), COLUMNS.index("prev_hash"), COLUMNS.index("hash")


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of :meth:`AuditLog.verify`.

    ``count`` is the number of records in the log; ``first_bad`` the seq of the first record
    that is altered, missing or out of place (None when ``ok``, and when what failed is the
    anchor given, which names no record: a negative seq, or 0 without the genesis hash);
    ``head`` the last record's
    ``(seq, hash)`` — the value to keep as an anchor when the log verifies. ``pending`` counts
    the records a read-only reader found in the journals of brokers that stopped without
    closing the log: not in the chain yet (the next writer to open the log inserts them), so
    not verified; always 0 for a writer, which inserted them when it opened the log.
    """

    ok: bool
    count: int
    first_bad: int | None
    reason: str
    head: tuple[int, str] | None = None
    pending: int = 0

    def __bool__(self) -> bool:
        return self.ok


def verify_rows(
    rows: Iterable[tuple[Any, ...]],
    *,
    high_water: int,
    expected_head: tuple[int, str] | None = None,
) -> VerifyReport:
    """Check rows (in seq order, :data:`COLUMNS` layout) against the chain rules."""
    prev_seq, prev_hash = 0, GENESIS_HASH
    count = 0
    bad: tuple[int, str] | None = None
    anchor_hash: str | None = None
    for row in rows:
        count += 1
        if bad is not None:
            continue  # keep counting; the first break is what matters
        seq = row[_SEQ]
        if seq != prev_seq + 1:
            bad = (prev_seq + 1, f"record {prev_seq + 1} is missing (the next record is {seq})")
            continue
        if row[_PREV] != prev_hash:
            bad = (seq, f"record {seq} does not link to record {prev_seq} (prev_hash differs)")
            continue
        try:
            body = body_bytes(row)
        except (ValueError, TypeError, UnicodeError) as exc:
            bad = (seq, f"record {seq} does not hold canonical data: {exc}")
            continue
        if chain_hash(prev_hash, body) != row[_HASH]:
            bad = (seq, f"record {seq} was altered (its hash does not match its content)")
            continue
        problem = json_column_problem(row)
        if problem is not None:
            # Text that is not JSON can shift the bounds between columns inside the hashed
            # body: the same hash for another call_id, backend or decision.
            bad = (seq, f"record {seq} was altered: {problem}")
            continue
        prev_seq, prev_hash = seq, row[_HASH]
        if expected_head is not None and seq == expected_head[0]:
            anchor_hash = prev_hash
    head = (prev_seq, prev_hash) if prev_seq else None
    if bad is not None:
        return VerifyReport(False, count, bad[0], bad[1], head)
    if high_water > prev_seq:
        return VerifyReport(
            False,
            count,
            prev_seq + 1,
            f"records {prev_seq + 1}..{high_water} were removed from the end of the log "
            f"(SQLite's sequence shows {high_water} records were written)",
            head,
        )
    if expected_head is not None:
        anchor_seq, want = expected_head[0], expected_head[1].lower()
        if anchor_seq < 0 or (anchor_seq == 0 and want != GENESIS_HASH):
            # Record 0 is the start of every chain, with the genesis hash: such an anchor
            # names no record of this (or any) log, and was taken as a match.
            return VerifyReport(
                False,
                count,
                None,
                f"the anchor {anchor_seq}:{want[:16]}... names no record: every chain starts "
                "at record 0 with the genesis hash (64 zeros); not an anchor of this log",
                head,
            )
        if anchor_seq > prev_seq:
            return VerifyReport(
                False,
                count,
                prev_seq + 1,
                f"the log ends at record {prev_seq} but the anchor names record {anchor_seq}: "
                "the tail was truncated",
                head,
            )
        if anchor_seq > 0 and anchor_hash != want:
            return VerifyReport(
                False,
                count,
                anchor_seq,
                f"record {anchor_seq} does not match the anchor: the chain up to it was rewritten",
                head,
            )
    return VerifyReport(True, count, None, f"{count} records verified", head)
