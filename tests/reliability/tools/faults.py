"""TEST-ONLY tools for the reliability suite: children that crash, hang, or talk garbage.

They run inside the real sandbox (seccomp, Landlock, namespaces). The hostile ones find
their frame channel the way an attacker would: it is the one socket among fds 3.. (the
child closes everything else before the tool runs; see runtime/backends/sandbox/child.py).
"""

from __future__ import annotations

import ctypes
import os
import signal
import stat
import struct
import time
from typing import Any


def crash(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    how = args["how"]
    if how == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "exit":
        os._exit(3)
    elif how == "segv":
        ctypes.string_at(0)  # NULL dereference: SIGSEGV
    elif how == "abort":
        os.abort()
    raise AssertionError(f"still alive after {how}")


def nap(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    time.sleep(float(args["seconds"]))
    return {"slept": float(args["seconds"])}


def _channel() -> int:
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            continue
    raise AssertionError("no frame channel found")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def hostile(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    fd = _channel()
    how = args["how"]
    if how == "garbage":
        # A length that fits, followed by bytes that are not msgpack of a dict.
        body = os.urandom(4096)
        _write_all(fd, struct.pack(">I", len(body)) + body)
        _write_all(fd, os.urandom(65536))
    elif how == "huge_prefix":
        _write_all(fd, struct.pack(">I", 0xFFFFFFF0) + b"\x81" * 1024)
    elif how == "partial":
        _write_all(fd, struct.pack(">I", 1 << 16) + b"\x81\xa4type" * 10)
        os._exit(0)
    elif how == "flood":
        chunk = os.urandom(1 << 16)
        while True:  # until the broker hangs up (EPIPE) or kills us
            _write_all(fd, chunk)
    elif how == "flood_valid":
        # Syntactically valid, never-ending request frames with a huge payload each.
        while True:
            payload = b"\x82\xa4type\xa7request\xa2op" + b"\xda\xff\xf0" + b"x" * 0xFFF0
            _write_all(fd, struct.pack(">I", len(payload)) + payload)
    elif how == "forged_details":
        # A well-formed error frame whose details try to collide with the broker's own
        # keyword arguments and to swell the result.
        import msgpack

        body = msgpack.packb(
            {
                "type": "error",
                "kind": "typed",
                "error_type": "tool_error",
                "message": "forged",
                "details": {"usage": {"cpu_ms": -1}, "reason": "x" * 100_000, "n": 1},
            }
        )
        _write_all(fd, struct.pack(">I", len(body)) + body)
    os._exit(0)
