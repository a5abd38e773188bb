"""Capped Content-Encoding decoding."""

from __future__ import annotations

import gzip
import zlib

import pytest

from runtime.egress._decode import BodyDecoder
from runtime.errors import ToolFailed

DATA = b"The quick brown fox " * 1000


def _decode_all(decoder: BodyDecoder, blob: bytes, limit: int, chunk: int = 100) -> bytes:
    out = b""
    for i in range(0, len(blob), chunk):
        out += decoder.decode(blob[i : i + chunk], limit - len(out))
    return out + decoder.flush(limit - len(out))


@pytest.mark.parametrize(
    ("encoding", "blob"),
    [
        ("gzip", gzip.compress(DATA)),
        ("x-gzip", gzip.compress(DATA)),
        ("deflate", zlib.compress(DATA)),
        ("deflate", zlib.compress(DATA)[2:-4]),  # raw deflate, as some servers send it
        ("", DATA),
        ("identity", DATA),
    ],
)
def test_round_trip(encoding: str, blob: bytes) -> None:
    decoder = BodyDecoder(encoding)
    assert _decode_all(decoder, blob, len(DATA) + 1) == DATA
    assert decoder.decoded is (encoding not in ("", "identity"))


def test_output_never_exceeds_want() -> None:
    bomb = gzip.compress(b"\0" * 10_000_000)
    decoder = BodyDecoder("gzip")
    out = decoder.decode(bomb, 1000)
    assert len(out) == 1000


def test_unknown_encoding_passes_through() -> None:
    decoder = BodyDecoder("br")
    assert decoder.decoded is False
    assert decoder.decode(b"\x8b\x00", 10) == b"\x8b\x00"


def test_corrupt_body_is_tool_failed() -> None:
    with pytest.raises(ToolFailed, match="compressed"):
        BodyDecoder("gzip").decode(b"not gzip at all", 100)
