"""The CLI contract of DESIGN §7, run as a real subprocess (stdout is a pipe there, so the
result is always JSON)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests._cli_run import run_runtime

ROOT = Path(__file__).resolve().parents[2]


def run(
    *args: str | bytes, cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_runtime(*args, cwd=cwd, timeout=120, stdin=stdin)


def result_of(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


@pytest.mark.wasm
def test_exec_json_parse_example_mcp_shape(tmp_path: Path) -> None:
    proc = run("exec", str(ROOT / "examples/json_parse.mcp.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    res = result_of(proc)
    assert res["success"] is True
    assert res["result"]["data"] == {"answer": 42, "list": [1, 2, 3]}
    assert res["backend"] == "wasm"
    assert set(res) >= {
        "call_id",
        "tool",
        "success",
        "result",
        "error",
        "started_at",
        "completed_at",
        "duration_ms",
        "backend",
        "usage",
        "decision",
    }
    assert (tmp_path / "workspace").is_dir()  # the default workspace


def test_exec_denied_exits_77(tmp_path: Path) -> None:
    proc = run("exec", str(ROOT / "examples/denied.json"), cwd=tmp_path)
    assert proc.returncode == 77
    res = result_of(proc)
    assert res["error"]["type"] == "policy_denied"
    assert res["decision"]["action"] == "deny"


@pytest.mark.parametrize(
    ("call", "code", "etype"),
    [
        ('{"tool": "no_such_tool", "arguments": {}}', 65, "tool_not_found"),
        ('{"tool": "json_parse", "arguments": {"text": 5}}', 65, "invalid_arguments"),
        (
            '{"type": "function", "function": {"name": "json_parse", "arguments": "{"}}',
            65,
            "invalid_arguments",
        ),
        ("not json at all", 65, "invalid_arguments"),
        # Beyond what msgpack frames carry to the sandbox: refused before the backend (it
        # was an OverflowError in the frame encoder, internal_error, exit 70).
        (
            '{"tool": "read_file", "arguments": {"path": "a.txt", "offset": 1' + "0" * 29 + "}}",
            65,
            "invalid_arguments",
        ),
        ('{"tool": "http_get", "arguments": {"url": "https://example.com/"}}', 77, "policy_denied"),
    ],
)
def test_exec_stdin_error_codes(tmp_path: Path, call: str, code: int, etype: str) -> None:
    proc = run("exec", "-", "--workspace", str(tmp_path / "ws"), cwd=tmp_path, stdin=call)
    assert proc.returncode == code, proc.stderr
    assert result_of(proc)["error"]["type"] == etype


@pytest.mark.wasm
def test_exec_tool_failure_exits_1(tmp_path: Path) -> None:
    call = '{"tool": "json_parse", "arguments": {"text": "{broken"}}'
    proc = run("exec", "-", cwd=tmp_path, stdin=call)
    assert proc.returncode == 1
    assert result_of(proc)["error"]["type"] == "tool_error"


def test_usage_errors_exit_64(tmp_path: Path) -> None:
    assert run("exec", cwd=tmp_path).returncode == 64
    assert run("no-such-command", cwd=tmp_path).returncode == 64
    assert run("exec", str(tmp_path / "missing.json"), cwd=tmp_path).returncode == 64
    assert run("tools", "--format", "yaml", cwd=tmp_path).returncode == 64


def test_bad_policy_file_names_file_line_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('version = 1\ndefault = "deny"\n\n[limits]\ntimeout_s = "soon"\n')
    proc = run("exec", "-", "--policy", str(bad), cwd=tmp_path, stdin='{"tool": "x"}')
    assert proc.returncode == 64
    assert "bad.toml" in proc.stderr and "timeout_s" in proc.stderr


@pytest.mark.parametrize("fmt", ["native", "openai", "openai-responses", "anthropic", "mcp"])
def test_tools_formats(tmp_path: Path, fmt: str) -> None:
    proc = run("tools", "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    names = {t.get("name") or t.get("function", {}).get("name") for t in tools}
    assert {"read_file", "shell_exec", "json_parse", "http_get", "snippet_save"} <= names


def test_policy_check_prints_decision(tmp_path: Path) -> None:
    call = tmp_path / "call.json"
    call.write_text('{"tool": "shell_exec", "arguments": {"command": "sudo rm -rf /"}}')
    proc = run("policy", "check", str(ROOT / "policy/default.toml"), str(call), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["action"] == "deny" and out["rule"].startswith("commands.deny")
    assert out["reasons"]


def test_policy_check_rechecks_examples_with_the_folder_tools(tmp_path: Path) -> None:
    """An [[example]] naming a folder tool is decided at load with an invented spec (no
    argument roles): 'policy check --tools-dir' now checks it again with the real manifest,
    as exec does, instead of printing decisions of a policy exec refuses."""
    folder = tmp_path / "tools"
    folder.mkdir()
    manifest = {
        "name": "catf",
        "description": "cat a file",
        "category": "custom",
        "parameters": {
            "type": "object",
            "properties": {"file": {"type": "string"}},
            "required": ["file"],
            "additionalProperties": False,
        },
        "backend": "subprocess",
        "command": ["cat", "--", "{file}"],
        "arg_roles": {"file": "read_path"},
        "sandbox": {"exec": True},
    }
    (folder / "catf.json").write_text(json.dumps(manifest))
    policy = tmp_path / "p.toml"
    policy.write_text(
        'version = 1\n[tools]\ncatf = "allow"\n[paths]\ndeny = ["**/.env"]\n'
        '[[examples]]\ntool = "catf"\narguments = { file = ".env" }\nmatch = "allow"\n'
    )
    call = tmp_path / "call.json"
    call.write_text('{"tool": "catf", "arguments": {"file": "x"}}')
    args = ("policy", "check", str(policy), str(call), "--tools-dir", str(folder))
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 64, proc.stdout
    err = json.loads(proc.stdout)["error"]
    assert (err["type"], err["line"], err["decision"]["rule"]) == (
        "config_error",
        6,
        "paths.deny",
    )


@pytest.mark.wasm
def test_audit_verify_tail_export(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    for call in ('{"tool": "json_parse", "arguments": {"text": "[1]"}}', '{"tool": "nope"}'):
        run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=call)
    proc = run("audit", "verify", "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    verified = json.loads(proc.stdout)
    assert verified == {
        "ok": True,
        "records": 4,
        "first_bad": None,
        "reason": verified["reason"],
        "interrupted": [],
        "pending": 0,
        "head": verified["head"],
    }
    # The head is the anchor to keep elsewhere; passed back, it pins the chain up to it.
    head = verified["head"]
    assert head.startswith("4:") and len(head) == 66
    pinned = run("audit", "verify", "--audit", str(audit), "--expect-head", head, cwd=tmp_path)
    assert pinned.returncode == 0, pinned.stdout
    ahead = run(
        "audit", "verify", "--audit", str(audit), "--expect-head", "9" + head[1:], cwd=tmp_path
    )
    assert ahead.returncode == 1 and "truncated" in json.loads(ahead.stdout)["reason"]
    other = run(
        "audit", "verify", "--audit", str(audit), "--expect-head", "4:" + "a" * 64, cwd=tmp_path
    )
    assert other.returncode == 1 and "rewritten" in json.loads(other.stdout)["reason"]
    bad = run("audit", "verify", "--audit", str(audit), "--expect-head", "junk", cwd=tmp_path)
    assert bad.returncode == 64 and "SEQ:HASH" in bad.stderr
    tail = run("audit", "tail", "-n", "2", "--audit", str(audit), cwd=tmp_path)
    assert [json.loads(line)["kind"] for line in tail.stdout.splitlines()] == [
        "request",
        "completion",
    ]
    export = run("audit", "export", "--jsonl", "--audit", str(audit), cwd=tmp_path)
    first = json.loads(export.stdout.splitlines()[0])
    assert first["gen_ai.operation.name"] == "execute_tool"
    assert first["gen_ai.tool.name"] == "json_parse"
    # tamper: verify names the record and fails
    import sqlite3

    with sqlite3.connect(audit) as db:
        triggers = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
        for name in triggers:
            db.execute(f"DROP TRIGGER {name}")
        db.execute("UPDATE audit_records SET tool = 'evil' WHERE seq = 2")
    proc = run("audit", "verify", "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["first_bad"] == 2


def test_audit_tail_and_export_are_one_line_a_record(tmp_path: Path) -> None:
    """U+2028/U+2029/U+0085 in a call's arguments stay inside their JSON line."""
    audit = tmp_path / "audit.db"
    call = {"tool": "json_parse", "arguments": {"text": '["x\u2028y\u2029z\u0085"]'}}
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=json.dumps(call))
    for command in (("tail", "-n", "5"), ("export", "--jsonl")):
        proc = run("audit", *command, "--audit", str(audit), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert len(lines) == 2, lines
        assert json.loads(lines[0])["arguments"] == call["arguments"]


def test_doctor_reports_mechanisms(tmp_path: Path) -> None:
    proc = run("doctor", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    sandbox = out["sandbox"]
    for key in ("user_namespaces", "landlock_abi", "seccomp", "cgroup_version", "cgroup_writable"):
        assert key in sandbox
    assert out["wasm"]["available"] is True
    assert out["strict_mode"] in ("ok", "strict mode will refuse to run")
    # External MCP servers: strict start-up follows the same host mechanisms.
    assert (out["mcp_servers"]["strict"] == "ok") == (out["strict_mode"] == "ok")


def test_doctor_says_which_limits_bound_each_process_only(tmp_path: Path) -> None:
    """Strict mode runs without cgroups (an ordinary user without delegated ones): doctor
    said "ok" and not that memory_mb then bounds each process, not the call."""
    out = json.loads(run("doctor", cwd=tmp_path).stdout)
    writable = out["sandbox"]["cgroup_writable"]
    limits = out["limits"]
    assert "cpu_s" in limits["per_process_only"]  # RLIMIT_CPU, everywhere
    assert ("memory_mb" in limits["per_process_only"]) == ("memory" not in writable)
    assert "pids" not in limits["per_process_only"]  # the call's own user namespace
    assert {"cpu_s", "memory_mb", "pids"} <= set(limits)
    assert "memory_mb" in out["mcp_servers"]["per_process_only"] or writable


def _caps(writable: tuple[str, ...], userns: bool = True) -> Any:
    from runtime.backends.sandbox import HostCapabilities

    return HostCapabilities(
        arch_supported=True,
        is_root=False,
        user_namespaces=userns,
        user_namespaces_error=None if userns else "EPERM",
        pivot_root=userns,
        idmapped_mounts=False,
        landlock_abi=7,
        seccomp=True,
        seccomp_filter=True,
        cgroup_version=1,
        cgroup_writable=writable,
    )


def test_limit_scopes_follow_the_cgroups_this_user_may_write() -> None:
    from runtime.backends.sandbox.probe import limit_scopes

    with_cgroups = limit_scopes(_caps(("memory", "pids")))
    assert with_cgroups["per_process_only"] == ["cpu_s"]
    assert "pids_limit_hits" in with_cgroups["pids"]
    without = limit_scopes(_caps(()))
    assert without["per_process_only"] == ["cpu_s", "memory_mb"]
    assert "each process only" in without["memory_mb"]
    assert "not counted" in without["pids"]
    # A long-lived server uses them only when the broker is root.
    assert limit_scopes(_caps(("memory", "pids")), cgroups=False)["per_process_only"] == [
        "cpu_s",
        "memory_mb",
    ]
    # Without a user namespace (best_effort) RLIMIT_NPROC counts the uid on the whole host.
    assert "pids" in limit_scopes(_caps((), userns=False))["per_process_only"]
