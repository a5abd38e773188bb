"""WasmBackend's per-tool memo of built-in guests (``_hot``): a tool whose spec is the one
already seen skips load(); another spec of the same name (a different pin, export or module)
is checked afresh; custom modules are never memoised (their file is re-checked per call)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.backends.wasm import WasmBackend
from runtime.errors import SandboxError

from .conftest import ECHO_WAT, request, spec_of, wat_tool


def test_same_spec_is_served_from_the_memo(backend: WasmBackend) -> None:
    spec = spec_of("json_parse")
    first = backend.run_sync(request(spec, {"text": "[1]"})).result
    hot = backend._hot[spec.name]
    assert hot[0] is spec
    assert backend.run_sync(request(spec, {"text": "[1]"})).result == first
    assert backend._hot[spec.name] is hot


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("sha256", "0" * 64, "does not match its sha256 pin"),
        ("export", "no_such_export", "exports no function"),
        ("module", "no_such_guest", "no built-in wasm guest"),
    ],
)
def test_another_spec_of_the_same_name_is_checked_again(
    backend: WasmBackend, field: str, value: str, message: str
) -> None:
    good = spec_of("json_parse")
    backend.run_sync(request(good, {"text": "[1]"}))
    assert backend._hot[good.name][0] is good
    bad = spec_of("json_parse")
    assert bad.wasm is not None
    bad.wasm = {**bad.wasm, field: value}
    with pytest.raises(SandboxError, match=message):
        backend.run_sync(request(bad, {"text": "[1]"}))
    # The good spec still runs, from its memo or afresh.
    assert backend.run_sync(request(good, {"text": "[1]"})).result is not None


def test_custom_modules_are_not_memoised(backend: WasmBackend, tmp_path: Path) -> None:
    spec = wat_tool(tmp_path, "echo_hot", ECHO_WAT)
    assert backend.run_sync(request(spec, {})).result == {"ok": True}
    assert "echo_hot" not in backend._hot
    # The file is still checked on every call: gone, the call fails.
    (tmp_path / "echo_hot.wasm").unlink()
    with pytest.raises(SandboxError, match="missing"):
        backend.run_sync(request(spec, {}))
