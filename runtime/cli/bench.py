"""``runtime bench perf | security | soak``: the benchmark code lives in ``benchmarks/``.

The benchmarks are part of the repository (and of the wheel, as ``runtime/_benchmarks``);
each module there exposes ``main(argv) -> int``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import typer

from runtime.cli.app import app

__all__ = ["benchmarks_dir", "load_benchmark"]

bench_app = typer.Typer(
    help="Benchmarks: perf (latency, throughput), security (attack corpus), soak.",
    no_args_is_help=True,
)
app.add_typer(bench_app, name="bench")


def benchmarks_dir() -> Path:
    pkg = Path(__file__).resolve().parent.parent
    installed = pkg / "_benchmarks"
    return installed if installed.is_dir() else pkg.parent / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    path = benchmarks_dir() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_runtime_benchmarks.{name}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise typer.BadParameter(f"benchmark {name!r} not found in {benchmarks_dir()}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(name: str, ctx: typer.Context) -> None:
    code = load_benchmark(name).main(list(ctx.args))
    raise typer.Exit(int(code))


# help_option_names=[]: `--help` goes to the benchmark's own argument parser, which lists its
# options (typer's help of a pass-through command lists none).
_PASS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


@bench_app.command("perf", context_settings=_PASS)
def perf(ctx: typer.Context) -> None:
    """Latency and throughput, side by side with bwrap and bare wasmtime ([--json])."""
    _run("perf", ctx)


@bench_app.command("security", context_settings=_PASS)
def security(ctx: typer.Context) -> None:
    """Score a backend on the attack corpus ([--backend] [--class] [--json] [--report])."""
    _run("security_bench", ctx)


@bench_app.command("soak", context_settings=_PASS)
def soak(ctx: typer.Context) -> None:
    """Many calls; broker RSS and fd counts at intervals ([--calls N] [--json])."""
    _run("soak", ctx)
