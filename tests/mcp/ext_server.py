"""A small external MCP server (official SDK, MCPServer) for the mcp backend tests."""

from __future__ import annotations

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


@server.tool()
def whoami() -> dict[str, object]:
    """Where this server runs: uid, network interfaces, environment keys."""
    return {
        "wrote_tmp": _can_write("/tmp/runtime-mcp-escape-test"),
        "wrote_home": _can_write(os.path.join(os.environ.get("HOME", "/"), "probe")),
        "uid": os.getuid(),
        "interfaces": sorted(name for _, name in socket.if_nameindex()),
        "env": sorted(os.environ),
        "pid": os.getpid(),
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
