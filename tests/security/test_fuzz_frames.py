"""Fuzzing the frame decoder (runtime/frames.py): random, truncated and hostile bytes give
frames or FrameError subclasses, never anything else, and memory stays bounded."""

from __future__ import annotations

import struct

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.frames import HEADER, FrameDecoder, FrameError, FrameTooLarge, encode_frame

MAX = 4096

messages = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.text(max_size=20)
        | st.binary(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        ),
        max_leaves=10,
    ),
    max_size=5,
)


def _feed_all(data: bytes, chunks: list[int]) -> list[dict]:
    dec = FrameDecoder(max_size=MAX)
    out: list[dict] = []
    pos = 0
    for n in [*chunks, len(data)]:
        piece = data[pos : pos + n]
        pos += n
        out.extend(dec.feed(piece))
        # bounded: never more than one header plus one body pending
        assert dec.pending <= HEADER.size + MAX
        if pos >= len(data):
            break
    dec.eof()
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2 * MAX), st.lists(st.integers(1, 64), max_size=20))
def test_random_bytes_only_frame_errors(data, chunks):
    try:
        frames = _feed_all(data, chunks)
    except FrameError:
        return
    assert all(isinstance(f, dict) for f in frames)


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, min_size=1, max_size=4), st.lists(st.integers(1, 17), max_size=30))
def test_valid_streams_roundtrip_in_any_chunking(msgs, chunks):
    data = b"".join(encode_frame(m, MAX) for m in msgs if len(msgpack.packb(m)) <= MAX)
    want = [m for m in msgs if len(msgpack.packb(m)) <= MAX]
    assert _feed_all(data, chunks) == want


@settings(max_examples=100, deadline=None)
@given(messages, st.integers(1, 10_000))
def test_truncated_stream_is_an_error_at_eof(msg, cut):
    data = encode_frame(msg, 1 << 20)
    cut = cut % len(data)
    dec = FrameDecoder(max_size=1 << 20)
    frames = dec.feed(data[:cut])
    assert frames == []
    if cut:
        try:
            dec.eof()
        except FrameError:
            return
        raise AssertionError("a truncated frame passed eof()")


@given(st.integers(MAX + 1, 2**32 - 1), st.binary(max_size=64))
def test_oversized_length_refused_before_the_body(size, tail):
    dec = FrameDecoder(max_size=MAX)
    try:
        dec.feed(struct.pack(">I", size) + tail)
    except FrameTooLarge as exc:
        assert exc.size == size
        assert dec.pending == 0
    else:
        raise AssertionError("oversized frame accepted")


@given(st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(), st.lists(st.booleans()), st.binary()))
def test_non_map_bodies_refused(value):
    body = msgpack.packb(value, use_bin_type=True)
    if len(body) > MAX:
        return
    dec = FrameDecoder(max_size=MAX)
    try:
        dec.feed(HEADER.pack(len(body)) + body)
    except FrameError:
        return
    raise AssertionError("a non-map body was accepted")
