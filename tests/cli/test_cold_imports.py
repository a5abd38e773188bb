"""What a cold ``runtime`` process imports: the costly modules only on the paths that use
them (benchmarks/bench_cold_start.py measures the time; these check the imports)."""

from __future__ import annotations

import json
from pathlib import Path

from tests._pythonpath import run_python


def _loaded(code: str, modules: tuple[str, ...]) -> dict[str, bool]:
    script = (
        "import json, sys\n"
        f"{code}\n"
        f"print(json.dumps({{m: m in sys.modules for m in {modules!r}}}))\n"
    )
    done = run_python(script)
    result: dict[str, bool] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


_WASM = ("wasmtime", "runtime.backends.wasm.backend")


def test_loading_the_builtin_catalogue_does_not_import_wasmtime() -> None:
    loaded = _loaded("from runtime.catalogue import Catalogue\nCatalogue()", _WASM)
    assert loaded == {"wasmtime": False, "runtime.backends.wasm.backend": False}


def test_a_custom_wasm_module_is_still_checked_at_load(tmp_path: Path) -> None:
    """The import skipped for built-in guest names is still made for a module file."""
    manifest = {
        "name": "custom_guest",
        "description": "a custom guest",
        "category": "data",
        "backend": "wasm",
        "wasm": {"module": "guest.wasm", "sha256": "0" * 64},
        "parameters": {"type": "object", "properties": {}},
    }
    (tmp_path / "custom_guest.json").write_text(json.dumps(manifest))
    (tmp_path / "guest.wasm").write_bytes(b"\0asm\x01\0\0\0")
    code = (
        "from pathlib import Path\n"
        "from runtime.catalogue import Catalogue\n"
        "from runtime.errors import ManifestError\n"
        "try:\n"
        f"    Catalogue(folders=[Path({str(tmp_path)!r})])\n"
        "except ManifestError as exc:\n"
        "    assert 'sha256' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('a mis-pinned module loaded')\n"
    )
    assert _loaded(code, _WASM)["runtime.backends.wasm.backend"] is True


def test_serving_mcp_without_external_servers_does_not_import_the_proxy(tmp_path: Path) -> None:
    """``runtime serve --mcp`` on a policy without [[mcp_servers]]: no mcp backend, no HTTP
    client or egress gateway before it answers (they come with the first call that needs
    them)."""
    code = (
        "import anyio\n"
        "from runtime.mcp import app\n"
        "seen = {}\n"
        "async def fake_stdio(server):\n"
        "    seen.update({m: m in sys.modules for m in "
        "('runtime.backends.mcp_proxy', 'runtime.egress')})\n"
        "app.serve_stdio = fake_stdio\n"
        f"anyio.run(lambda: app.serve(workspace={str(tmp_path / 'ws')!r}))\n"
        "assert seen == {'runtime.backends.mcp_proxy': False, 'runtime.egress': False}, seen\n"
    )
    _loaded(code, ())


_HEAVY = ("runtime.policy", "runtime.audit", "runtime.broker", "bashlex", "wasmtime")


def test_importing_the_package_loads_no_layer() -> None:
    assert _loaded("import runtime", _HEAVY) == dict.fromkeys(_HEAVY, False)


def test_runtime_tools_loads_no_policy_audit_or_broker() -> None:
    code = (
        "import contextlib, io\n"
        "from runtime.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert main(['tools']) == 0\n"
        "assert json.loads(out.getvalue())\n"
    )
    assert _loaded(code, _HEAVY) == dict.fromkeys(_HEAVY, False)


def test_lazily_imported_names_resolve_to_their_modules_objects() -> None:
    import importlib

    import runtime

    for name, module in runtime._LAZY.items():
        assert name in runtime.__all__
        assert getattr(runtime, name) is getattr(importlib.import_module(module), name)
    assert set(runtime.__all__) <= set(dir(runtime))
    # Sub-packages are still attributes after a bare 'import runtime'.
    code = "import runtime\nassert runtime.policy.Policy is runtime.Policy\n"
    assert _loaded(code, ("runtime.policy",)) == {"runtime.policy": True}
    try:
        runtime.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
