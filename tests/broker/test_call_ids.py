"""Generated call ids: ``call_`` + 32 hex digits, unique in a process and across a fork."""

from __future__ import annotations

import os
import re

from runtime.models import ToolCall, new_call_id


def test_format_and_uniqueness() -> None:
    ids = [new_call_id() for _ in range(10_000)] + [ToolCall(tool="t").call_id]
    assert all(re.fullmatch(r"call_[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_draws_its_own_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, new_call_id().encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 100).decode()
    os.close(read)
    mine = new_call_id()
    assert re.fullmatch(r"call_[0-9a-f]{32}", child)
    assert child[:21] != mine[:21]  # a fresh random half, not the parent's sequence
