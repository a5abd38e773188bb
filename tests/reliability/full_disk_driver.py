"""TEST-ONLY: runs in a private mount namespace (``unshare -m``) where it mounts small
tmpfs file systems, fills them, and drives a broker; prints one JSON object of findings.

``unshare -m --propagation private python full_disk_driver.py BASE``
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from runtime.broker import SyncBroker  # noqa: E402


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], check=True
    )


def _fill(directory: Path, leave: int = 0) -> None:
    """Write a filler file until the file system is full (or only ``leave`` bytes remain)."""
    block = b"\0" * 4096
    with open(directory / "filler", "wb", buffering=0) as f:
        while True:
            free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
            if free <= leave:
                return
            try:
                f.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return


def _result(r: object) -> dict[str, object]:
    return json.loads(r.model_dump_json())  # type: ignore[attr-defined]


def main() -> int:
    base = Path(sys.argv[1])
    out: dict[str, object] = {}
    policy = HERE / "policy.toml"

    # 1. The workspace is a 1 MiB tmpfs with ~128 KiB free: a 512 KiB write cannot fit.
    ws = base / "ws_full"
    _mount_tmpfs(ws, "1m")
    (ws / "keep.txt").write_text("old\n")
    _fill(ws, leave=128 * 1024)
    with SyncBroker(
        workspace=ws, policy=policy, audit=base / "audit_ok.db", tool_folders=[HERE / "tools"]
    ) as broker:
        r = broker.call(
            {"tool": "write_file", "arguments": {"path": "keep.txt", "content": "N" * (1 << 19)}}
        )
        out["write"] = _result(r)
    out["keep"] = (ws / "keep.txt").read_text()
    out["ws_files"] = sorted(p.name for p in ws.iterdir())

    # 2. The audit log lives on a tmpfs that fills up while the broker runs.
    ws2 = base / "ws2"
    ws2.mkdir()
    os.chmod(ws2, 0o755)
    logs = base / "logs"
    _mount_tmpfs(logs, "256k")
    with SyncBroker(
        workspace=ws2, policy=policy, audit=logs / "audit.db", tool_folders=[HERE / "tools"]
    ) as broker:
        before = broker.call(
            {"tool": "write_file", "arguments": {"path": "before.txt", "content": "ok"}}
        )
        out["before"] = _result(before)
        _fill(logs)
        refused = [
            broker.call(
                {"tool": "write_file", "arguments": {"path": f"marker{i}.txt", "content": "ran"}}
            )
            for i in range(3)
        ]
        out["refused"] = [_result(r) for r in refused]
        out["markers"] = sorted(p.name for p in ws2.glob("marker*"))
        (logs / "filler").unlink()
        after = broker.call(
            {"tool": "write_file", "arguments": {"path": "after.txt", "content": "ok"}}
        )
        out["after"] = _result(after)
        report = broker.audit.verify()
        out["verify"] = {"ok": report.ok, "count": report.count}
        out["interrupted"] = broker.audit.interrupted()
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
