"""``runtime serve --mcp`` end to end, over stdio and Streamable HTTP: when a proxied url
server says its tools changed, or a url server that was down at start-up comes up, the
broker's own clients hear ``notifications/tools/list_changed`` and the new list holds the
new tools, which are validated, decided and audited like the others."""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp.client.session import ClientSession

from tests.mcp.conftest import HttpServer, http_session, serve_mcp_argv, stdio_session
from tests.mcp.test_list_changed import Heard
from tests.mcp.test_url_servers import URL_SERVER

pytestmark = [pytest.mark.anyio, pytest.mark.sandbox]


def _policy(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        'version = 1\ndefault = "deny"\n\n[categories]\nmcp = "allow"\n\n'
        f'[[mcp_servers]]\nname = "u"\nurl = "{url}"\nstart_timeout_s = 5\n'
    )
    return path


@asynccontextmanager
async def runtime_serve(
    tmp_path: Path, url: str, transport: str, heard: Heard
) -> AsyncIterator[ClientSession]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    argv = serve_mcp_argv(
        "--workspace",
        str(ws),
        "--audit",
        str(tmp_path / "audit.db"),
        "--policy",
        str(_policy(tmp_path, url)),
    )
    if transport == "http":
        server = HttpServer([*argv, "--http", "127.0.0.1:0"])
        try:
            async with http_session(server.url, message_handler=heard) as session:
                yield session
        finally:
            server.close()
        return
    async with stdio_session(argv, message_handler=heard) as session:
        yield session


async def _names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_proxied_servers_new_tool_reaches_our_clients(
    tmp_path: Path, transport: str
) -> None:
    remote = HttpServer([sys.executable, str(URL_SERVER), "--grow"])
    heard = Heard()
    try:
        async with runtime_serve(tmp_path, remote.url, transport, heard) as session:
            assert "u__extra" not in await _names(session)
            grown = await session.call_tool("u__grow", {})
            assert not grown.is_error, grown
            await heard.next(timeout_s=30)
            assert "u__extra" in await _names(session)
            extra = await session.call_tool("u__extra", {"word": "hi"})
            bad = await session.call_tool("u__extra", {"word": 3})
    finally:
        remote.close()
    assert not extra.is_error and extra.structured_content == {"result": "HI"}
    assert bad.is_error and bad.structured_content is not None
    assert bad.structured_content["error"]["type"] == "invalid_arguments"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_server_that_comes_up_late_is_announced(tmp_path: Path, transport: str) -> None:
    with socket.socket() as sock:  # a port nothing listens on, yet
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    heard = Heard()
    remote: HttpServer | None = None
    try:
        async with runtime_serve(
            tmp_path, f"http://127.0.0.1:{port}/mcp", transport, heard
        ) as session:
            assert "u__add" not in await _names(session)
            remote = HttpServer([sys.executable, str(URL_SERVER), "--port", str(port)])
            await heard.next(timeout_s=60)  # tried again with backoff, at most 30 s apart
            assert "u__add" in await _names(session)
            added = await session.call_tool("u__add", {"a": 1, "b": 2})
    finally:
        if remote is not None:
            remote.close()
    assert not added.is_error and added.structured_content == {"sum": 3}
