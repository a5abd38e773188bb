"""An external MCP server inside the full sandbox, probed from inside (tests/mcp/ext_server.py).

Runs in this folder so that the unprivileged pass (test_unprivileged.py) repeats it as an
ordinary user.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.base import ExecRequest
from runtime.backends.mcp_proxy import McpProxyBackend
from runtime.backends.sandbox.backend import SANDBOX_UID
from runtime.errors import SandboxError
from runtime.mcp.external import ExternalServer
from runtime.models import Decision, Limits

pytestmark = [pytest.mark.anyio, pytest.mark.sandbox]

EXT_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "ext_server.py"


def _server(**kw: Any) -> ExternalServer:
    # The system interpreter with the venv's site-packages: reachable by any uid (the venv's
    # own interpreter may live under /root); both are bound read-only into the sandbox.
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    python = str(system) if system.exists() else sys.executable
    site = next(p for p in sys.path if p.endswith("site-packages"))
    data: dict[str, Any] = {
        "name": "ext",
        "command": [python, str(EXT_SERVER)],
        "env": {"PYTHONPATH": site},
        **kw,
    }
    return ExternalServer.model_validate(data)


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that greets every connection with b"hello"."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"hello")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join()
    sock.close()


def _descendants_running(needle: str) -> list[int]:
    """Our descendant processes whose command line contains ``needle``."""
    parents: dict[int, int] = {}
    cmdlines: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdlines[int(entry)] = fh.read().decode(errors="replace")
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    ours = {os.getpid()}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in ours and pid not in ours:
                ours.add(pid)
                changed = True
    return sorted(p for p in ours if needle in cmdlines.get(p, ""))


def _started(pid: int) -> int | None:
    """The start time of the live process ``pid`` (clock ticks since boot); None when it is
    gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """Those of ``pids`` (as they were when this is called) still alive after ``within_s``,
    or [] as soon as none is.

    Followed by pid and start time, not as our descendants: a killed launcher's pid 1 and
    server are re-parented away from us while they die, so they drop out of
    ``_descendants_running`` before they are dead (seen: the list empty 19 ms after the kill,
    the server alive until 41 ms). The kernel ends a pid namespace asynchronously; the bound
    is generous: the assertion is "they die", not "they die fast"."""
    seen = {pid: t for pid in pids if (t := _started(pid)) is not None}
    deadline = time.monotonic() + within_s
    while True:
        left = [pid for pid, t in seen.items() if _started(pid) == t]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _leads_to_bound_code(directory: str) -> bool:
    """Whether the server's sandbox binds something below ``directory``: its script's folder
    and the site-packages of :func:`_server`'s ``PYTHONPATH``, each at its host path."""
    site = next(p for p in sys.path if p.endswith("site-packages"))
    bound = [site, str(EXT_SERVER.parent)]
    return any(os.path.realpath(b).startswith(directory + "/") for b in bound)


async def _call(proxy: McpProxyBackend, tool: str, arguments: dict[str, Any]) -> Any:
    spec = next(s for s in proxy.specs if s.name == tool)
    outcome = await proxy.run(
        ExecRequest(
            call_id="c1",
            spec=spec,
            arguments=arguments,
            workspace=Path("/"),
            limits=Limits(),
            decision=Decision(action="allow", rule="t"),
        )
    )
    return outcome.result


async def test_server_inside_the_sandbox(listener: int) -> None:
    marker = f"rt-mcp-marker-{uuid.uuid4().hex}"
    async with McpProxyBackend([_server()], mode="strict") as proxy:
        assert proxy.errors == {}
        fingerprint = proxy.fingerprint()
        info = await _call(proxy, "ext__probe", {"port": listener, "marker": marker})
        running = _descendants_running(str(EXT_SERVER))
    assert running  # seen while it ran ...
    assert _descendants_running(str(EXT_SERVER)) == []  # ... and nothing of it after close
    need = {"userns", "mountns", "pivot_root", "pidns", "netns", "landlock", "seccomp"}
    assert need <= set(fingerprint.mechanisms)
    assert set(fingerprint.missing) <= {"cgroup_memory", "cgroup_pids"}
    # A non-root uid inside, and on the host the sandbox uid (never root).
    assert info["uid"] == 1000
    assert info["host_uid"] == (SANDBOX_UID if os.geteuid() == 0 else os.getuid())
    # Not mounted: home directories, /run, /var; of its own checkout only the script. A
    # checkout (or a venv) under one of them, as an ordinary user's in /home, is bound at its
    # host path, so that one leads to the bound code and to nothing else (below).
    assert info["exists"] == {
        d: _leads_to_bound_code(d) for d in ("/home", "/root", "/run", "/var", "/opt")
    }
    assert info["checkout"] == {
        "ext_server.py": True,
        "test_external.py": False,
        "../../pyproject.toml": False,
    }
    # Its own /proc: the launcher's pid 1 and itself, never the broker (pytest).
    assert not any("pytest" in c for c in info["cmdlines"])
    assert len(info["cmdlines"]) <= 3
    # Writes only in its scratch (HOME/TMPDIR, a private tmpfs at /tmp: nothing lands on the
    # host). A checkout under the host's /tmp has its bound script on that scratch, so there
    # the script's directory is scratch too: writable inside, never on the host.
    scratch = {p for p in info["writes"] if p.startswith("/tmp/")}
    assert {p: w for p, w in info["writes"].items() if p not in scratch} == dict.fromkeys(
        set(info["writes"]) - scratch, False
    )
    assert not any(os.path.exists(p) for p in info["writes"])  # noqa: ASYNC240 - after the server
    assert info["home_writable"] is True
    assert marker not in os.listdir("/tmp")
    # Seccomp: namespaces, mounts and ptrace are not available.
    assert info["unshare"] == info["mount"] == info["ptrace"] == errno.ENOSYS
    # No network without the grant.
    assert info["tcp"].startswith("error")


async def test_network_grant(listener: int) -> None:
    async with McpProxyBackend([_server(network=True)], mode="strict") as proxy:
        assert proxy.errors == {}
        fingerprint = proxy.fingerprint()
        info = await _call(proxy, "ext__probe", {"port": listener})
    assert info["tcp"] == "hello"
    assert "netns" not in fingerprint.mechanisms and "netns" not in fingerprint.missing
    # Everything else stays.
    assert {"userns", "mountns", "pidns", "landlock", "seccomp"} <= set(fingerprint.mechanisms)
    assert info["unshare"] == errno.ENOSYS


async def test_server_dies_with_its_launcher() -> None:
    """Killing the launcher (what a broker's death does by pdeathsig) ends the server, and a
    call after that fails with a clear SandboxError.

    The call waits for the server's end first (its pid, ``_gone``): kill() only queues the
    signal, and pid 1's death reaches the server through the kernel later. A call made in
    between can be read and answered by the still running server (a loaded machine showed
    exactly that): what the broker must do for a dead server is only defined once it is
    dead."""
    async with McpProxyBackend([_server()], mode="strict") as proxy:
        running = _descendants_running(str(EXT_SERVER))
        launchers = _descendants_running("runtime.backends.sandbox._launcher")
        assert running and launchers
        for pid in launchers:
            os.kill(pid, 9)
        assert await anyio.to_thread.run_sync(_gone, running + launchers) == []
        with pytest.raises(SandboxError, match=r"exited|went away|not running"):
            await _call(proxy, "ext__add", {"a": 1, "b": 2})
    assert _descendants_running(str(EXT_SERVER)) == []
