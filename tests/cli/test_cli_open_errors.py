"""What the CLI prints when its workspace or audit log cannot be opened: one line naming
the path and the reason, and an exit code of DESIGN §7 — not a Python traceback with exit 1
(which reads as "the tool ran and failed")."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests._pythonpath import python_path
from tests.cli.test_cli import ROOT, run

CALL = '{"tool": "no_such_tool", "arguments": {}}'


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("runtime: "), proc.stderr


def test_exec_workspace_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "ws").write_text("not a directory")
    proc = run("exec", "-", "--workspace", "ws", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64
    _no_traceback(proc)
    assert "ws" in proc.stderr and proc.stdout == ""


# A file that is not a SQLite database (a text file named by mistake) and a name that is
# not a file at all (a directory, a FIFO) are the user's to change, a usage error (64), as
# ``audit verify`` already answered (tests/audit/test_audit_log_not_a_file.py). A text file
# was opened by SQLite, which failed (70), after its mode had been tightened to 0600.
@pytest.mark.parametrize(("what", "status"), [("garbage", 64), ("directory", 64)])
def test_exec_audit_log_that_cannot_be_opened(tmp_path: Path, what: str, status: int) -> None:
    audit = tmp_path / "audit.db"
    if what == "garbage":
        audit.write_text("this is not a database\n" * 100)
    else:
        audit.mkdir()
    proc = run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    assert proc.returncode == status
    _no_traceback(proc)
    assert str(audit) in proc.stderr


@pytest.mark.parametrize("command", ["verify", "tail", "export"])
def test_audit_commands_on_a_database_that_cannot_be_opened(tmp_path: Path, command: str) -> None:
    audit = tmp_path / "audit.db"
    audit.write_text("this is not a database\n" * 100)
    proc = run("audit", command, "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 70  # a reader's "not an audit log", as for a foreign database
    _no_traceback(proc)
    assert f"{audit} is not a SQLite database" in proc.stderr


@pytest.mark.parametrize("command", ["tail", "export"])
def test_audit_commands_on_a_record_edited_into_nonsense(tmp_path: Path, command: str) -> None:
    audit = tmp_path / "audit.db"
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    with sqlite3.connect(audit) as db:
        db.execute("DROP TRIGGER audit_records_no_update")
        db.execute("UPDATE audit_records SET kind = 'zzz' WHERE seq = 1")
    proc = run("audit", command, "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 70
    _no_traceback(proc)
    assert "verify" in proc.stderr  # it says what to run next


def test_exec_audit_log_locked_by_another_process(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
            str(audit),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        proc = run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert proc.returncode == 70
    _no_traceback(proc)
    assert "locked" in proc.stderr
    # the lock is gone with the holder: the log still verifies
    assert run("audit", "verify", "--audit", str(audit), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("what", ["bad_manifest", "missing_folder"])
def test_tools_with_a_tools_dir_that_does_not_load(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "mytools"
    if what == "bad_manifest":
        folder.mkdir()
        (folder / "x.json").write_text('{"name": "x"}')
    proc = run("tools", "--tools-dir", str(folder), cwd=tmp_path)
    assert proc.returncode == 64  # like exec and policy check with the same folder
    _no_traceback(proc)
    assert "mytools" in proc.stderr


def test_serve_with_an_audit_log_that_cannot_be_opened(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    audit.write_text("this is not a database\n" * 100)
    proc = run("serve", "--mcp", "--workspace", "ws", "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 64  # not a database: refused unchanged, as by exec
    _no_traceback(proc)
    assert f"{audit} is not a SQLite database" in proc.stderr


def _as_reader_without_write_access(
    directory: Path, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI (in ``cwd``, ``directory`` by default) as a user who can read
    ``directory`` and its files and write none: as root, the unprivileged ``rtsbx`` (as in
    tests/sandbox/test_unprivileged.py); else this user after a chmod (which this user, the
    owner, could undo: the broker counts such a tree as writable by a call)."""
    if os.geteuid() != 0:
        for p in directory.iterdir():
            p.chmod(0o444)
        directory.chmod(0o555)
        return run(*args, cwd=cwd or directory)
    runuser = shutil.which("runuser")
    if runuser is None or subprocess.run(["id", "rtsbx"], capture_output=True).returncode:
        pytest.skip("needs runuser and the user rtsbx to read as someone else")
    site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    probe = subprocess.run([runuser, "-u", "rtsbx", "--", sys.executable, "-c", "pass"])
    python = sys.executable if probe.returncode == 0 else "/usr/bin/python3"
    return subprocess.run(
        [runuser, "-u", "rtsbx", "--", python, "-m", "runtime", *args],
        cwd=cwd or directory,
        env={
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), *site]),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("command", ["verify", "tail", "export"])
def test_audit_commands_by_a_reader_without_write_access(tmp_path: Path, command: str) -> None:
    # Not under tmp_path: pytest makes it private to this user.
    directory = Path(tempfile.mkdtemp(prefix="rt-audit-ro-"))
    try:
        directory.chmod(0o755)
        audit = directory / "audit.db"
        run(
            "exec",
            "-",
            "--workspace",
            str(tmp_path / "ws"),
            "--audit",
            str(audit),
            cwd=tmp_path,
            stdin=CALL,
        )
        audit.chmod(0o644)
        proc = _as_reader_without_write_access(directory, "audit", command, "--audit", str(audit))
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)
    assert proc.returncode == 0, proc.stderr
    assert "read-only" in proc.stderr
    if command == "verify":
        assert json.loads(proc.stdout)["records"] == 2
    else:
        assert len(proc.stdout.splitlines()) == 2


def test_doctor_says_when_the_wasm_cache_cannot_be_made(tmp_path: Path) -> None:
    # A user without a writable home: every data tool fails (sandbox_error naming
    # XDG_CACHE_HOME); doctor said wasm was available.
    (tmp_path / "home").write_text("a file where the home directory should be")
    env_cache = str(tmp_path / "home" / ".cache")
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "doctor"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": python_path(ROOT), "XDG_CACHE_HOME": env_cache},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    wasm = json.loads(proc.stdout)["wasm"]
    assert wasm["available"] is False
    assert "XDG_CACHE_HOME" in wasm["error"] and env_cache in wasm["error"]


def test_doctor_with_a_usable_wasm_cache(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runtime", "doctor"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": python_path(ROOT), "XDG_CACHE_HOME": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    wasm = json.loads(proc.stdout)["wasm"]
    assert wasm["available"] is True and "error" not in wasm


@pytest.mark.parametrize(("option", "value"), [("--log-level", "chatty"), ("--ask-timeout", "-5")])
def test_serve_option_values_that_mean_nothing_are_usage_errors(
    tmp_path: Path, option: str, value: str
) -> None:
    # --log-level chatty was a ValueError traceback (exit 1); --ask-timeout -5 served with
    # every approval timing out at once.
    proc = run("serve", "--mcp", "--workspace", "ws", option, value, cwd=tmp_path)
    assert proc.returncode == 64
    assert "Traceback" not in proc.stderr, proc.stderr
    assert option in proc.stderr


@pytest.mark.parametrize("command", ["verify", "tail", "export"])
def test_audit_commands_on_an_empty_file(tmp_path: Path, command: str) -> None:
    # A real log is never empty (its first open writes the schema and WAL mode into the
    # file). An empty one is a log truncated to nothing: verify said {"ok": true, "records":
    # 0}, and every read command wrote a fresh schema into it.
    audit = tmp_path / "audit.db"
    audit.touch()
    proc = run("audit", command, "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode != 0
    _no_traceback(proc)
    assert "empty" in proc.stderr
    assert audit.stat().st_size == 0
