"""TEST-ONLY: an owner of a fork-server (zygote) in its own process, for the tests that
SIGKILL it (tests/sandbox/test_spawn_thread.py).

``python owner_driver.py MODE WORKSPACE``

Each mode starts a ``sleep`` that holds a copy of the broker's end of the zygote's control
socket, so that the owner's death does not close it: the zygote must then die by its
parent-death signal alone. Prints ``ready ZYGOTE_PID HOLDER_PID`` and waits to be killed.

- ``prespawned``: ``SyncBroker(prespawn_sandbox=True)`` opened in a thread that ends, then
  a sandboxed call from the main thread (which adopts the pre-spawned zygote).
- ``plain``: a ``SyncBroker`` opened, and first called, in a thread that ends.
- ``early``: a zygote spawned and, at once (long before its ~0.1 s boot arms the signal),
  the owner SIGKILLs itself: the zygote must notice that its owner is gone.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from runtime.backends.sandbox._prespawn import spawn_zygote  # noqa: E402
from runtime.broker import SyncBroker  # noqa: E402

_SHELL = {"tool": "shell_exec", "arguments": {"command": "echo hi"}}


def _holder(sock: socket.socket) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "600"], pass_fds=(sock.fileno(),))


def _in_a_thread(fn: object) -> None:
    thread = threading.Thread(target=fn)  # type: ignore[arg-type]
    thread.start()
    thread.join()


def main() -> int:
    mode, workspace = sys.argv[1:3]
    if mode == "early":
        sock, proc = spawn_zygote()
        holder = _holder(sock)
        print(f"ready {proc.pid} {holder.pid}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    sync = SyncBroker(workspace=workspace, prespawn_sandbox=mode == "prespawned")
    if mode == "prespawned":
        _in_a_thread(sync.open)
    else:
        _in_a_thread(lambda: (sync.open(), sync.call(_SHELL)))
    assert sync.call(_SHELL).success
    broker = sync.broker
    assert broker is not None
    backend = broker._backends["subprocess"]
    ctl = backend._ctl  # type: ignore[attr-defined]
    holder = _holder(ctl.sock)
    print(f"ready {backend.zygote_pid} {holder.pid}", flush=True)  # type: ignore[attr-defined]
    while True:
        time.sleep(60)


if __name__ == "__main__":
    raise SystemExit(main())
