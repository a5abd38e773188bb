"""``runtime bench security``: score backends on the attack corpus, side by side.

    runtime bench security [--backend ours|baseline-seed|baseline-none|bwrap|all]
                           [--wrap NAME=COMMAND] [--class X] [--json] [--report DIR] [--fast]

``--backend`` may be repeated or comma-separated; ``all`` runs the four (``bwrap`` only when
bubblewrap is installed). ``--wrap NAME=COMMAND`` scores another sandbox under NAME: the
``baseline-none`` tools (no check of any kind) run inside ``COMMAND python -I baselines.py``,
with ``{workspace}``, ``{harness}`` and ``{case_root}`` filled per case. ``--class`` filters
(repeatable, e.g. ``--class A --class H``); ``--case ID`` runs the named cases only (an
unknown id, or a selection left empty, is a usage error). ``--fast`` runs a deterministic
subset touching every class and group (what CI runs). ``--json`` prints one JSON object (a
list when more than one backend ran) on stdout; otherwise a table. ``--report DIR`` writes
report.md, report.html and results.json. A progress bar runs on stderr.

A case ends in an *error* when a call of it did not run (the worker or the sandbox around it
died, hung or gave no valid reply, a tool could not import a module it needs, the harness
failed) and no effect was observed: it counts neither as contained nor as not contained, and
every report counts and lists it apart. Errors are printed on stderr for every backend.

Exit status: 0 when every attack run on ``ours`` was contained and every benign control
passed, 1 otherwise (an error on ``ours`` included). The other backends never fail the
command, errors included: their scores are a comparison, and some attacks end their own
worker there (``kill -9 -1`` as the worker's uid), which cannot be told from a crash; their
errors are printed and counted instead. 64 on usage errors (a backend that cannot be scored
here included: run by a user other than root, the baselines need unprivileged user
namespaces; a sandboxed interpreter that cannot import the worker's modules).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["exit_status", "main"]


def _package() -> ModuleType:
    """``benchmarks/security`` as a package, wherever this file lives (repo or wheel)."""
    here = Path(__file__).resolve().parent
    if str(here.parent) not in sys.path:
        sys.path.insert(0, str(here.parent))
    return importlib.import_module(f"{here.name}.security")


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="runtime bench security", description=__doc__.split("\n")[0])
    p.add_argument(
        "--backend",
        action="append",
        default=None,
        help="ours | baseline-seed | baseline-none | bwrap | all (repeatable)",
    )
    p.add_argument(
        "--wrap",
        action="append",
        default=None,
        metavar="NAME=COMMAND",
        help="score another sandbox: the unchecked tools run inside COMMAND (repeatable; "
        "placeholders {workspace}, {harness}, {case_root})",
    )
    p.add_argument(
        "--class",
        dest="classes",
        action="append",
        default=None,
        help="attack class A-H (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    p.add_argument("--report", type=Path, default=None, help="write report files into DIR")
    p.add_argument("--fast", action="store_true", help="a few cases per class (CI)")
    p.add_argument("--case", action="append", default=None, help="run only these case ids")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return 0 if exc.code == 0 else 64
    pkg = _package()
    corpus, executors, runner, report = (pkg.corpus, pkg.executors, pkg.runner, pkg.report)
    wrappers: dict[str, tuple[str, ...]] = {}
    try:
        for value in args.wrap or []:
            name, argv = executors.parse_wrapper(value)
            wrappers[name] = argv
    except executors.WrapperError as exc:
        print(f"runtime bench security: {exc}", file=sys.stderr)
        return 64
    names: list[str] = []
    for item in args.backend or ([] if wrappers else ["ours"]):
        for name in item.split(","):
            name = name.strip()
            if name == "all":
                names.extend(_installed_backends(executors))
            else:
                names.append(name)
    for name in names:
        if name not in executors.BACKENDS:
            print(
                f"unknown backend {name!r}; choose from "
                f"{', '.join(executors.BACKENDS)}, all (or --wrap NAME=COMMAND)",
                file=sys.stderr,
            )
            return 64
        wrapper = executors.WRAPPERS.get(name)
        if wrapper is not None and not executors.installed(wrapper):
            print(
                f"runtime bench security: backend {name!r}: {wrapper[0]!r} is not installed",
                file=sys.stderr,
            )
            return 64
    names.extend(wrappers)
    classes = [c.upper() for c in args.classes] if args.classes else None
    if classes and not set(classes) <= set(corpus.CLASSES):
        print(f"unknown class in {classes}; classes are A-H", file=sys.stderr)
        return 64
    everything = corpus.load_corpus()
    cases = [c for c in everything if classes is None or c.cls in classes]
    if args.fast:
        cases = corpus.fast_subset(cases)
    if args.case:
        # an id that names no case ran nothing and passed (exit 0): a typo looked like a pass
        known = {c.id for c in everything}
        unknown = [cid for cid in dict.fromkeys(args.case) if cid not in known]
        if unknown:
            print(
                f"runtime bench security: unknown case id(s): {', '.join(unknown)}", file=sys.stderr
            )
            return 64
        wanted = set(args.case)
        cases = [c for c in cases if c.id in wanted]
    if not cases:
        print(
            "runtime bench security: no case selected (--case ids outside --class or --fast)",
            file=sys.stderr,
        )
        return 64
    # --fast (CI): a 2 s call timeout keeps the resource cases short; same oracles otherwise
    limits = pkg.oracles.BenchLimits(timeout_s=2.0) if args.fast else pkg.oracles.BenchLimits()
    results: list[dict[str, Any]] = []
    with pkg.fixtures.Servers() as servers:
        made = []
        try:  # every backend first: a sandbox that cannot run the worker stops the run now
            for name in dict.fromkeys(names):
                made.append(executors.make_executor(name, servers, limits, wrappers))
        except executors.WrapperError as exc:
            for ex in made:
                ex.close()
            print(f"runtime bench security: {exc}", file=sys.stderr)
            return 64
        for ex in made:
            name = ex.name
            progress = None if args.no_progress else runner.Progress(len(cases), name)
            summary = runner.run_cases(cases, ex, servers, limits, progress=progress)
            if progress is not None:
                progress.finish()
            results.append(summary.to_json())
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} {platform.machine()} Linux {platform.release()}, "
        f"{_cpus()} CPUs",
        "fast": bool(args.fast),
        "cases": len(cases),
    }
    if args.report is not None:
        report.write_report(args.report, results, meta, cases)
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=1))
    else:
        print(report.markdown_table(results))
    _warn_errors(results)
    return exit_status(results)


def exit_status(results: list[dict[str, Any]]) -> int:
    """1 when ``ours`` left an attack not contained or in an error (``contained`` counts
    neither), or a benign control not passed; else 0. Other backends never fail it."""
    ours = [r for r in results if r["backend"] == "ours"]
    bad = any(r["contained"] < r["total"] or r["benign_passed"] < r["benign_total"] for r in ours)
    return 1 if bad else 0


def _warn_errors(results: list[dict[str, Any]]) -> None:
    """Every backend's errors on stderr, loudly: its score leaves those cases out."""
    for r in results:
        ids = r.get("errors", [])
        if not ids:
            continue
        shown = ", ".join(ids[:20]) + (f" and {len(ids) - 20} more" if len(ids) > 20 else "")
        first = "; ".join(r["error_detail"][ids[0]])[:300]
        print(
            f"runtime bench security: ERROR: backend {r['backend']!r}: {len(ids)} case(s) "
            f"could not be scored (a call did not run), counted apart from contained and "
            f"not contained: {shown}. First: {ids[0]}: {first}",
            file=sys.stderr,
        )


def _installed_backends(executors: ModuleType) -> list[str]:
    """``all``: every built-in backend, less a sandbox whose program is not installed (said
    on stderr; named alone, such a backend is a usage error)."""
    names = []
    for name in executors.BACKENDS:
        wrapper = executors.WRAPPERS.get(name)
        if wrapper is not None and not executors.installed(wrapper):
            print(
                f"runtime bench security: {name} skipped: {wrapper[0]!r} is not installed",
                file=sys.stderr,
            )
            continue
        names.append(name)
    return names


def _cpus() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    raise SystemExit(main())
