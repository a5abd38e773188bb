"""Audit log cost per call: µs per record pair (write-ahead request + completion).

Run from the repository root: ``PYTHONPATH=. python benchmarks/bench_audit.py [--pairs N]``.
Each figure is wall-clock µs and, in brackets, this process's CPU µs (user + system): on a
loaded 2-core machine the CPU figure is the steadier one. Prints the pair cost
through AuditLog, the same pair journaled (``defer=True``: one write() per record, SQLite
inserts in batches), then where it goes: canonical JSON + redaction (pure Python) and the bare
SQLite write per record: one autocommit INSERT whose ``seq`` primary key is the
compare-and-swap (what AuditLog does), versus ``BEGIN IMMEDIATE`` + head read + INSERT + COMMIT,
versus a cached head revalidated with ``PRAGMA data_version`` inside ``BEGIN IMMEDIATE``.
The broker's budget for validation + policy + both records is 50 µs (DESIGN §10).

``--codecs`` prints only the encoders, C accelerator (``runtime/_speedups.c``) against the
pure-Python code in the same process, interleaved: canonical JSON of a 1 KiB ``json_parse``
result, of an argument dict holding a 64-character string and of a small flat dict, and one
record's journal line + body parts (``journal_record``) with small and 1 KiB arguments.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import rfc8785

from runtime import _speedups
from runtime.audit import AuditLog, _canonical, canonical_json, redact
from runtime.audit._record import journal_record

ARGS = {"path": "src/main.py", "offset": 0, "limit": 4096}
DECISION = {"action": "allow", "rule": "files.read"}
SANDBOX = {"userns": True, "landlock": 7, "seccomp": True, "cgroup": False, "mode": "strict"}
USAGE = {"cpu_ms": 1.5, "max_rss_kb": 10240, "wall_ms": 2.5}
RESULT = {"content": "x" * 4096, "size": 4096}


def per_op_us(fn: Callable[[], object], n: int, repeat: int = 5) -> tuple[float, float]:
    """(wall, cpu) µs per call: medians over ``repeat`` runs (the machines are noisy)."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            fn()
        walls.append((time.perf_counter() - w0) / n * 1e6)
        cpus.append((time.process_time() - c0) / n * 1e6)
    return statistics.median(walls), statistics.median(cpus)


def fmt(us: tuple[float, float]) -> str:
    return f"{us[0]:7.1f} µs  [cpu {us[1]:6.1f} µs]"


def bench_pairs(path: Path, n: int, *, defer: bool = False) -> tuple[float, float]:
    """``defer=False``: both records committed one by one, ``returning=True`` (as before).
    ``defer=True``: both journaled and inserted in batches (the broker's path for every
    call that runs, since the journal covers all backends); the batch inserts fall inside
    the timed runs."""
    counter = iter(range(10**9))
    with AuditLog(path) as log:

        def pair() -> None:
            call_id = f"call_{next(counter)}"
            kw: dict[str, Any] = {"returning": False, "defer": True} if defer else {}
            log.record_request(
                call_id=call_id,
                tool="read_file",
                arguments=ARGS,
                decision=DECISION,
                backend="subprocess",
                sandbox=SANDBOX,
                **kw,
            )
            log.record_completion(
                call_id=call_id,
                tool="read_file",
                outcome="success",
                error_type=None,
                duration_ms=2.5,
                usage=USAGE,
                result=RESULT,
                **kw,
            )

        us = per_op_us(pair, n)
        t0 = time.perf_counter()
        report = log.verify()
        verify_s = time.perf_counter() - t0
        assert report.ok
        print(f"verify: {report.count / verify_s:,.0f} records/s ({report.count} records)")
        log.export_jsonl(io.StringIO())
    return us


def bench_sqlite(path: Path, n: int, mode: str) -> tuple[float, float]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS t (seq INTEGER PRIMARY KEY AUTOINCREMENT, a TEXT, h TEXT)"
    )
    row = ("x" * 400, "h" * 64)
    cached = [conn.execute("PRAGMA data_version").fetchone()[0]]

    seq = [0]

    def tx() -> None:
        if mode == "optimistic":  # what AuditLog does: one autocommit INSERT, seq as CAS
            seq[0] += 1
            conn.execute("INSERT INTO t (seq, a, h) VALUES (?, ?, ?)", (seq[0], *row))
            return
        conn.execute("BEGIN IMMEDIATE")
        if mode == "head":
            conn.execute("SELECT seq, h FROM t ORDER BY seq DESC LIMIT 1").fetchone()
        elif mode == "data_version":
            dv = conn.execute("PRAGMA data_version").fetchone()[0]
            if dv != cached[0]:
                conn.execute("SELECT seq, h FROM t ORDER BY seq DESC LIMIT 1").fetchone()
                cached[0] = dv
        conn.execute("INSERT INTO t (a, h) VALUES (?, ?)", row)
        conn.execute("COMMIT")

    try:
        return per_op_us(tx, n)
    finally:
        conn.close()


def _document_1kib() -> Any:
    """The parsed 1 KiB document of ``bench_wasm`` (what a json_parse result holds)."""
    items = [{"id": i, "name": f"item {i}", "tags": ["a"], "price": i * 1.5} for i in range(24)]
    while len(json.dumps({"items": items})) > 1024:
        items.pop()
    return {"data": {"items": items}}


def bench_codecs(n: int) -> None:
    """C accelerator vs pure Python, interleaved in blocks in this process."""
    mod = _speedups.module()
    if mod is None:
        print(f"C accelerator not loaded: {_speedups.status()['error']}")
        return
    doc = _document_1kib()
    text_args = _canonical.canonical_json_ijson({"text": json.dumps(doc)}).decode()
    fields = ("request", "call_0123", "2026-01-01T00:00:00.000000Z", "json_parse", "a" * 64)
    rest = ('{"action":"allow","rule":"data"}', "wasm", '{"backend":"wasm"}', *[None] * 6)
    cases: list[tuple[str, Callable[[], object]]] = [
        ("canonical: json_parse result 1 KiB", lambda: _canonical.canonical_json_ijson(doc)),
        ("canonical: {text: 64 chars}", lambda: _canonical.canonical_json_ijson(ARGS_64)),
        ("canonical: small flat dict", lambda: _canonical.canonical_json_ijson(SANDBOX)),
        ("canonical result (bulk), 1 KiB", lambda: _canonical.canonical_json_ijson_bulk(doc)),
        ("journal_record, small arguments", lambda: journal_record((*fields, SMALL, *rest))),
        ("journal_record, 1 KiB arguments", lambda: journal_record((*fields, text_args, *rest))),
    ]
    for label, fn in cases:
        c_runs, py_runs = [], []
        for _ in range(5):
            _canonical._select(mod)
            c_runs.append(per_op_us(fn, n, repeat=1))
            _canonical._select(None)
            py_runs.append(per_op_us(fn, n, repeat=1))
        _canonical._select(mod)
        c_cpu = statistics.median(r[1] for r in c_runs)
        py_cpu = statistics.median(r[1] for r in py_runs)
        ratio = py_cpu / c_cpu
        print(f"  {label:<34} C {c_cpu:6.2f} µs  Python {py_cpu:6.2f} µs  (cpu, x{ratio:.1f})")


ARGS_64 = {"text": "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do e"[:64]}
SMALL = '{"limit":4096,"offset":0,"path":"src/main.py"}'


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--codecs", action="store_true", help="only the C-vs-Python encoders")
    opts = parser.parse_args()
    n = opts.pairs
    if opts.codecs:
        print(f"machine: {os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}; median of 5")
        bench_codecs(n * 5)
        return
    record = {
        "seq": 1,
        "kind": "request",
        "call_id": "call_0123456789abcdef",
        "time": "2026-01-01T00:00:00.000000Z",
        "tool": "read_file",
        "arguments": ARGS,
        "decision": DECISION,
        "sandbox": SANDBOX,
        "prev_hash": "0" * 64,
    }
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        load = os.getloadavg()[0]
        print(f"machine: {os.cpu_count()} cpus, load {load:.2f}; {n} pairs per run, median of 5")
        pair = bench_pairs(base / "audit.db", n)
        print(f"AuditLog request+completion pair:  {fmt(pair)}  (broker budget: 50 µs in all)")
        deferred = bench_pairs(base / "journal.db", n, defer=True)
        print(f"  the same pair journaled (defer)  {fmt(deferred)}")
        ours = per_op_us(lambda: canonical_json(record), n)
        ref = per_op_us(lambda: rfc8785.dumps(record), n)
        print(f"  canonical_json(record)           {fmt(ours)}")
        print(f"  rfc8785.dumps(record)            {fmt(ref)}")
        print(f"  redact(arguments)                {fmt(per_op_us(lambda: redact(ARGS), n))}")
        bench_codecs(n)
        for mode in ("optimistic", "head", "data_version", "none"):
            us = bench_sqlite(base / f"raw-{mode}.db", n, mode)
            print(f"  bare sqlite tx, head={mode:<12} {fmt(us)} per record")


if __name__ == "__main__":
    main()
