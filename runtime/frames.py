"""Length-prefixed msgpack frames: the one wire format between broker, fork-server and child.

A frame is a 4-byte big-endian length followed by that many bytes of msgpack. Both sides use
this module; both sides treat the other as hostile: a length over ``max_size`` is refused
*before* reading the body, a body that is not msgpack, or not a map, is an error, and a stream
that ends inside a frame is an error. Nothing here allocates more than ``max_size`` bytes.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

__all__ = [
    "DEFAULT_MAX_FRAME",
    "HEADER",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "decode_body",
    "encode_frame",
    "result_frame_bound",
]

HEADER = struct.Struct(">I")
#: Default largest frame, bytes (16 MiB). Results are capped far below by Limits.output_bytes.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024


def result_frame_bound(output_bytes: int) -> int:
    """The largest frame a result within ``output_bytes`` can need. The cap is on the
    result's canonical JSON (as the broker sizes it), and msgpack takes at most 4.5 times a
    value's JSON (a float is 9 bytes, ``0,`` in an array 2), plus the frame's envelope: a
    call's frames are refused past this, so a huge or hostile one is never carried whole."""
    return output_bytes * 9 // 2 + 4096


class FrameError(Exception):
    """The peer sent something that is not a valid frame."""


class FrameTooLarge(FrameError):
    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {max_size} bytes")
        self.size = size
        self.max_size = max_size


def encode_frame(message: dict[str, Any], max_size: int = DEFAULT_MAX_FRAME) -> bytes:
    body: bytes = msgpack.packb(message, use_bin_type=True)
    if len(body) > max_size:
        raise FrameTooLarge(len(body), max_size)
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes | memoryview) -> dict[str, Any]:
    try:
        obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises a zoo of types; all mean "garbage"
        raise FrameError(f"frame body is not valid msgpack: {type(exc).__name__}") from exc
    if not isinstance(obj, dict):
        raise FrameError(f"frame body must be a map, got {type(obj).__name__}")
    return obj


class FrameDecoder:
    """Incremental decoder: feed bytes as they arrive, take complete frames out.

    Memory is bounded: the buffer never holds more than one header plus ``max_size`` bytes,
    because an oversized length is refused as soon as its header is complete.
    """

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME) -> None:
        self.max_size = max_size
        self._buf = bytearray()
        self._need: int | None = None

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        frames: list[dict[str, Any]] = []
        while True:
            if self._need is None:
                if len(self._buf) < HEADER.size:
                    break
                (size,) = HEADER.unpack_from(self._buf)
                if size > self.max_size:
                    self._buf.clear()
                    raise FrameTooLarge(size, self.max_size)
                self._need = size
                del self._buf[: HEADER.size]
            if len(self._buf) < self._need:
                break
            body = bytes(self._buf[: self._need])
            del self._buf[: self._need]
            self._need = None
            frames.append(decode_body(body))
        return frames

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held; non-zero at EOF means a truncated frame."""
        return len(self._buf) + (HEADER.size if self._need is not None else 0)

    def eof(self) -> None:
        """Call at end of stream: raises if the stream stopped inside a frame."""
        if self.pending:
            raise FrameError(f"stream ended inside a frame ({self.pending} bytes pending)")
