"""Every built-in tool through the real broker and backends (sandbox, wasm, host, egress):
ordinary use on the default policy, network tools on a policy that names a local server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.catalogue import Catalogue

pytestmark = [pytest.mark.sandbox, pytest.mark.wasm]

DEFAULT_CALLS: list[tuple[str, dict[str, Any], Any]] = [
    (
        "write_file",
        {"path": "src/app.py", "content": "def main():\n    return 1\n"},
        lambda r: r["bytes_written"] == 25,
    ),
    ("read_file", {"path": "src/app.py"}, lambda r: r["content"].startswith("def main")),
    (
        "edit_file",
        {"path": "src/app.py", "old_string": "return 1", "new_string": "return 2"},
        lambda r: r["replacements"] == 1,
    ),
    (
        "list_files",
        {"path": ".", "recursive": True},
        lambda r: "src/app.py" in [f["path"] for f in r["files"]],
    ),
    ("get_file_info", {"path": "src/app.py"}, lambda r: r["exists"] and r["type"] == "file"),
    ("file_search", {"pattern": "*.py"}, lambda r: r["matches"][0]["path"] == "src/app.py"),
    ("code_query", {"query": "main", "type": "function"}, lambda r: r["matches"][0]["line"] == 1),
    ("move_file", {"source": "src/app.py", "destination": "src/main.py"}, lambda r: r["moved"]),
    (
        "shell_exec",
        {"command": "cat src/main.py | wc -l"},
        lambda r: r["stdout"].strip() == "2" and r["exit_code"] == 0,
    ),
    ("delete_file", {"path": "src", "recursive": True}, lambda r: r["deleted"]),
    ("current_time", {"timezone": "Asia/Shanghai"}, lambda r: r["timezone"] == "Asia/Shanghai"),
    ("sleep", {"seconds": 0.01}, lambda r: r["slept"] >= 0.01),
    ("set_env", {"key": "GREETING", "value": "hello"}, lambda r: "previous" in r),
    ("get_env", {"key": "GREETING"}, lambda r: r["value"] == "hello"),
    ("shell_exec", {"command": "echo $GREETING"}, lambda r: r["stdout"] == "hello\n"),
    ("json_parse", {"text": '{"a": [1, 2]}'}, lambda r: r["data"] == {"a": [1, 2]}),
    (
        "json_stringify",
        {"data": {"b": 1, "a": 2}, "sort_keys": True},
        lambda r: r["text"] == '{"a": 2, "b": 1}' or r["text"] == '{"a":2,"b":1}',
    ),
    ("base64_encode", {"text": "hi"}, lambda r: r["encoded"] == "aGk="),
    ("base64_decode", {"encoded": "aGk="}, lambda r: r["decoded"] == "hi"),
    ("hash", {"text": "abc", "algorithm": "sha256"}, lambda r: r["hex"].startswith("ba7816bf")),
    ("json_query", {"data": {"a": [10, 20]}, "pointer": "/a/1"}, lambda r: r["value"] == 20),
    ("csv_to_json", {"text": "a,b\n1,2\n"}, lambda r: len(r["rows"]) == 1),
    ("regex_match", {"pattern": "b+", "text": "abbbc"}, lambda r: r["matched"]),
    (
        "snippet_save",
        {"name": "hello", "code": "print('hi')", "language": "python"},
        lambda r: r["name"] == "hello",
    ),
    ("snippet_load", {"name": "hello"}, lambda r: r["code"] == "print('hi')"),
    ("snippet_list", {}, lambda r: r["count"] == 1),
    ("memory_write", {"key": "k", "content": "the sky is blue"}, lambda r: True),
    ("memory_search", {"query": "sky"}, lambda r: len(r["matches"]) == 1),
    ("memory_read", {"key": "k"}, lambda r: "blue" in json.dumps(r)),
    (
        "ask_user",
        {"question": "Proceed?", "options": ["yes", "no"]},
        lambda r: r["answer"] == "yes",
    ),
    (
        "review_with_feedback_content",
        {"title": "Review plan", "content": "1. write tests"},
        lambda r: r == {"action": "feedback", "content": "1. write tests", "feedback": "yes"},
    ),
]


def test_every_builtin_tool_on_the_default_policy(tmp_path: Path) -> None:
    answers: list[str] = []

    def ask(question: str, options: list[str] | None) -> str:
        answers.append(question)
        return "yes"

    with SyncBroker(workspace=tmp_path / "ws", ask_user=ask) as broker:
        for tool, args, check in DEFAULT_CALLS:
            result = broker.call({"tool": tool, "arguments": args})
            assert result.success, (tool, result.error)
            assert check(result.result), (tool, result.result)
        # Every call left two audit records and the chain verifies.
        report = broker.audit.verify()
        assert report.ok and report.count == 2 * len(DEFAULT_CALLS)
    assert answers[0] == "Proceed?" and len(answers) == 2
    assert answers[1].startswith("Review plan\n") and "1. write tests" in answers[1]


def test_catalogue_is_covered() -> None:
    """A new built-in tool must be added to this end-to-end list (or to the network one)."""
    covered = {c[0] for c in DEFAULT_CALLS} | {c[0] for c in NETWORK_CALLS}
    untested = {"snippet_delete", "memory_delete", "request_confirmation"}  # tests/tools
    missing = {s.name for s in Catalogue().list()} - covered - untested
    assert not missing


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path.startswith("/search"):
            body = json.dumps(
                {"results": [{"title": "Result", "url": "http://x/", "content": "snippet"}]}
            ).encode()
            ctype = "application/json"
        else:
            body = b"<html><body><h1>Title</h1><p>Hello <b>web</b></p></body></html>"
            ctype = "text/html"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


NETWORK_CALLS: list[tuple[str, dict[str, Any], Any]] = [
    ("http_get", {"url": "http://127.0.0.1:{port}/page"}, lambda r: r["status"] == 200),
    (
        "http_post",
        {"url": "http://127.0.0.1:{port}/echo", "body": "ping"},
        lambda r: r["status"] == 201 and r["body"] == "ping",
    ),
    (
        "http_request",
        {"url": "http://127.0.0.1:{port}/page", "method": "GET"},
        lambda r: r["status"] == 200,
    ),
    (
        "web_fetch",
        {"url": "http://127.0.0.1:{port}/page", "format": "markdown"},
        lambda r: "Title" in r["content"] and "**web**" in r["content"],
    ),
    ("web_search", {"query": "runtime"}, lambda r: r["results"][0]["title"] == "Result"),
]


def test_network_tools_denied_by_default_allowed_by_policy(tmp_path: Path, server: int) -> None:
    with SyncBroker(workspace=tmp_path / "ws") as broker:
        url = f"http://127.0.0.1:{server}/page"
        denied = broker.call({"tool": "http_get", "arguments": {"url": url}})
        assert denied.error is not None and denied.error.type == "policy_denied"
    policy = tmp_path / "net.toml"
    policy.write_text(
        f"""
version = 1
default = "deny"
[categories]
network = "allow"
[network]
allow = ["127.0.0.1:{server}"]
allow_private = true
search_endpoint = "http://127.0.0.1:{server}/search"
"""
    )
    with SyncBroker(workspace=tmp_path / "ws", policy=policy) as broker:
        for tool, args, check in NETWORK_CALLS:
            args = {k: v.format(port=server) if isinstance(v, str) else v for k, v in args.items()}
            result = broker.call({"tool": tool, "arguments": args})
            assert result.success, (tool, result.error)
            assert check(result.result), (tool, result.result)
        # A port the policy does not name stays closed, even on the same host.
        other = broker.call({"tool": "http_get", "arguments": {"url": "http://127.0.0.1:9/"}})
        assert other.error is not None and other.error.type == "policy_denied"
