"""Long-lived sandboxed processes (``runtime.backends.sandbox.process``), probed with shells.

In this folder so the unprivileged pass (test_unprivileged.py) repeats them as an ordinary
user.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.backends.sandbox import process
from runtime.backends.sandbox.backend import SANDBOX_UID
from runtime.backends.sandbox.process import (
    EXIT_SETUP,
    SandboxedProcess,
    needed_paths,
    spawn_sandboxed,
)
from runtime.errors import SandboxError

pytestmark = pytest.mark.sandbox

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def _sh(script: str, **kw: object) -> SandboxedProcess:
    return spawn_sandboxed(["/bin/sh", "-c", script], env=ENV, **kw)  # type: ignore[arg-type]


def _run(script: str, **kw: object) -> tuple[int, str, str]:
    with _sh(script, **kw) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
        code = proc.wait(60)
    return code, out.decode(), err.decode()


def _tree(pid: int) -> set[int]:
    """``pid`` and its descendants, by host pid."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    tree = {pid}
    changed = True
    while changed:
        changed = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                changed = True
    return tree


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.add(pid)
        except OSError:
            continue
    return alive


def test_pipes_identity_and_view() -> None:
    script = (
        "read line; echo got:$line; id -u; cat /proc/self/uid_map; "
        "for p in /home /root /run /var /work; do test -e $p && echo SEES $p; done; "
        "ls /proc | grep -c '^[0-9]'; hostname; "
        "echo x > $HOME/f && echo home-ok; echo x > /etc/f 2>/dev/null || echo etc-refused; "
        "echo $HOME $TMPDIR; pwd"
    )
    with _sh(script) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"ping\n")
        proc.stdin.flush()
        out = proc.stdout.read().decode().split("\n")
        assert proc.wait(60) == 0
        fingerprint = proc.fingerprint
    assert out[0] == "got:ping"
    assert out[1] == "1000"
    inside, host, count = out[2].split()
    assert (inside, count) == ("1000", "1")
    assert int(host) == (SANDBOX_UID if os.geteuid() == 0 else os.getuid())
    assert not [line for line in out if line.startswith("SEES")]
    assert int(out[3]) <= 4  # pid 1, the shell, ls, grep: its own pid namespace
    assert out[4:9] == ["sandbox", "home-ok", "etc-refused", "/tmp /tmp", "/tmp"]
    assert {"userns", "mountns", "pidns", "netns", "seccomp", "landlock"} <= set(
        fingerprint.mechanisms
    )


def test_seccomp_and_no_network() -> None:
    code, out, err = _run(
        "unshare -U true; echo unshare=$?; mount -t tmpfs none /tmp 2>/dev/null; "
        "echo mount=$?; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"
    )
    assert code == 0
    unshare, mount, *interfaces = out.split()
    assert unshare == "unshare=1" and mount != "mount=0"
    assert "Function not implemented" in err  # ENOSYS: the seccomp filter, not the kernel
    assert interfaces == ["lo"]  # an empty network namespace


def test_private_tmp_never_reaches_the_host(tmp_path: Path) -> None:
    name = f"rt-process-{os.getpid()}-{time.monotonic_ns()}"
    code, out, _ = _run(f"echo x > /tmp/{name} && echo wrote")
    assert (code, out) == (0, "wrote\n")
    assert not os.path.exists(f"/tmp/{name}")


def test_read_only_binds() -> None:
    base = Path("/tmp") / f"rt-process-ro-{os.getpid()}-{time.monotonic_ns()}"
    (base / "data").mkdir(parents=True)
    (base / "data" / "f.txt").write_text("visible\n")
    (base / "secret.txt").write_text("hidden\n")
    os.chmod(base, 0o755)
    os.chmod(base / "data", 0o755)
    try:
        code, out, _ = _run(
            f"cat {base}/data/f.txt; cat {base}/secret.txt 2>/dev/null || echo no-secret; "
            f"echo y > {base}/data/new 2>/dev/null || echo ro",
            read_only=[str(base / "data")],
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    assert code == 0
    assert out.split("\n")[:3] == ["visible", "no-secret", "ro"]


def test_whole_tree_gone_after_close() -> None:
    # A setsid'd, double-forked sleeper survives its shell: only the namespace ending ends it.
    proc = _sh("setsid sh -c 'sleep 300 & sleep 300' & sleep 300 & echo started; sleep 300")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 10
        while len(_tree(proc.pid)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        tree = _tree(proc.pid)
        assert len(tree) >= 6  # launcher, pid 1, shell, sleeps, the setsid'd shell
    finally:
        code = proc.close(grace_s=0.5)
    assert code == 128 + signal.SIGTERM
    assert _alive(tree) == set()


def test_kill_ends_the_namespace() -> None:
    proc = _sh("echo started; sleep 300")
    assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
    tree = _tree(proc.pid)
    proc.kill()
    assert proc.wait(30) == -signal.SIGKILL  # Popen's view of the launcher
    deadline = time.monotonic() + 10
    while _alive(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(tree) == set()
    proc.close()


def test_setup_failure_is_reported() -> None:
    with spawn_sandboxed(["/nonexistent/program"], env=ENV) as proc:
        assert proc.stderr is not None
        err = proc.stderr.read().decode()
        code = proc.wait(60)
    assert code == EXIT_SETUP
    assert "cannot execute /nonexistent/program" in err


def test_cgroup_while_running_and_removed_after() -> None:
    caps = process.host_capabilities()
    if os.geteuid() != 0 or "memory" not in caps.cgroup_writable:
        pytest.skip("cgroups need root and a writable v1 hierarchy")
    with _sh("echo started; sleep 300") as proc:
        assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
        groups = list(proc._plan.cgroups)
        assert groups and all(os.path.isdir(g) for g in groups)
        with open(f"{groups[0]}/cgroup.procs", encoding="ascii") as fh:
            assert str(proc.pid) in fh.read().split()
        assert "cgroup_memory" in proc.fingerprint.mechanisms
    assert not any(os.path.exists(g) for g in groups)


def test_best_effort_without_user_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without user namespaces: a private host scratch, Landlock and seccomp."""
    real = process.host_capabilities()
    fake = type(real)(
        **{**{f: getattr(real, f) for f in real.__dataclass_fields__}, "user_namespaces": False}
    )
    monkeypatch.setattr(process, "host_capabilities", lambda: fake)
    with pytest.raises(SandboxError):
        _sh("true")
    with _sh(
        "echo x > $HOME/f && echo home-ok; echo x > /etc/f 2>/dev/null || echo etc-refused; "
        "unshare -U true 2>/dev/null || echo unshare-refused; id -u",
        mode="best_effort",
    ) as proc:
        assert proc.stdout is not None
        out = proc.stdout.read().decode().split()
        assert proc.wait(60) == 0
        scratch = proc._plan.scratch
        assert scratch is not None and scratch.is_dir()
        fingerprint = proc.fingerprint
    assert out[:3] == ["home-ok", "etc-refused", "unshare-refused"]
    assert int(out[3]) == (SANDBOX_UID if os.geteuid() == 0 else os.getuid())
    assert {"userns", "mountns", "pidns"} <= set(fingerprint.missing)
    assert not scratch.exists()


def test_needed_paths() -> None:
    venv_python = Path(sys.executable)
    paths = needed_paths([str(venv_python), "/usr/bin/env", "-c"], {}, network=False)
    prefix = str(venv_python.parent.parent) if venv_python.parent.name == "bin" else ""
    if prefix and not prefix.startswith("/usr"):
        assert any(prefix == p or prefix.startswith(p + "/") for p in paths)
    assert not any(p.startswith("/usr/") for p in paths)  # system dirs are bound anyway
    here = str(Path(__file__).resolve())
    nested = needed_paths(
        ["/bin/true", here], {"PYTHONPATH": str(Path(here).parent)}, network=False
    )
    assert nested == (str(Path(here).parent),)  # the file is inside the directory
    for bad in ("/", "/home", "/root", "/proc/self", "/run/x", "relative"):
        with pytest.raises(SandboxError):
            needed_paths(["/bin/true"], {}, [bad], network=False)
    # Found in argv, a path that may not be bound is skipped, never bound.
    assert needed_paths(["/bin/true", "/", "/root", "/proc/1"], {}, network=False) == ()


def test_needed_paths_refuse_runtime_state() -> None:
    base = Path("/tmp") / f"rt-process-ws-{os.getpid()}-{time.monotonic_ns()}"
    (base / ".runtime").mkdir(parents=True)
    (base / "lib").mkdir()
    try:
        for env, read_only in (({"PYTHONPATH": str(base)}, []), ({}, [str(base)])):
            with pytest.raises(SandboxError, match="runtime state"):
                needed_paths(["/bin/true"], env, read_only, network=False)
        assert needed_paths(["/bin/true"], {}, [str(base / "lib")], network=False) == (
            str(base / "lib"),
        )
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
