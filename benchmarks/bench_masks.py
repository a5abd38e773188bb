"""Cost of the kernel masks over policy-denied paths (issue #6), side by side in one run.

    python benchmarks/bench_masks.py [--json] [-n 40] [--files 10000]

Two workspaces: a small one (a few files) and a large one (``--files`` files in directories
of 100). For each, an isolated 4 KiB ``read_file`` through ``SyncBroker`` on the default
policy (whose ``**/.env``-style globs need the whole walk) and on the same policy with no
deny globs (no masks), interleaved sample by sample; and the walk alone
(``masks.find`` with the default globs, outside any sandbox; wall and CPU), cold (the first
walk of a tree: every directory listed) and warm (unchanged directories replayed from their
kept listings). Figures are medians in ms. With spares, a call pays one walk on its path
(the fork-server's check that the spare's masks still fit); the spare's own walk happens
before the call arrives. The trees are made, then left alone for the racy window
(``masks.RACY_NS``): a directory changed more recently is listed on every walk.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.backends.sandbox import masks  # noqa: E402
from runtime.backends.sandbox.masks import MaskSpec, find  # noqa: E402
from runtime.broker import SyncBroker  # noqa: E402
from runtime.policy import Policy, default_policy_path  # noqa: E402
from runtime.policy.paths import mask_globs  # noqa: E402

__all__ = ["run_benchmark"]

CALL = {"tool": "read_file", "arguments": {"path": "f.txt"}}


def _workspace(parent: Path, name: str, files: int) -> Path:
    ws = parent / name
    ws.mkdir()
    (ws / "f.txt").write_bytes(b"a" * 4096)
    (ws / ".env").write_text("TOKEN=secret\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    for i in range(files):
        d = ws / f"d{i // 100:03d}"
        if i % 100 == 0:
            d.mkdir()
        (d / f"m{i}.txt").write_text("x")
    for path in [ws, *ws.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    return ws


def _no_deny_policy() -> Policy:
    text = default_policy_path().read_text(encoding="utf-8")
    text = re.sub(r"(?m)^deny = \[.*\]$", "deny = []", text)
    text = re.sub(r"(?m)^deny_write = \[.*\]$", "deny_write = []", text)
    # The inline examples check the deny rules this copy drops.
    text = re.sub(r"(?ms)^\[\[examples\]\]\n.*?(?=^\[|\Z)", "", text)
    return Policy.from_toml(text, "<no deny>")


def _ms(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000.0


def _walk_ms(ws: Path, spec: MaskSpec, n: int, *, cold: bool) -> tuple[float, float]:
    """Median wall and CPU ms of the walk alone (CPU time is the steadier figure here);
    ``cold``: with no kept listings (a fresh compiled spec each time)."""
    wall, cpu = [], []
    for _ in range(n):
        if cold:
            masks._matcher.cache_clear()
        fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        try:
            c0 = time.process_time()
            wall.append(_ms(lambda fd=fd: find(fd, spec)))
            cpu.append((time.process_time() - c0) * 1000.0)
        finally:
            os.close(fd)
    return statistics.median(wall), statistics.median(cpu)


def run_benchmark(n: int = 40, files: int = 10_000) -> dict[str, Any]:
    hide, readonly = mask_globs(Policy.default().document.paths)
    spec = MaskSpec(hide=hide, readonly=readonly)
    tmp = Path(tempfile.mkdtemp(prefix="bench-masks-", dir="/tmp"))
    os.chmod(tmp, 0o755)
    out: dict[str, Any] = {"files": files, "n": n}
    sizes = (("small", 10), ("large", files))
    try:
        plain_policy = _no_deny_policy()
        trees = {label: _workspace(tmp, label, count) for label, count in sizes}
        time.sleep(masks.RACY_NS / 1e9 + 0.2)  # past the racy window: listings may be kept
        for label, ws in trees.items():
            with (
                SyncBroker(workspace=ws) as masked,
                SyncBroker(workspace=ws, policy=plain_policy) as plain,
            ):
                for b in (masked, plain):  # warm: zygote, spares
                    for _ in range(3):
                        assert b.call(CALL).success
                a: list[float] = []
                p: list[float] = []
                for _ in range(n):
                    a.append(_ms(lambda: masked.call(CALL)))
                    p.append(_ms(lambda: plain.call(CALL)))
            out[label] = {
                "read_masked_ms": round(statistics.median(a), 2),
                "read_unmasked_ms": round(statistics.median(p), 2),
                "masked_vs_unmasked": round(statistics.median(a) / statistics.median(p), 2),
            }
            wall, cpu = _walk_ms(ws, spec, max(5, n // 4), cold=False)
            out[label].update(walk_ms=round(wall, 2), walk_cpu_ms=round(cpu, 2))
            wall, cpu = _walk_ms(ws, spec, max(5, n // 4), cold=True)
            out[label].update(walk_cold_ms=round(wall, 2), walk_cold_cpu_ms=round(cpu, 2))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-n", type=int, default=40, help="samples per measurement")
    parser.add_argument("--files", type=int, default=10_000, help="files in the large tree")
    args = parser.parse_args(argv)
    res = run_benchmark(args.n, args.files)
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    for label in ("small", "large"):
        r = res[label]
        print(
            f"{label:5} workspace: read_file masked {r['read_masked_ms']} ms, "
            f"unmasked {r['read_unmasked_ms']} ms (x{r['masked_vs_unmasked']}); "
            f"walk alone {r['walk_ms']} ms ({r['walk_cpu_ms']} ms CPU), "
            f"cold {r['walk_cold_ms']} ms ({r['walk_cold_cpu_ms']} ms CPU)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
