"""Loading tool manifests (``*.json``) from folders.

A manifest folder holds one JSON file per tool (a :class:`~runtime.models.ToolSpec`) and the
implementation modules its ``entry`` names. Folders are searched recursively; a file that is
not a valid manifest is an error naming the file and field, never skipped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.catalogue._wasm_ref import module_path
from runtime.errors import ManifestError
from runtime.models import BackendKind, Limits, ToolSpec
from runtime.toolkit import is_builtin
from runtime.validation import check_schema

__all__ = ["iter_manifest_files", "load_manifest", "load_manifests"]

_MAX_MANIFEST_BYTES = 1_048_576


def iter_manifest_files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        raise ManifestError(f"tool folder {folder} does not exist", file=str(folder))
    for path in sorted(folder.rglob("*.json")):
        # Hidden folders, caches and the schema files of the catalogue itself are not tools.
        rel = path.relative_to(folder)
        if any(part.startswith((".", "_")) for part in rel.parts) or path.name.endswith(
            ".schema.json"
        ):
            continue
        yield path


def _check_top_level(parameters: dict[str, Any], path: Path) -> None:
    """ManifestError for a keyword of :data:`_TOP_LEVEL_REFUSED` at the top of
    ``parameters``: exported as is (``runtime tools --format openai|anthropic``, MCP's
    inputSchema), it made the provider refuse every request that listed the tool. A
    constraint across arguments belongs in the tool's own check, or in a property."""
    for key in _TOP_LEVEL_REFUSED:
        if key in parameters:
            raise ManifestError(
                f"{path}: parameters.{key}: '{key}' at the top level of parameters is "
                "refused: the OpenAI and Anthropic APIs reject any request listing a tool "
                "whose parameters have anyOf, oneOf, allOf (OpenAI also enum, not) at the "
                "top level; put the constraint inside a property, or check it in the tool",
                file=str(path),
                field=f"parameters.{key}",
            )


def load_manifest(path: Path) -> ToolSpec:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(
            f"{path}: cannot read manifest: {exc.strerror}", file=str(path)
        ) from exc
    if len(raw) > _MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path}: manifest larger than 1 MiB", file=str(path))
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not valid JSON: {exc}", file=str(path)) from exc
    except RecursionError:
        raise ManifestError(f"{path}: not valid JSON: nested too deeply", file=str(path)) from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: a manifest must be a JSON object", file=str(path))
    try:
        spec = ToolSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(root)"
        raise ManifestError(
            f"{path}: field {field}: {err['msg']}", file=str(path), field=field
        ) from exc
    spec.source = path
    _check_spec(spec, path)
    return spec


#: Keywords the model providers refuse at the top of a tool's parameters: OpenAI (chat and
#: Responses) all five, Anthropic the first three ("input_schema does not support oneOf,
#: allOf, or anyOf at the top level"). Either rejects the whole request that lists such a
#: tool, every other tool with it, so the catalogue refuses it when it loads.
_TOP_LEVEL_REFUSED = ("anyOf", "oneOf", "allOf", "enum", "not")


def _check_spec(spec: ToolSpec, path: Path) -> None:
    check_schema(spec.parameters, where=f"{path}: parameters")
    if spec.parameters.get("type") != "object":
        raise ManifestError(
            f"{path}: parameters must be a JSON Schema of type 'object'",
            file=str(path),
            field="parameters.type",
        )
    _check_top_level(spec.parameters, path)
    if spec.result is not None:
        check_schema(spec.result, where=f"{path}: result")
    if spec.command is not None:
        from runtime.command_tool import ENTRY, check_template

        check_template(spec.command, spec.parameters, str(path))
        if spec.backend is not BackendKind.SUBPROCESS or not spec.sandbox.exec:
            raise ManifestError(
                f"{path}: a command template runs a program: it needs backend 'subprocess' "
                "and sandbox.exec = true",
                file=str(path),
                field="command",
            )
        if spec.entry is None:
            spec.entry = ENTRY
        elif spec.entry != ENTRY:
            raise ManifestError(
                f"{path}: give either 'entry' or 'command', not both",
                file=str(path),
                field="entry",
            )
    if spec.backend in (BackendKind.SUBPROCESS, BackendKind.HOST):
        if spec.entry is None and spec.command is None:
            raise ManifestError(
                f"{path}: a {spec.backend.value} tool needs 'entry' or 'command'",
                file=str(path),
                field="entry",
            )
        if spec.command is not None and spec.backend is BackendKind.HOST:
            raise ManifestError(
                f"{path}: command templates run in the sandbox (backend 'subprocess')",
                file=str(path),
                field="command",
            )
    if spec.backend is BackendKind.WASM and not spec.wasm:
        raise ManifestError(f"{path}: a wasm tool needs 'wasm'", file=str(path), field="wasm")
    if spec.backend is BackendKind.WASM:
        _check_custom_module(spec, path)
    _check_limits(spec, path)
    for arg in spec.arg_roles:
        if arg not in spec.parameters.get("properties", {}):
            raise ManifestError(
                f"{path}: arg_roles names {arg!r}, which is not a parameter",
                file=str(path),
                field=f"arg_roles.{arg}",
            )


def _check_limits(spec: ToolSpec, path: Path) -> None:
    """A manifest's ``limits`` are the policy's limit fields (``runtime.models.Limits``),
    each of its type (no "64" for 64, no true for 1) and within its bounds. An unknown key
    (a typo: ``memory``) or a bad value was loaded and then ignored, the tool running with
    the default limits, or failed every call as internal_error."""
    fields = Limits.model_fields
    for name in spec.limits:
        if name not in fields:
            raise ManifestError(
                f"{path}: field limits.{name}: not a limit (one of {', '.join(fields)})",
                file=str(path),
                field=f"limits.{name}",
            )
    try:
        Limits.model_validate({**Limits().model_dump(), **spec.limits}, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(["limits", *(str(p) for p in err["loc"])])
        raise ManifestError(
            f"{path}: field {field}: {err['msg']}", file=str(path), field=field
        ) from exc


def _check_custom_module(spec: ToolSpec, path: Path) -> None:
    """A custom wasm tool's module is read, checked against its sha256 pin (required) and
    compiled and checked as a call would (no imports, the guest ABI's exports, the tool's
    export, what the engine can instantiate) when the manifest loads (issue #5: "pins the
    module's sha256, checked at load"): a module no call could run was found only by each
    call, as internal_error, while `runtime tools` listed the tool. Every call still checks
    again (the file may change after loading). A manifest elsewhere naming a built-in guest
    is checked too (its export, any pin; its name alone where the guests cannot be built on
    this machine, whose calls then fail as sandbox_error); the built-in catalogue's own
    manifests cost nothing here: not even the wasm backend's import (wasmtime, ~25 ms a
    process)."""
    try:
        if module_path(spec) is not None or not is_builtin(spec):
            from runtime.backends.wasm.backend import check_custom_module

            check_custom_module(spec)
    except ManifestError as exc:
        # The module's own details (the actual sha256 to pin, the field at fault) are kept.
        details = {"field": "wasm.module", **exc.details, "file": str(path)}
        raise ManifestError(f"{path}: {exc}", **details) from exc


def load_manifests(folders: Iterable[Path]) -> list[ToolSpec]:
    specs: list[ToolSpec] = []
    seen: dict[str, Path] = {}
    for folder in folders:
        for path in iter_manifest_files(Path(folder)):
            spec = load_manifest(path)
            if spec.name in seen:
                raise ManifestError(
                    f"{path}: tool {spec.name!r} is already defined in {seen[spec.name]}",
                    file=str(path),
                    field="name",
                )
            seen[spec.name] = path
            specs.append(spec)
    return specs
