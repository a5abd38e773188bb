"""The security benchmark: attack corpus, fixtures, effect oracles, baselines, runner, report.

Entry point: ``benchmarks/security_bench.py`` (``runtime bench security``).
"""

from __future__ import annotations

from . import corpus, executors, fixtures, oracles, procs, report, runner

__all__ = ["corpus", "executors", "fixtures", "oracles", "procs", "report", "runner"]
