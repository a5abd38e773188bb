"""The accelerator's audit record times (``utc_now``/``utc_text``): the text
``runtime.audit._log._Clock`` gives for the same time, and the log uses it when loaded."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import _speedups
from runtime.audit import _log
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[1]
_MAX_NS = 2**63 - 1


@settings(max_examples=2000, deadline=None)
@given(
    st.integers(0, _MAX_NS)
    | st.integers(0, 4 * 10**18)
    | st.sampled_from([0, 951_782_400 * 10**9, 4_107_542_399 * 10**9 + 999_999_999])
)
def test_utc_text_equals_the_clock(c_mod: ModuleType, ns: int) -> None:
    assert c_mod.utc_text(ns) == _log._Clock(lambda: ns)()


@pytest.mark.parametrize("ns", [-1, -(10**18), _MAX_NS + 1, 2**80])
def test_outside_the_range_is_not_implemented(c_mod: ModuleType, ns: int) -> None:
    assert c_mod.utc_text(ns) is NotImplemented


def test_utc_now_reads_the_wall_clock(c_mod: ModuleType) -> None:
    before = time.time_ns() // 1000 * 1000
    got = c_mod.utc_now()
    after = time.time_ns()
    assert c_mod.utc_text(before) <= got <= c_mod.utc_text(after)
    parsed = datetime.datetime.fromisoformat(got.replace("Z", "+00:00"))
    assert parsed.tzinfo == datetime.UTC
    with pytest.raises(TypeError):
        c_mod.utc_now(1)
    with pytest.raises(TypeError):
        c_mod.utc_text(1.5)


def test_records_take_their_time_from_it(c_mod: ModuleType, tmp_path: Path) -> None:
    with _log.AuditLog(tmp_path / "a.db") as log:
        before = c_mod.utc_now()
        record = log.record_request(
            call_id="c", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
        assert before <= record.time <= c_mod.utc_now()
    assert _log._now is c_mod.utc_now


def test_forced_pure_uses_the_python_clock() -> None:
    code = (
        "import tempfile, pathlib\n"
        "from runtime.audit import _log\n"
        "with _log.AuditLog(pathlib.Path(tempfile.mkdtemp()) / 'a.db') as log:\n"
        "    log.record_request(call_id='c', tool='t', arguments={}, decision=None,\n"
        "                       backend=None, sandbox=None)\n"
        "print(type(_log._now).__name__)\n"
    )
    env = {**os.environ, "PYTHONPATH": python_path(ROOT), _speedups.PURE_ENV: "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "_Clock"
