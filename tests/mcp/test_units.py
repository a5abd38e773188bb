"""Small pieces of the MCP layer: exports, result mapping, addresses, the launcher, the CLI."""

from __future__ import annotations

import importlib
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ConfigError, ErrorType, SandboxUnavailable
from runtime.mcp import call_result
from runtime.mcp import launch as launch_mod
from runtime.mcp.external import ExternalServer
from runtime.mcp.transport import parse_host_port
from runtime.models import ErrorInfo, ToolResult

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "module",
    [
        "runtime.mcp",
        "runtime.mcp.server",
        "runtime.mcp.external",
        "runtime.mcp.launch",
        "runtime.mcp.transport",
        "runtime.mcp.app",
        "runtime.backends.mcp_proxy",
        "runtime.adapters",
    ],
)
def test_exports_sorted_and_defined(module: str) -> None:
    mod = importlib.import_module(module)
    names = list(mod.__all__)

    # isort style (ruff RUF022), as runtime.models: CONSTANTS, then Classes, then functions
    def key(n: str) -> tuple[int, str]:
        return (0 if n.isupper() else 1 if n[0].isupper() else 2, n)

    assert names == sorted(names, key=key)
    for name in names:
        assert hasattr(mod, name), name


def result(value: Any = None, error: ErrorInfo | None = None) -> ToolResult:
    now = datetime.now(UTC)
    return ToolResult(
        call_id="c",
        tool="t",
        success=error is None,
        result=value,
        error=error,
        started_at=now,
        completed_at=now,
        duration_ms=0.0,
    )


def test_call_result_object() -> None:
    out = call_result(result({"a": 1}))
    assert out.is_error is False
    assert out.structured_content == {"a": 1}


@pytest.mark.parametrize("value", [[1, 2], "text", 3, None])
def test_call_result_non_object_is_wrapped(value: Any) -> None:
    out = call_result(result(value))
    assert out.structured_content == {"result": value}


def test_call_result_error() -> None:
    err = ErrorInfo(type=ErrorType.TIMEOUT, message="slow", details={"limit_s": 1})
    out = call_result(result(error=err))
    assert out.is_error is True
    assert out.structured_content == {
        "error": {"type": "timeout", "message": "slow", "details": {"limit_s": 1}},
        "call_id": "c",
        "tool": "t",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("localhost:8080", ("localhost", 8080)),
        ("[::1]:9", ("::1", 9)),
    ],
)
def test_host_port(value: str, expected: tuple[str, int]) -> None:
    assert parse_host_port(value) == expected


@pytest.mark.parametrize("value", ["8080", ":80", "host:", "host:99999", "host:x"])
def test_host_port_errors(value: str) -> None:
    with pytest.raises(ConfigError):
        parse_host_port(value)


def _caps(**kw: Any) -> Any:
    from runtime.backends.sandbox.probe import HostCapabilities

    data: dict[str, Any] = {
        "arch_supported": True,
        "is_root": False,
        "user_namespaces": True,
        "user_namespaces_error": None,
        "pivot_root": True,
        "idmapped_mounts": False,
        "landlock_abi": 7,
        "seccomp": True,
        "seccomp_filter": True,
        "cgroup_version": 1,
        "cgroup_writable": (),
    }
    data.update(kw)
    return HostCapabilities(**data)


def _fake_host(monkeypatch: pytest.MonkeyPatch, **kw: Any) -> None:
    from runtime.backends.sandbox import process

    monkeypatch.setattr(process, "host_capabilities", lambda: _caps(**kw))
    monkeypatch.setattr(launch_mod, "host_capabilities", lambda: _caps(**kw))
    launch_mod.isolation_available.cache_clear()
    uncached = launch_mod.isolation_available.__wrapped__
    monkeypatch.setattr(launch_mod, "isolation_available", uncached)


def test_strict_mode_refuses_without_isolation(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ExternalServer(name="x", command=["/bin/true"])
    _fake_host(monkeypatch, user_namespaces=False, user_namespaces_error="unshare: EPERM")
    assert "userns" in (launch_mod.isolation_available() or "")
    with pytest.raises(SandboxUnavailable) as info:
        launch_mod.launch_for(server, mode="strict")
    assert info.value.details["server"] == "x"
    plain = launch_mod.launch_for(server, mode="best_effort")
    assert plain.plan is not None
    scratch = plain.plan.scratch
    try:
        # Without user namespaces: a private host scratch, Landlock and seccomp only.
        assert scratch is not None and scratch.is_dir()
        fp = plain.fingerprint
        assert fp.backend == "mcp" and fp.mode == "best_effort"
        assert {"userns", "mountns", "pidns", "netns"} <= set(fp.missing)
        assert {"landlock", "seccomp", "no_new_privs"} <= set(fp.mechanisms)
    finally:
        plain.cleanup()
    assert not scratch.exists()


def test_strict_mode_needs_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    server = ExternalServer(name="x", command=["/bin/true"])
    _fake_host(monkeypatch, landlock_abi=0)
    with pytest.raises(SandboxUnavailable):
        launch_mod.launch_for(server, mode="strict")
    partial = launch_mod.launch_for(server, mode="best_effort")
    partial.cleanup()
    assert "landlock" in partial.fingerprint.missing
    assert "userns" in partial.fingerprint.mechanisms


def test_isolated_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from runtime.backends.sandbox._launcher import SPEC_ENV

    _fake_host(monkeypatch)
    server = ExternalServer(name="x", command=["srv", "--flag"], env={"A": "1"}, pids=7)
    launch = launch_mod.launch_for(server, mode="strict")
    networked = launch_mod.launch_for(server.model_copy(update={"network": True}), mode="strict")
    try:
        # The launcher runs isolated from the broker's site-packages and environment.
        assert launch.argv[0] == sys.executable and launch.argv[1:3] == ["-I", "-S"]
        assert set(launch.env) == {SPEC_ENV, "PATH", "LANG"}
        spec = json.loads(launch.env[SPEC_ENV])
        assert spec["argv"] == ["srv", "--flag"] and spec["limits"]["pids"] == 7
        assert spec["env"]["A"] == "1" and spec["env"]["HOME"] == spec["env"]["TMPDIR"] == "/tmp"
        assert spec["userns"] is True and spec["network"] is False and spec["bpf"]
        assert "netns" in launch.fingerprint.mechanisms
        assert json.loads(networked.env[SPEC_ENV])["network"] is True
        assert "netns" not in networked.fingerprint.mechanisms
        assert "netns" not in networked.fingerprint.missing  # granted, not missing
    finally:
        launch.cleanup()
        networked.cleanup()


@pytest.mark.parametrize(
    "args",
    [
        ["serve"],
        ["serve", "--mcp", "--http", "nonsense"],
        ["serve", "--mcp", "--http", "0.0.0.0:0"],  # no authentication: loopback only
        # an Origin no browser can send (unbracketed IPv6), as --allowed-host refuses it
        ["serve", "--mcp", "--http", "127.0.0.1:0", "--allowed-origin", "http://::1"],
    ],
)
def test_serve_usage_errors(args: list[str], tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "runtime", *args, "--workspace", str(tmp_path / "ws")]
        if len(args) > 1
        else [sys.executable, "-m", "runtime", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 64, done.stderr
    assert done.stdout == ""


def test_dns_rebinding_protection(http_fixture_server: Any) -> None:
    import httpx

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Host": "evil.example", "Accept": "application/json, text/event-stream"}
    response = httpx.post(http_fixture_server.url, json=body, headers=headers, timeout=10)
    assert response.status_code in (403, 421)


def test_serve_bad_policy_is_a_usage_error(tmp_path: Path) -> None:
    pytest.importorskip("runtime.policy")
    from tests.mcp.conftest import serve_mcp_argv

    policy = tmp_path / "p.toml"
    policy.write_text('version = 1\n[categories]\nfile = "perhaps"\n')
    done = subprocess.run(
        serve_mcp_argv("--policy", str(policy), "--workspace", str(tmp_path / "ws")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 64
    assert "categories.file" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/x", "params": None},
        {"jsonrpc": "2.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": 0, "error": {"code": -1, "message": "no"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "no"}},
    ],
)
def test_every_jsonrpc_message_passes_the_envelope_check(message: dict[str, Any]) -> None:
    # Benign control of the transports' Invalid Request answers (test_http_guard,
    # test_stdio_unreadable): what the SDK reads is never refused here.
    import mcp_types as types

    from runtime.mcp._jsonrpc import invalid_request

    types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    assert invalid_request(message, unit="line") is None


def test_a_line_whose_every_field_is_wrong_is_still_answered() -> None:
    # The SDK's errors then carry no decoded line (each is at a field): the answer is a
    # plain Invalid Request rather than none.
    import mcp_types as types
    from pydantic import ValidationError

    from runtime.mcp._jsonrpc import answer_refused

    line = '{"jsonrpc":"2.0","id":5,"method":"ping","params":3,"result":1,"error":2}'
    with pytest.raises(ValidationError) as caught:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    answer = answer_refused(caught.value)
    assert answer is not None and isinstance(answer.message, types.JSONRPCError)
    assert answer.message.id is None and answer.message.error.code == -32600
