"""The public surface and the built-in manifests."""

from __future__ import annotations

import json

import jsonschema_rs
import pytest

import runtime.backends.wasm
from runtime.backends.wasm import WasmBackend
from runtime.models import BackendKind, ToolSpec

from .conftest import DATA_TOOLS, call, spec_of

pytestmark = pytest.mark.wasm

EXAMPLES = {
    "json_parse": {"text": "[1]"},
    "json_stringify": {"data": {"a": 1}, "pretty": True},
    "json_query": {"data": {"a": 1}, "pointer": "/a"},
    "base64_encode": {"text": "hi"},
    "base64_decode": {"encoded": "aGk="},
    "hash": {"text": "hi", "algorithm": "md5"},
    "csv_to_json": {"text": "a\n1", "delimiter": ","},
    "regex_match": {"pattern": "b+", "text": "abbc"},
}


def test_exported_members_sorted_and_public() -> None:
    names = runtime.backends.wasm.__all__
    assert names == sorted(names)
    for name in names:
        assert not name.startswith("_")
        assert hasattr(runtime.backends.wasm, name)


def test_manifests_cover_the_tools() -> None:
    assert {p.stem for p in DATA_TOOLS.glob("*.json")} == set(EXAMPLES)


@pytest.mark.parametrize("tool", sorted(EXAMPLES))
def test_manifest_is_valid_and_runs(backend: WasmBackend, tool: str) -> None:
    raw = json.loads((DATA_TOOLS / f"{tool}.json").read_text())
    spec = ToolSpec.model_validate(raw)
    assert spec.name == tool
    assert spec.backend is BackendKind.WASM
    assert spec.category == "data"
    assert spec.hints.read_only and spec.hints.idempotent
    assert spec.result is not None
    jsonschema_rs.Draft202012Validator(spec.parameters).validate(EXAMPLES[tool])
    result = call(backend, tool, EXAMPLES[tool])
    jsonschema_rs.Draft202012Validator(spec.result).validate(result)


def test_spec_of_sets_source() -> None:
    assert spec_of("hash").source == DATA_TOOLS / "hash.json"


def test_backend_protocol(backend: WasmBackend) -> None:
    from runtime.backends.base import Backend

    assert isinstance(backend, Backend)
    assert backend.name == "wasm"
    assert backend.sync_capable is True
    assert backend.fingerprint().as_dict()["mechanisms"][:3] == [
        "wasmtime",
        "fuel",
        "epoch_deadline",
    ]
