"""TEST-ONLY: a broker in its own process, for the tests that kill it with SIGKILL.

``python broker_driver.py MODE WORKSPACE AUDIT POLICY``

- ``nap``: one long sandboxed call (``nap`` 600 s); prints ``calling`` first.
- ``wasm``: wasm json_parse calls in a tight loop (most of each call is the two audit
  appends); prints ``called N`` every 100 calls.
- ``writes``: write_file of 1 MiB to keep.txt in a tight loop, alternately all ``A`` and all
  ``B``; prints ``wrote N`` after each call.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from runtime.broker import SyncBroker  # noqa: E402

SIZE = 1 << 20


def main() -> int:
    mode, workspace, audit, policy = sys.argv[1:5]
    with SyncBroker(
        workspace=workspace, policy=policy, audit=audit, tool_folders=[HERE / "tools"]
    ) as broker:
        if mode == "nap":
            print("calling", flush=True)
            broker.call({"tool": "nap", "arguments": {"seconds": 600}})
        elif mode == "wasm":
            n = 0
            while True:
                result = broker.call({"tool": "json_parse", "arguments": {"text": "[1, 2]"}})
                n += 1
                if n % 100 == 0:
                    print(f"called {n} {result.success}", flush=True)
        elif mode == "writes":
            n = 0
            while True:
                content = ("A" if n % 2 == 0 else "B") * SIZE
                result = broker.call(
                    {"tool": "write_file", "arguments": {"path": "keep.txt", "content": content}}
                )
                n += 1
                print(f"wrote {n} {result.success}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
