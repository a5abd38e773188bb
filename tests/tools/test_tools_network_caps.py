"""The network tools' results fit the output cap however the body is spelled (no gateway or
server here: a fake broker channel hands the tool the gateway's reply)."""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Limits
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry

TOOLS = builtin_tools_dir() / "network"
CAP = 16384


def _run(name: str, body: bytes, ctype: str, ws: Path, headers: int = 0) -> dict[str, Any]:
    def broker(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        assert op == "http"
        cut = body[: payload["max_bytes"]]  # the gateway stops at the byte budget it is given
        reply_headers = {"content-type": ctype} | {f"x-h{i}": "v" * 50 for i in range(headers)}
        return {"status": 200, "headers": reply_headers, "body": cut, "truncated": cut != body}

    fn: Callable[[dict[str, Any], ToolContext], dict[str, Any]] = load_entry(
        f"network:{name}", TOOLS
    )
    ctx = ToolContext(workspace=ws, limits=Limits(output_bytes=CAP), broker=broker)
    return fn({"url": "http://example.test/x"}, ctx)


@pytest.mark.parametrize(
    ("name", "body", "ctype", "key"),
    [
        # Control characters take 6 bytes of JSON each.
        ("http_get", b"\x01" * CAP, "text/plain; charset=utf-8", "body"),
        ("web_fetch", b"\x01" * CAP, "text/plain; charset=utf-8", "content"),
        # Latin-1 bytes above 0x7f become 2 bytes of UTF-8.
        ("http_get", "é".encode("latin-1") * CAP, "text/plain; charset=latin-1", "body"),
        # Invalid UTF-8 that web_fetch decodes with replacement: 3 bytes each.
        ("web_fetch", b"\xff" * CAP, "text/plain", "content"),
    ],
)
def test_text_body_fits_the_cap(
    name: str, body: bytes, ctype: str, key: str, tmp_path: Path
) -> None:
    """The body was cut at half the cap in bytes *before* decoding and escaping, so such a
    body made the result larger than the cap and the call failed with output_too_large."""
    r = _run(name, body, ctype, tmp_path)
    size = len(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode())
    assert r["truncated"] is True and r[key] and size <= CAP
    assert size > CAP // 2  # the room is used


def test_base64_body_with_many_headers_fits_the_cap(tmp_path: Path) -> None:
    body = bytes(range(256)) * 64
    r = _run("http_get", body, "application/octet-stream", tmp_path, headers=100)
    size = len(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode())
    assert r["encoding"] == "base64" and r["truncated"] is True and size <= CAP
    assert body.startswith(base64.b64decode(r["body"]))


@pytest.mark.parametrize("charset", ["zlib", "zlib_codec", "hex", "base64", "rot13", "bz2"])
@pytest.mark.parametrize(("name", "key"), [("http_get", "body"), ("web_fetch", "content")])
def test_a_charset_that_is_not_a_text_encoding_is_ignored(
    charset: str, name: str, key: str, tmp_path: Path
) -> None:
    """The server names the charset; ``codecs.lookup`` found bytes-to-bytes codecs too:
    ``charset=zlib`` inflated a bomb past the gateway's cap (the call died at its memory
    limit), ``hex`` returned "b'Hello'", ``rot13`` failed with a TypeError. Such a name is
    now ignored, as an unknown one is: the body is read as UTF-8."""
    r = _run(name, b"Hello", f"text/plain; charset={charset}", tmp_path)
    assert r[key] == "Hello"
    bomb = zlib.compress(b"\0" * (8 << 20))
    r = _run(name, bomb, f"text/plain; charset={charset}", tmp_path)
    assert len(json.dumps(r)) < 4 * len(bomb) + 4096  # what was sent, never inflated
