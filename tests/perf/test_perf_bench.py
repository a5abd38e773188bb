"""``runtime bench perf``: the harness's own logic, and tiny runs of the benchmarks it drives
(the figures are not checked — speed lives in benchmarks/ — only that they are produced)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.cli.bench import load_benchmark


@pytest.fixture(scope="module")
def perf() -> Any:
    return load_benchmark("perf")


def test_verdicts(perf: Any) -> None:
    assert perf._verdict(40.0, "<=", 50).startswith("met")
    assert perf._verdict(60.0, "<=", 50).startswith("missed")
    assert perf._verdict(12_000, ">=", 10_000).startswith("met")
    assert perf._verdict(None, "<=", 1.5) == "not measured"
    assert perf._median({"median": 1.5, "p99": 9}) == 1.5
    assert perf._median(3) == 3


def test_machine_and_table(perf: Any) -> None:
    m = perf.machine()
    assert m["cores"] and m["cpu"]
    out = {
        "date": "2026-01-01T00:00:00Z",
        "machine": m,
        "load_avg": [1.0, 1.0, 1.0],
        "load_avg_after": [1.0, 1.0, 1.0],
        "broker_overhead_us": 42.0,
        "broker_overhead_cpu_us": 40.0,
        "wasm_vs_bare": 2.0,
        "notes": ["sandbox benchmark skipped: test"],
    }
    out["goals"] = {k: perf._verdict(out.get(k), *g) for k, g in perf.GOALS.items()}
    text = perf._table(out)
    assert "42.0" in text and "missed (2.0 <= 1.5)" in text
    assert "note: sandbox benchmark skipped: test" in text
    assert "isolated_vs_bwrap        not measured" in text


def test_sandbox_figures_flattened(perf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class FakeBench:
        @staticmethod
        def run_benchmark(n: int) -> dict[str, Any]:
            return {
                "isolated_read_ms": {"median": 2.0, "p99": 3.0},
                "bwrap_true_ms": {"median": 5.0, "p99": 6.0},
                "naive_python_ms": {"median": 40.0, "p99": 50.0},
                "isolated_vs_bwrap": 0.4,
                "isolated_calls_per_s": {"1": 300.0, "8": 450.0},
                "cpus": 2,
            }

    monkeypatch.setattr(perf.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(perf, "_load", lambda name: FakeBench)
    figures, note = perf._sandbox(quick=True)
    assert note is None
    assert figures["isolated_read_ms"] == 2.0 and figures["isolated_read_p99_ms"] == 3.0
    assert figures["isolated_vs_bwrap"] == 0.4
    assert figures["isolated_calls_per_s"] == 450.0
    monkeypatch.setattr(perf.shutil, "which", lambda name: None)
    figures, note = perf._sandbox(quick=True)
    assert figures == {} and note is not None and "bwrap" in note


def test_broker_benchmark_runs() -> None:
    out = load_benchmark("bench_broker").run_benchmark(n=20, blocks=2)
    assert out["broker_audit_verified"] is True
    for key in ("broker_overhead_us", "broker_overhead_sync_us", "sqlite_pair_us"):
        assert out[key] > 0
    # DESIGN §10's "validation + policy + audit": the sum of its three parts, each measured.
    parts = ("broker_validation_us", "broker_policy_us", "broker_audit_us")
    assert all(out[key] > 0 for key in parts)
    assert out["broker_components_us"] == pytest.approx(sum(out[key] for key in parts), abs=0.2)
    assert out["broker_components_cpu_us"] > 0
    json.dumps(out)


def test_wasm_benchmark_runs() -> None:
    out = load_benchmark("bench_wasm").run_benchmark(rounds=20, seconds=0.05, blocks=2)
    assert out["wasm_audit_verified"] is True
    # Two broker processes appended to one log: one chain, both records of every call.
    assert out["wasm_2p_audit_verified"] is True
    assert out["wasm_2p_audit_records"] is True
    assert out["wasm_calls_per_s_2p"] > 0
    for key in (
        "wasm_call_us",
        "bare_wasmtime_us",
        "wasm_vs_bare",
        "wasm_calls_per_s",
        "wasm_calls_per_s_1t",
        "wasm_backend_calls_per_s_1t",
        "bare_wasmtime_calls_per_s_1t",
    ):
        assert out[key] > 0


@pytest.mark.sandbox
def test_floor_benchmark_runs() -> None:
    """The kernel-floor sandbox builds, reads its 4 KiB in every sandbox and cannot see the
    host (floor.c checks; a failure fails the run), and bwrap runs beside it."""
    out = load_benchmark("bench_floor").run_benchmark(n=6, concurrency=(1, 2))
    assert out["floor_ms"]["median"] > 0 and out["floor_cpu_ms"] > 0
    assert set(out["floor_calls_per_s"]) == {"1", "2"}
    if out["bwrap_calls_per_s"]:
        assert out["bwrap_cpu_ms"] > 0
    json.dumps(out)


def test_exit_shape_benchmark_runs() -> None:
    """Both shapes (a Python copy, an exec'd static program) read the 4 KiB (a short read
    fails the run) and are timed to their reap."""
    out = load_benchmark("bench_exit_shape").run_benchmark(n=3, freeze=False)
    for shape in ("python", "static"):
        assert out[shape]["call_us"]["median"] > 0
        assert out[shape]["exit_us"]["median"] > 0
    assert out["parent_rss_kb"] > 0
    json.dumps(out)


@pytest.mark.sandbox
def test_latency_split_benchmark_runs() -> None:
    """Every step of an isolated call is timed; the backend's methods are its own again
    afterwards."""
    from runtime.backends.sandbox import _channels, backend

    before = (backend.SandboxBackend.run_sync, _channels.ControlChannel.wait_for_sync)
    out = load_benchmark("bench_latency").run_benchmark(n=4, gap=0.0)
    assert all(out[key] >= 0 for key in ("broker_before_ms", "spawn_ms", "call_ms"))
    assert out["total_ms"] > 0
    assert (backend.SandboxBackend.run_sync, _channels.ControlChannel.wait_for_sync) == before
    json.dumps(out)
