"""Cost of the kernel masks over policy-denied paths (issues #6, #3), side by side in one run.

    python benchmarks/bench_masks.py [--json] [-n 40] [--files 10000] [--packages 3000]
                                     [--trees small,large,js] [--call read|write]
                                     [--deny GLOB ...]
    python benchmarks/bench_masks.py --pins 1000 [-n 7]   (as root)

Three workspaces: ``small`` (a few files), ``large`` (``--files`` files in directories of
100) and ``js``, a pnpm-shaped JavaScript checkout (``--packages`` packages of 50 files in a
``node_modules/.pnpm`` store, nested ``node_modules``, scoped packages, three links between
packages each: 3,000 packages are 150,004 files, 16,210 directories, 9,200 links). For each,
an isolated 4 KiB ``read_file`` through ``SyncBroker`` on three policies, interleaved sample
by sample: the default policy (whose ``**/.env``-style globs need the whole tree looked at),
the default policy with ``mask_max_entries`` raised to 10,000,000 (the default refuses a tree
past its bound: then only this one runs), and the same policy with no deny globs (no masks).
Per call: the median wall ms, and the mean CPU ms of the broker process
(``broker_cpu_ms``: this process, RUSAGE_SELF) and of the fork-server with its cloner and
every call's processes (``sandbox_cpu_ms``, psutil: tick-sampled, so a mean). Then the walk
alone outside any sandbox (``masks.find``, the timestamp walk: cold, every directory listed;
warm, unchanged directories replayed from their kept listings), and, where the tree has the
watched look (``masks.find(watch=True)``), the look on a quiet tree and after one file was
written deep in it. ``--call write``: a 4 KiB ``write_file`` instead of the ``read_file``
(a call that may write: on a policy with ``deny_write`` globs the fork-server looks at the
tree again when it ends, ``_denywrite``; and its child binds onto itself every directory a
rename could carry a masked entry out of its glob through, ``_pins``). ``--deny GLOB``: more
deny globs on the two masked policies (anchored ones, ``config/**`` or ``d*/m1*.txt``, are what
makes a writing call pin directories). ``--pins N``: only the mounts, ``masks.apply`` timed in
a private mount namespace of a forked child (as root): N directories each holding a ``k.key``,
hidden by ``**/k.key`` (no pins) and by ``d*/k.key`` (each directory pinned too), with the
pins off and on. The trees are made, then left alone for the racy window
(``masks.RACY_NS``): a directory changed more recently is listed on every timestamp walk.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from runtime.backends.sandbox import _linux, masks  # noqa: E402
from runtime.backends.sandbox.masks import MaskSpec, find  # noqa: E402
from runtime.backends.sandbox.zygote import CLONER_NAME  # noqa: E402
from runtime.broker import SyncBroker  # noqa: E402
from runtime.policy import Policy, default_policy_path  # noqa: E402
from runtime.policy.paths import mask_globs  # noqa: E402

__all__ = ["js_workspace", "run_benchmark"]

CALLS = {
    "read": {"tool": "read_file", "arguments": {"path": "f.txt"}},
    "write": {"tool": "write_file", "arguments": {"path": "out.txt", "content": "w" * 4096}},
}
CALL = CALLS["read"]
_ZYGOTE = "runtime.backends.sandbox.zygote"


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
    _open_up(ws)
    return ws


def js_workspace(ws: Path, packages: int = 3000, files_per_package: int = 50) -> Path:
    """A pnpm-shaped checkout: ``node_modules/.pnpm/<name>@<version>/node_modules/<name>``
    with ``lib`` and ``dist``, every tenth package scoped (``@scopeN/name``), each package's
    store slot linking three others, and the first 200 linked from ``node_modules``."""
    ws.mkdir()
    (ws / "f.txt").write_bytes(b"a" * 4096)
    (ws / ".env").write_text("TOKEN=secret\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "package.json").write_text("{}\n")
    store = ws / "node_modules" / ".pnpm"
    store.mkdir(parents=True)
    names = [f"pkg{i:04d}" if i % 10 else f"@scope{i % 7}/pkg{i:04d}" for i in range(packages)]

    def slot_of(i: int) -> str:
        return f"{names[i].replace('/', '+')}@1.0.{i % 9}"

    for i, name in enumerate(names):
        slot = store / slot_of(i) / "node_modules"
        pkg = slot / name
        (pkg / "lib").mkdir(parents=True)
        (pkg / "dist").mkdir()
        (pkg / "package.json").write_text(json.dumps({"name": name}) + "\n")
        (pkg / "README.md").write_text("# readme\n")
        (pkg / "index.js").write_text("module.exports = 1;\n")
        for j in range(files_per_package - 3):
            (pkg / ("lib" if j % 3 else "dist") / f"m{j}.js").write_text("x")
        for k in (1, 7, 31):
            d = (i + k) % packages
            link = slot / names[d]
            link.parent.mkdir(parents=True, exist_ok=True)
            up = "../" * (names[d].count("/") + 2)
            os.symlink(f"{up}{slot_of(d)}/node_modules/{names[d]}", link)
    for i, name in enumerate(names[:200]):
        link = ws / "node_modules" / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f"{'../' * name.count('/')}.pnpm/{slot_of(i)}/node_modules/{name}", link)
    _open_up(ws)
    return ws


def _open_up(ws: Path) -> None:
    # The sandbox runs as an unprivileged uid: the tree must be readable by it.
    for top, _dirs, files in os.walk(ws):
        os.chmod(top, 0o777)
        for name in files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                os.chmod(path, 0o666)


def _policy(*, deny: bool, bound: int | None, extra: tuple[str, ...] = ()) -> Policy:
    text = default_policy_path().read_text(encoding="utf-8")
    if deny and extra:
        more = "".join(f", {json.dumps(g)}" for g in extra)
        text, n = re.subn(r"(?m)^(deny = \[.*)\]$", lambda m: f"{m.group(1)}{more}]", text)
        assert n == 1
    if not deny:
        text = re.sub(r"(?m)^deny = \[.*\]$", "deny = []", text)
        text = re.sub(r"(?m)^deny_write = \[.*\]$", "deny_write = []", text)
        # The inline examples check the deny rules this copy drops.
        text = re.sub(r"(?ms)^\[\[examples\]\]\n.*?(?=^\[|\Z)", "", text)
    if bound is not None:
        text = re.sub(r"(?m)^\[paths\]$", f"[paths]\nmask_max_entries = {bound}", text)
    return Policy.from_toml(text, "<bench>")


def _zygotes() -> dict[int, psutil.Process]:
    out = {}
    for child in psutil.Process().children():
        try:
            if _ZYGOTE in " ".join(child.cmdline()):
                out[child.pid] = child
        except psutil.Error:
            continue
    return out


def _sandbox_cpu(zygote: psutil.Process) -> float:
    """CPU ms of the fork-server, its cloner (never reaped) and its reaped calls."""
    total = 0.0
    for proc in [zygote, *zygote.children()]:
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        if proc is zygote:
            total += (t.user + t.system + t.children_user + t.children_system) * 1000.0
        elif proc.name() == CLONER_NAME.decode():
            total += (t.user + t.system) * 1000.0
    return total


def _self_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return (ru.ru_utime + ru.ru_stime) * 1000.0


class _Arm:
    """One broker on one policy, with its fork-server for the CPU counts."""

    def __init__(
        self, label: str, ws: Path, policy: Policy, call: dict[str, Any] | None = None
    ) -> None:
        before = set(_zygotes())
        self.label = label
        self.call = call or CALL
        self.broker = SyncBroker(workspace=ws, policy=policy)
        self.broker.__enter__()
        self.refused: str | None = None
        for _ in range(3):  # warm: zygote, spares, the first walk
            result = self.broker.call(self.call)
            if not result.success:
                self.refused = result.error.message if result.error else "failed"
                break
        new = [p for pid, p in _zygotes().items() if pid not in before]
        self.zygote = new[0] if len(new) == 1 else None
        self.wall: list[float] = []
        self.broker_cpu: list[float] = []
        self.sandbox_cpu: list[float] = []

    def sample(self) -> None:
        if self.refused:
            return
        z0 = _sandbox_cpu(self.zygote) if self.zygote else 0.0
        c0 = _self_cpu()
        t0 = time.perf_counter()
        result = self.broker.call(self.call)
        wall = (time.perf_counter() - t0) * 1000.0
        c1 = _self_cpu()
        if not result.success:
            raise RuntimeError(f"{self.label}: {result.error}")
        self.wall.append(wall)
        self.broker_cpu.append(c1 - c0)
        if self.zygote:
            self.sandbox_cpu.append(_sandbox_cpu(self.zygote) - z0)

    def report(self) -> dict[str, Any]:
        if self.refused:
            return {"refused": self.refused[:160]}
        out = {
            "read_ms": round(statistics.median(self.wall), 2),
            "broker_cpu_ms": round(statistics.fmean(self.broker_cpu), 2),
        }
        if self.sandbox_cpu:
            out["sandbox_cpu_ms"] = round(statistics.fmean(self.sandbox_cpu), 2)
        return out

    def close(self) -> None:
        self.broker.__exit__(None, None, None)


def _walk_ms(ws: Path, spec: MaskSpec, n: int, *, cold: bool) -> tuple[float, float]:
    """Median wall and CPU ms of the timestamp walk alone; ``cold``: with no kept listings
    (a fresh compiled spec each time)."""
    wall, cpu = [], []
    for _ in range(n):
        if cold:
            masks._matcher.cache_clear()
        fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        try:
            c0 = time.process_time()
            t0 = time.perf_counter()
            find(fd, spec)
            wall.append((time.perf_counter() - t0) * 1000.0)
            cpu.append((time.process_time() - c0) * 1000.0)
        finally:
            os.close(fd)
    return statistics.median(wall), statistics.median(cpu)


def _look_ms(ws: Path, spec: MaskSpec, n: int, deep: Path | None) -> dict[str, float]:
    """The watched look (``signature``) where the tree has it: quiet, and after one file was
    written in ``deep`` before each look."""
    if "watch" not in inspect.signature(find).parameters:
        return {}
    masks.signature(str(ws), spec)  # the watches
    out: dict[str, float] = {}
    for label, target in (("look_quiet", None), ("look_after_write", deep)):
        wall, cpu = [], []
        for i in range(n):
            if target is not None:
                (target / f"bench-{i}.js").write_text("x")
            c0 = time.process_time()
            t0 = time.perf_counter()
            masks.signature(str(ws), spec)
            wall.append((time.perf_counter() - t0) * 1000.0)
            cpu.append((time.process_time() - c0) * 1000.0)
        out[f"{label}_ms"] = round(statistics.median(wall), 2)
        out[f"{label}_cpu_ms"] = round(statistics.median(cpu), 2)
    return out


def _apply_once(ws: Path, spec: MaskSpec, empty: Path) -> float:
    """ms of ``masks.apply`` for ``ws`` in a fresh private mount namespace (a forked child)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            _linux.unshare(_linux.CLONE_NEWNS)
            _linux.mount(None, "/", None, _linux.MS_REC | _linux.MS_PRIVATE, None)
            fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
            targets = masks.find_settled(fd, spec)
            t0 = time.perf_counter()
            masks.apply(str(ws), targets, empty_file=str(empty / "f"), empty_dir=str(empty / "d"))
            os.write(wfd, f"{(time.perf_counter() - t0) * 1000.0}".encode())
        finally:
            os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return float(text)


def run_pins(count: int, n: int = 7) -> dict[str, Any]:
    """The mounts alone (``--pins``): median and min ms of ``masks.apply`` per arm."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-pins-", dir="/tmp"))
    try:
        ws = tmp / "ws"
        ws.mkdir()
        for i in range(count):
            d = ws / f"d{i:05d}"
            d.mkdir()
            (d / "k.key").write_text("k")
            (d / "a.txt").write_text("a")
        (tmp / "e" / "d").mkdir(parents=True)
        (tmp / "e" / "f").write_text("")
        out: dict[str, Any] = {"directories": count, "n": n}
        out["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        arms = {
            f"{glob} pin={pin}": MaskSpec(hide=(glob,), pin=pin)
            for glob in ("**/k.key", "d*/k.key")
            for pin in (False, True)
        }
        samples: dict[str, list[float]] = {label: [] for label in arms}
        for _ in range(n):  # interleaved
            for label, spec in arms.items():
                samples[label].append(_apply_once(ws, spec, tmp / "e"))
        for label, ms in samples.items():
            out[label] = {"median_ms": round(statistics.median(ms), 2), "min_ms": round(min(ms), 2)}
        out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_benchmark(
    n: int = 40,
    files: int = 10_000,
    packages: int = 3000,
    trees: tuple[str, ...] = ("small", "large", "js"),
    call: str = "read",
    deny: tuple[str, ...] = (),
) -> dict[str, Any]:
    hide, readonly = mask_globs(Policy.default().document.paths)
    hide = (*hide, *deny)
    spec = MaskSpec(hide=hide, readonly=readonly, max_entries=10_000_000)
    tmp = Path(tempfile.mkdtemp(prefix="bench-masks-", dir="/tmp"))
    os.chmod(tmp, 0o755)
    out: dict[str, Any] = {"files": files, "packages": packages, "n": n, "call": call}
    if deny:
        out["deny"] = list(deny)
    try:
        made: dict[str, Path] = {}
        for label in trees:
            if label == "js":
                made[label] = js_workspace(tmp / label, packages)
            else:
                made[label] = _workspace(tmp, label, 10 if label == "small" else files)
        time.sleep(masks.RACY_NS / 1e9 + 0.2)  # past the racy window: listings may be kept
        policies = {
            "default": _policy(deny=True, bound=None, extra=deny),
            "raised": _policy(deny=True, bound=10_000_000, extra=deny),
            "unmasked": _policy(deny=False, bound=None),
        }
        out["loadavg_before"] = [round(x, 2) for x in os.getloadavg()]
        for label, ws in made.items():
            arms = [_Arm(name, ws, policy, CALLS[call]) for name, policy in policies.items()]
            try:
                for _ in range(n):
                    for arm in arms:
                        arm.sample()
                row: dict[str, Any] = {arm.label: arm.report() for arm in arms}
            finally:
                for arm in arms:
                    arm.close()
            count = max(3, n // 8)
            wall, cpu = _walk_ms(ws, spec, count, cold=False)
            row.update(walk_ms=round(wall, 2), walk_cpu_ms=round(cpu, 2))
            wall, cpu = _walk_ms(ws, spec, 2 if label == "js" else count, cold=True)
            row.update(walk_cold_ms=round(wall, 2), walk_cold_cpu_ms=round(cpu, 2))
            deep = next(ws.glob("node_modules/.pnpm/pkg0001@*/node_modules/pkg0001/lib"), None)
            row.update(_look_ms(ws, spec, count, deep or ws))
            out[label] = row
        out["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-n", type=int, default=40, help="samples per measurement")
    parser.add_argument("--files", type=int, default=10_000, help="files in the large tree")
    parser.add_argument("--packages", type=int, default=3000, help="packages in the js tree")
    parser.add_argument("--trees", default="small,large,js", help="which trees to measure")
    parser.add_argument("--call", choices=sorted(CALLS), default="read", help="the call timed")
    parser.add_argument(
        "--deny", action="append", default=[], help="another deny glob (repeatable)"
    )
    parser.add_argument(
        "--pins", type=int, default=0, help="only the mounts: N pinned directories (root)"
    )
    args = parser.parse_args(argv)
    if args.pins:
        print(json.dumps(run_pins(args.pins, min(args.n, 40)), indent=1))
        return 0
    res = run_benchmark(
        args.n,
        args.files,
        args.packages,
        tuple(args.trees.split(",")),
        call=args.call,
        deny=tuple(args.deny),
    )
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    for label in args.trees.split(","):
        r = res[label]
        print(f"{label}:")
        for arm in ("default", "raised", "unmasked"):
            print(f"  {res['call']}, {arm:8} policy: {r[arm]}")
        rest = {k: v for k, v in r.items() if k not in ("default", "raised", "unmasked")}
        print(f"  walk alone: {rest}")
    print(f"load average {res['loadavg_before']} -> {res['loadavg_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
