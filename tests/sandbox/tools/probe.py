"""TEST-ONLY tool: performs the action named in its arguments and reports what happened.

Used by the sandbox unit tests and the escape suite. Every action returns data (errno
numbers, counts, contents), never raises for an expected denial, so a test can compare
"mechanism on" with "mechanism off".
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import struct
import time
from typing import Any

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _err(exc: OSError) -> dict[str, Any]:
    return {"ok": False, "errno": exc.errno, "error": errno.errorcode.get(exc.errno or 0, "?")}


def _syscall(nr: int, args: list[int]) -> dict[str, Any]:
    ctypes.set_errno(0)
    res = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if res == -1:
        e = ctypes.get_errno()
        return {"ok": False, "errno": e, "error": errno.errorcode.get(e, "?")}
    return {"ok": True, "value": int(res)}


def _frame_fd() -> int:
    # The frame socket is the only fd > 2 the tool holds.
    for fd in range(3, 64):
        try:
            os.fstat(fd)
        except OSError:
            continue
        return fd
    raise RuntimeError("no frame socket found")


def _send_raw(fd_hint: int, data: bytes) -> None:
    view = memoryview(data)
    fd = _frame_fd()
    while view:
        view = view[os.write(fd, view) :]


def _path_op(action: str, path: str, args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """rename(2) by renameat2 with ``flags`` (1 NOREPLACE, 2 EXCHANGE), link(2), or
    umount2(2) with ``flags`` (2 MNT_DETACH) — straight to libc, as a compiled program would."""
    other = args.get("target", "")
    if args.get("rel") and other:
        other = os.path.join(str(ctx.workspace), other)
    flags = int(args.get("flags", 0))
    if action == "rename":
        res = _libc.renameat2(-100, path.encode(), -100, other.encode(), flags)
    elif action == "link":
        res = _libc.linkat(-100, path.encode(), -100, other.encode(), 0)
    else:
        res = _libc.umount2(path.encode(), flags)
    if res != 0:
        e = ctypes.get_errno()
        return {"ok": False, "errno": e, "error": errno.errorcode.get(e, "?")}
    return {"ok": True}


def run(args: dict[str, Any], ctx: Any) -> Any:
    action = args["action"]
    path = args.get("path", "")
    if args.get("rel"):
        # Relative to wherever this backend configuration shows the workspace.
        path = os.path.join(str(ctx.workspace), path)
    if action == "echo":
        return {"arguments": args, "workspace": str(ctx.workspace), "writable": ctx.writable}
    if action == "read":
        try:
            with open(path, "rb") as f:
                return {"ok": True, "data": f.read(args.get("size", 1 << 20)).decode("latin-1")}
        except OSError as exc:
            return _err(exc)
    if action == "write":
        try:
            with open(path, "w") as f:
                f.write(args.get("data", "x"))
            return {"ok": True}
        except OSError as exc:
            return _err(exc)
    if action == "listdir":
        try:
            return {"ok": True, "entries": sorted(os.listdir(path))}
        except OSError as exc:
            return _err(exc)
    if action == "symlink_read":
        try:
            os.symlink(args["target"], path)
        except OSError as exc:
            return _err(exc)
        try:
            with open(path, "rb") as f:
                return {"ok": True, "data": f.read(4096).decode("latin-1")}
        except OSError as exc:
            return _err(exc)
    if action == "chmod":
        try:
            os.chmod(path, int(args.get("mode", 0)))
            return {"ok": True}
        except OSError as exc:
            return _err(exc)
    if action in ("rename", "link", "umount"):
        return _path_op(action, path, args, ctx)
    if action == "env":
        return {"environ": dict(os.environ)}
    if action == "identity":
        return {
            "uid": os.getuid(),
            "gid": os.getgid(),
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "hostname": socket.gethostname(),
        }
    if action == "pids":
        return {"pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
    if action == "connect":
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:
            return {**_err(exc), "stage": "socket"}
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", int(args["port"])))
            s.sendall(b"hello")
            return {"ok": True}
        except OSError as exc:
            return {**_err(exc), "stage": "connect"}
        finally:
            s.close()
    if action == "syscall":
        return _syscall(int(args["nr"]), [int(a) for a in args.get("args", [])])
    if action == "int80":
        # i386 getpid via int 0x80: the seccomp arch check kills the process.
        buf = ctypes.create_string_buffer(
            b"\xb8\x14\x00\x00\x00\xcd\x80\xc3"
        )  # mov eax,20; int 0x80; ret
        libc = _libc
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_long,
        ]
        mem = libc.mmap(None, 4096, 7, 0x22, -1, 0)
        if mem in (None, ctypes.c_void_p(-1).value):
            return {"ok": False, "error": "mmap"}
        ctypes.memmove(mem, buf, len(buf.raw))
        fn = ctypes.CFUNCTYPE(ctypes.c_long)(mem)
        return {"ok": True, "value": int(fn())}
    if action == "fork_bomb":
        count = 0
        children = []
        for _ in range(int(args.get("n", 200))):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
            count += 1
        for pid in children:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return {"forked": count}
    if action == "alloc":
        block = bytearray(int(args["mb"]) * 1024 * 1024)
        for i in range(0, len(block), 4096):
            block[i] = 1
        return {"ok": True, "mb": int(args["mb"])}
    if action == "spin":
        end = time.monotonic() + float(args.get("seconds", 1000))
        while time.monotonic() < end:
            pass
        return {"ok": True}
    if action == "sleep":
        time.sleep(float(args["seconds"]))
        return {"ok": True}
    if action == "ignore_term_and_sleep":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(float(args["seconds"]))
        return {"ok": True}
    if action == "flood":
        return {"data": "x" * int(args["bytes"])}
    if action == "floats":  # 9 bytes of msgpack each, 2 of JSON ("0,")
        return {"floats": [0.0] * int(args["count"])}
    if action == "setsid_survivor":
        # Double fork + setsid: the grandchild outlives the tool unless the pid namespace dies.
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(float(args.get("delay", 1.0)))
                with open(args["marker"], "w") as f:
                    f.write("survived")
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
        if args.get("hang"):
            time.sleep(1000)
        return {"ok": True}
    if action == "kill_parent":
        try:
            os.kill(os.getppid(), signal.SIGKILL)
            return {"ok": True, "ppid": os.getppid()}
        except OSError as exc:
            return _err(exc)
    if action == "kill_pid":
        try:
            os.kill(int(args["pid"]), signal.SIGKILL)
            return {"ok": True}
        except OSError as exc:
            return _err(exc)
    if action == "raw_frame":
        _send_raw(3, bytes.fromhex(args["hex"]))
        if args.get("hang"):
            time.sleep(1000)
        os._exit(0)
    if action == "setup_error":
        # A set-up error frame forged by the running tool: its fields as given (a string
        # phase and message repeated ``times``), after a broker request if asked, then an
        # exit with ``code``.
        from runtime.frames import encode_frame

        if args.get("request_first"):
            # Raw: the call may have no channel (ctx.ask_broker would not ask). The reply,
            # a refusal or not, is read (a frame sent before it is a protocol error too).
            from runtime.frames import FrameDecoder

            _send_raw(3, encode_frame({"type": "request", "op": "http", "payload": {}}))
            decoder = FrameDecoder()
            while not decoder.feed(os.read(_frame_fd(), 65536)):
                pass
        times = int(args.get("times", 1))
        frame = {"type": "setup_error"}
        for key in ("phase", "message", "errno"):
            if key in args:
                value = args[key]
                repeat = key != "errno" and isinstance(value, str)
                frame[key] = value * times if repeat else value
        _send_raw(3, encode_frame(frame, max_size=1 << 30))
        os._exit(int(args.get("code", 0)))
    if action == "result_then_sleep":
        # Its result frame sent as the child sends one, then no exit for ``seconds``.
        from runtime.frames import encode_frame

        _send_raw(3, encode_frame({"type": "result", "value": {"ok": True, "early": True}}))
        time.sleep(float(args.get("seconds", 1000)))
        os._exit(0)
    if action == "raise_unprintable":
        # An exception whose text cannot be made for want of memory: the MemoryError comes
        # out of the child's handling of it (``child._serve``), not out of the tool. With
        # ``shut`` the frame socket is closed first (the child cannot say so in a frame).

        class Unprintable(Exception):
            def __str__(self) -> str:
                raise MemoryError

        if args.get("shut"):
            os.close(_frame_fd())
        raise Unprintable
    if action == "unencodable_result":
        # The child runs out of memory encoding this result (as for one too large for the
        # call's memory): its next encode_frame raises MemoryError.
        from runtime.backends.sandbox import child

        real = child.encode_frame  # type: ignore[attr-defined]

        def once(message: dict[str, Any], max_size: int = 1 << 30) -> bytes:
            child.encode_frame = real  # type: ignore[attr-defined]
            raise MemoryError

        child.encode_frame = once  # type: ignore[attr-defined]
        return {"ok": True}
    if action == "huge_frame_header":
        _send_raw(3, struct.pack(">I", 0xFFFFFFF0))
        time.sleep(1000)
    if action == "exit":
        os._exit(int(args.get("code", 3)))
    if action == "signal":
        os.kill(os.getpid(), int(args["signal"]))
        time.sleep(10)
    if action == "fail":
        from runtime.errors import ToolFailed

        raise ToolFailed(args.get("message", "failed on purpose"))
    if action == "raise":
        raise ValueError(args.get("message", "bad value"))
    if action == "broker":
        return ctx.ask_broker(args["op"], args.get("payload", {}))
    if action == "fds":
        return {"fds": sorted(int(x) for x in os.listdir("/proc/self/fd"))}
    if action == "rlimits":
        import resource

        return {
            n: list(resource.getrlimit(getattr(resource, n)))
            for n in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NOFILE", "RLIMIT_NPROC")
        }
    if action == "mounts":
        with open("/proc/self/mountinfo") as f:
            return {"mounts": [line.split()[4] for line in f]}
    if action == "nonserialisable":
        return {"value": object()}
    raise ValueError(f"unknown action {action!r}")
