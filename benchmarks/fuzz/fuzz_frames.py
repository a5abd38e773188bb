"""Atheris harness for the frame decoder (runtime/frames.py). Not run in CI.

    pip install atheris   # needs clang/libFuzzer-compatible wheel for this Python
    python benchmarks/fuzz/fuzz_frames.py -max_total_time=600 corpus_frames/

Property: any byte stream, fed in any chunking, yields dicts or raises a FrameError subclass;
the decoder never holds more than one header plus max_size bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports():
    from runtime.frames import HEADER, FrameDecoder, FrameError

MAX = 4096


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    dec = FrameDecoder(max_size=MAX)
    try:
        while fdp.remaining_bytes():
            piece = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
            for frame in dec.feed(piece):
                if not isinstance(frame, dict):
                    raise AssertionError(f"decoder produced {type(frame).__name__}")
            if dec.pending > HEADER.size + MAX:
                raise AssertionError(f"unbounded buffer: {dec.pending} bytes pending")
        dec.eof()
    except FrameError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
