"""The few lines a fresh interpreter runs to start one of this package's entry points.

The fork-server (zygote) and the launcher of exec'd sandboxed processes both start with it.
Why not ``python -m``: that would run ``runtime/__init__`` and ``runtime/backends/__init__``,
importing pydantic and the broker (~20 MB of heap) into a process whose heap every call
copies, on fork and, worse, on exit; the three packages on the way are made empty modules
instead (their ``__path__`` only), so submodules import as usual and only the sandbox's own
modules load. Tool code must therefore import what it uses from submodules
(``runtime.toolkit``, ``runtime.errors``), never ``from runtime import ...``. Run it with
``-P`` (or ``-I``): no cwd or script directory on sys.path.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PKG_ROOT", "boot_source"]

#: The directory holding the ``runtime`` package: boot_source's argv[1].
PKG_ROOT = str(Path(__file__).resolve().parents[3])
_PACKAGES = ("runtime", "runtime.backends", "runtime.backends.sandbox")


def boot_source(module: str, call: str) -> str:
    """Source for ``python -c``: argv[1] is the package root (popped), then
    ``from runtime.backends.sandbox.<module> import main`` and ``call`` (e.g. ``main()``)."""
    return (
        "import importlib.util, sys\n"
        "root = sys.argv.pop(1)\n"
        f"for name in {_PACKAGES!r}:\n"
        '    path = root + "/" + name.replace(".", "/")\n'
        "    spec = importlib.util.spec_from_file_location(\n"
        '        name, path + "/__init__.py", submodule_search_locations=[path]\n'
        "    )\n"
        "    sys.modules[name] = importlib.util.module_from_spec(spec)\n"
        f"from runtime.backends.sandbox.{module} import main\n"
        f"{call}\n"
    )
