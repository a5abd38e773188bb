from __future__ import annotations

import msgpack
import pytest

from runtime.frames import HEADER, FrameDecoder, FrameError, FrameTooLarge, encode_frame


def test_roundtrip_split_anywhere() -> None:
    msgs = [{"type": "call", "n": i, "data": b"\x00" * i, "s": "é" * i} for i in range(20)]
    stream = b"".join(encode_frame(m) for m in msgs)
    for step in (1, 3, 7, 64, len(stream)):
        dec = FrameDecoder()
        out = []
        for i in range(0, len(stream), step):
            out += dec.feed(stream[i : i + step])
        dec.eof()
        assert out == msgs


def test_oversized_length_refused_before_body() -> None:
    dec = FrameDecoder(max_size=100)
    with pytest.raises(FrameTooLarge) as info:
        dec.feed(HEADER.pack(2**31))  # no body sent: refused on the header alone
    assert info.value.size == 2**31 and info.value.max_size == 100
    with pytest.raises(FrameTooLarge):
        encode_frame({"x": "y" * 200}, max_size=100)


@pytest.mark.parametrize("body", [b"\xc1", msgpack.packb([1, 2]), msgpack.packb("s"), b"\x92\x01"])
def test_garbage_and_non_maps_refused(body: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(HEADER.pack(len(body)) + body)


def test_truncated_stream_detected_at_eof() -> None:
    frame = encode_frame({"a": 1})
    dec = FrameDecoder()
    assert dec.feed(frame[:-1]) == []
    with pytest.raises(FrameError, match="inside a frame"):
        dec.eof()
    dec2 = FrameDecoder()
    dec2.feed(frame[:2])
    with pytest.raises(FrameError):
        dec2.eof()
