"""The tool catalogue: registered manifests, their compiled validators, and call statistics."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.catalogue.export import ExportFormat, export_tool
from runtime.catalogue.loader import _check_spec, load_manifests
from runtime.errors import ManifestError, ToolNotFound
from runtime.models import BackendKind, ToolSpec
from runtime.toolkit import builtin_tools_dir
from runtime.validation import SchemaValidator, compile_schema

__all__ = ["Catalogue", "CatalogueEntry", "ToolStats"]


@dataclass(slots=True)
class ToolStats:
    count: int = 0
    failures: int = 0
    total_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        mean = self.total_ms / self.count if self.count else 0.0
        return {"count": self.count, "failures": self.failures, "mean_duration_ms": mean}


@dataclass(slots=True, frozen=True)
class CatalogueEntry:
    """A registered tool as the broker uses it on every call: its spec, its compiled
    validators and ``spec.backend.value`` (read once: an enum member's ``.value`` is a
    descriptor call in Python)."""

    spec: ToolSpec
    args: SchemaValidator
    result: SchemaValidator | None
    backend: str


def _check_folder_category(spec: ToolSpec) -> None:
    """A folder tool is in the ``custom`` category, which the policy allows tool by tool: the
    built-in categories' allowances (``categories.data = "allow"`` in the default policy)
    were made for the built-in tools of each, and a manifest saying ``data`` for a command
    running ``sh -c`` would step around them. One exception, what ``data`` means: a wasm
    tool, pure computation (no files, no network, no programs), may say ``data``."""
    if spec.category == "custom" or (spec.category == "data" and spec.backend is BackendKind.WASM):
        return
    raise ManifestError(
        f"{spec.source}: field category: a tool folder's tools are in the 'custom' category "
        f"(a wasm tool may also be 'data'), not {spec.category!r}: the policy's allowance "
        "of a built-in category is for the built-in tools; allow this tool by name "
        f"([tools.{spec.name}]) or its category ([categories] custom)",
        file=str(spec.source),
        field="category",
    )


class Catalogue:
    """Tools by name. Thread-safe for registration; lookups are plain dict reads.

    :meth:`on_change` listeners hear of every registration and removal (the MCP server
    tells its clients ``notifications/tools/list_changed``); they run in the thread that
    changed the catalogue, after the change, outside the lock, and must not raise.
    """

    def __init__(
        self,
        specs: Iterable[ToolSpec] = (),
        *,
        builtins: bool = True,
        folders: Iterable[str | Path] = (),
    ) -> None:
        self._tools: dict[str, CatalogueEntry] = {}
        self._stats: dict[str, ToolStats] = {}
        self._lock = threading.Lock()
        self._listeners: dict[object, Callable[[], None]] = {}
        if builtins:
            for spec in load_manifests([builtin_tools_dir()]):
                self._add([spec], replace=False, checked=True)
        for spec in load_manifests(Path(f) for f in folders):
            if spec.backend is BackendKind.HOST:
                # Host tools run in the broker process: only the built-in catalogue (and
                # Python code registering specs itself) may declare them, never a manifest
                # folder, or a plugin could step around the sandbox.
                raise ManifestError(
                    f"{spec.source}: user tools cannot use the 'host' backend; use "
                    "'subprocess' (sandboxed) or 'wasm'",
                    file=str(spec.source),
                    field="backend",
                )
            _check_folder_category(spec)
            self._add([spec], replace=False, checked=True)
        for spec in specs:
            self.register(spec)

    # -- registration -------------------------------------------------------------------------
    def register(self, spec: ToolSpec, *, replace: bool = False) -> None:
        self.register_many([spec], replace=replace)

    def register_many(self, specs: Iterable[ToolSpec], *, replace: bool = False) -> None:
        """Register several tools, all or none (seed 000's ``registerMany``): every spec is
        checked and its schemas compiled first, and a name already registered (or given
        twice) registers none of them, so a plugin's bad manifest never leaves half of
        its tools behind."""
        self._add(specs, replace=replace, checked=False)

    def _add(self, specs: Iterable[ToolSpec], *, replace: bool, checked: bool) -> None:
        """:meth:`register_many`; ``checked``: the specs come from :func:`load_manifests`,
        which checked each already (for a custom wasm tool that is a compile of its
        module, too costly to make twice)."""
        entries: dict[str, CatalogueEntry] = {}
        for spec in specs:
            where = str(spec.source) if spec.source else spec.name
            if not checked:
                _check_spec(spec, Path(where))
            if spec.name in entries:
                raise ManifestError(f"tool {spec.name!r} is given twice", field="name")
            entries[spec.name] = CatalogueEntry(
                spec=spec,
                args=compile_schema(spec.parameters, where=f"{where}: parameters"),
                result=(
                    compile_schema(spec.result, where=f"{where}: result") if spec.result else None
                ),
                backend=spec.backend.value,
            )
        with self._lock:
            if not replace:
                for name in entries:
                    if name in self._tools:
                        raise ManifestError(f"tool {name!r} is already registered", field="name")
            for name, entry in entries.items():
                self._tools[name] = entry
                self._stats.setdefault(name, ToolStats())
        if entries:
            self._changed()

    def unregister(self, name: str) -> ToolSpec:
        with self._lock:
            entry = self._tools.pop(name, None)
        if entry is None:
            raise ToolNotFound(f"no tool named {name!r}", tool=name)
        self._changed()
        return entry.spec

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every change; returns the call that stops it."""
        token = object()
        with self._lock:
            self._listeners[token] = listener

        def stop() -> None:
            with self._lock:
                self._listeners.pop(token, None)

        return stop

    def _changed(self) -> None:
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            listener()

    # -- lookup -------------------------------------------------------------------------------
    def get(self, name: str) -> ToolSpec:
        return self._entry(name).spec

    def entry(self, name: str) -> CatalogueEntry:
        """The spec, validators and backend name of ``name`` in one lookup (the broker's)."""
        return self._entry(name)

    def _entry(self, name: str) -> CatalogueEntry:
        entry = self._tools.get(name)
        if entry is None:
            raise ToolNotFound(f"no tool named {name!r}", tool=name)
        return entry

    def argument_validator(self, name: str) -> SchemaValidator:
        return self._entry(name).args

    def result_validator(self, name: str) -> SchemaValidator | None:
        return self._entry(name).result

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def list(self) -> builtins.list[ToolSpec]:
        return [self._tools[n].spec for n in sorted(self._tools)]

    def list_by_category(self, category: str) -> builtins.list[ToolSpec]:
        return [s for s in self.list() if s.category == category]

    def categories(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for spec in self.list():
            out[spec.category] = out.get(spec.category, 0) + 1
        return dict(sorted(out.items()))

    # -- statistics ---------------------------------------------------------------------------
    def record_call(self, name: str, *, success: bool, duration_ms: float) -> None:
        with self._lock:
            stats = self._stats.get(name)
            if stats is None:  # not setdefault: that builds a ToolStats on every call
                stats = self._stats[name] = ToolStats()
            stats.count += 1
            stats.failures += 0 if success else 1
            stats.total_ms += duration_ms

    def stats(self) -> dict[str, Any]:
        with self._lock:
            calls = {n: s.as_dict() for n, s in sorted(self._stats.items()) if s.count}
        return {"total": len(self._tools), "by_category": self.categories(), "calls": calls}

    # -- export -------------------------------------------------------------------------------
    def export(
        self, fmt: ExportFormat = "native", names: Iterable[str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        specs = self.list() if names is None else [self.get(n) for n in names]
        return [export_tool(s, fmt) for s in specs]
