"""A small external MCP server (official SDK, MCPServer) for the mcp backend tests."""

from __future__ import annotations

import ctypes
import errno
import os
import socket
from typing import TypedDict

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("ext")
calls = {"n": 0}


class Sum(TypedDict):
    sum: int
    calls: int


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    calls["n"] += 1
    return {"sum": a + b, "calls": calls["n"]}


def _can_write(path: str) -> bool:
    try:
        with open(path, "w") as fh:
            fh.write("x")
    except OSError:
        return False
    os.unlink(path)
    return True


def _interfaces() -> list[str]:
    # /proc/net/dev lists the reader's network namespace (if_nameindex needs a netlink
    # socket, which the sandbox's seccomp filter refuses).
    with open("/proc/net/dev") as fh:
        return sorted(line.split(":")[0].strip() for line in fh.readlines()[2:])


@server.tool()
def whoami() -> dict[str, object]:
    """Where this server runs: uid, network interfaces, environment keys."""
    return {
        "wrote_outside": _can_write("/etc/runtime-mcp-escape-test"),
        "wrote_home": _can_write(os.path.join(os.environ.get("HOME", "/"), "probe")),
        "uid": os.getuid(),
        "interfaces": _interfaces(),
        "env": sorted(os.environ),
        "pid": os.getpid(),
    }


def _errno_of(call: str, *args: int) -> int:
    """errno of a raw libc call (0 when it succeeded)."""
    libc = ctypes.CDLL(None, use_errno=True)
    func = getattr(libc, call)
    return 0 if func(*[ctypes.c_long(a) for a in args]) == 0 else ctypes.get_errno()


def _tcp(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            return conn.recv(16).decode()
    except OSError as exc:
        return f"error {exc.errno}"


def _cmdlines() -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    found.append(fh.read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return found


@server.tool()
def probe(port: int = 0, marker: str = "") -> dict[str, object]:
    """What this server can see and do from inside its sandbox."""
    here = os.path.dirname(os.path.abspath(__file__))
    if marker:
        with open(os.path.join("/tmp", marker), "w") as fh:  # stays: the test looks for it
            fh.write("x")
    with open("/proc/self/uid_map") as fh:
        uid_map = fh.read().split()
    return {
        "uid": os.getuid(),
        "host_uid": int(uid_map[1]) if len(uid_map) == 3 else -1,
        "exists": {p: os.path.exists(p) for p in ("/home", "/root", "/run", "/var", "/opt")},
        "checkout": {
            name: os.path.exists(os.path.join(here, name))
            for name in ("ext_server.py", "test_external.py", "../../pyproject.toml")
        },
        "cmdlines": _cmdlines(),
        "writes": {
            p: _can_write(p)
            for p in ("/escape", "/etc/escape", "/usr/escape", os.path.join(here, "escape"))
        },
        "home_writable": _can_write(os.path.join(os.environ["HOME"], "probe")),
        # CLONE_NEWUSER; mount("none", "/tmp", "tmpfs"); ptrace(PTRACE_TRACEME)
        "unshare": _errno_of("unshare", 0x10000000),
        "mount": ctypes.CDLL(None, use_errno=True).mount(b"none", b"/tmp", b"tmpfs", 0, None)
        and ctypes.get_errno(),
        "ptrace": _errno_of("ptrace", 0, 0, 0, 0),
        "tcp": _tcp(port) if port else "",
        "enosys": errno.ENOSYS,
    }


@server.tool()
def boom() -> str:
    """Always fails."""
    raise ToolError("boom from the external server")


@server.tool(name="bad name!")
def bad_name() -> str:
    """A name that does not fit the catalogue; must be skipped."""
    return "x"


@server.tool()
def crash() -> str:
    """Exits the server process."""
    os._exit(3)


if __name__ == "__main__":
    server.run("stdio")
