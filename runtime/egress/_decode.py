"""Content-Encoding decoding with an output cap.

Hazard: a few KiB of gzip can inflate to gigabytes. The cap is applied inside zlib
(``max_length``), so at most ``want`` bytes are ever produced, whatever the input ratio;
httpx's own decoders inflate whole chunks first.
"""

from __future__ import annotations

import zlib

from runtime.errors import ToolFailed

__all__ = ["BodyDecoder"]

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS


class BodyDecoder:
    """Decodes ``identity``, ``gzip``/``x-gzip`` and ``deflate`` bodies; any other
    encoding is passed through undecoded (``decoded`` is then False)."""

    def __init__(self, content_encoding: str) -> None:
        encoding = content_encoding.strip().lower()
        self._raw_deflate_fallback = encoding == "deflate"
        self._zlib: zlib._Decompress | None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(_GZIP_WBITS)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj(_ZLIB_WBITS)
        else:
            self._zlib = None
        self.decoded = self._zlib is not None
        self._tail = b""
        self._started = False

    def decode(self, chunk: bytes, want: int) -> bytes:
        """At most ``want`` bytes of decoded output for ``chunk`` (plus any held-back input)."""
        if self._zlib is None:
            return chunk[:want]
        data = self._tail + chunk
        if want <= 0:
            self._tail = data
            return b""
        try:
            out = self._zlib.decompress(data, want)
        except zlib.error as exc:
            if self._raw_deflate_fallback and not self._started:
                # Servers disagree whether "deflate" means zlib-wrapped or raw; try raw once.
                self._raw_deflate_fallback = False
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(chunk, want)
            raise ToolFailed(
                f"the response body is not valid compressed data: {exc}", reason="bad_compression"
            ) from exc
        self._started = True
        self._tail = self._zlib.unconsumed_tail
        return out

    def flush(self, want: int) -> bytes:
        """Output still held back at the end of the stream, at most ``want`` bytes."""
        if self._zlib is None or want <= 0:
            return b""
        return self.decode(b"", want)
