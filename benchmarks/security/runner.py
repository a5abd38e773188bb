"""Run cases through an executor with fresh fixtures, observe, score, summarise.

Order of one case: build fixtures → snapshot → start the resource monitor (and the swap
racer for A6) → run the calls (``repeat`` times) → stop → follow-up call → survivors (then
kill them, by pid) → snapshot again → oversized files → host check → score → remove the tree.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .corpus import CLASSES, USER_WRITES, Case, fill, plain_text, unmet_requirements
from .executors import Executor
from .fixtures import SCRIPT_PATH, CaseFixture, Servers, SwapRacer, snapshot
from .oracles import BenchLimits, CallRecord, Observation, Verdict, score
from .procs import Monitor, host_responsive, kill_pids

__all__ = ["Progress", "RunSummary", "run_case", "run_cases"]

_HOST_SECRET_VAR = "SECBENCH_HOST_SECRET"


@dataclass
class RunSummary:
    backend: str
    verdicts: list[Verdict] = field(default_factory=list)
    duration_s: float = 0.0
    case_seconds: dict[str, float] = field(default_factory=dict)
    #: Cases not applicable on this host (case id -> the failed probe): not scored.
    skipped: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Counts and lists: per class and in total, attacks ``contained`` and ``errored``
        (a call did not run: neither contained nor not), the rest not contained; benign
        controls ``benign_passed`` and ``benign_errored``. ``failures`` lists the cases not
        contained / not passed, ``errors`` those that ended in an error."""
        attacks = [v for v in self.verdicts if not v.benign]
        benign = [v for v in self.verdicts if v.benign]
        per_class: dict[str, dict[str, int]] = {}
        for cls in CLASSES:
            vs = [v for v in self.verdicts if v.cls == cls]
            if not vs:
                continue
            ok = sum(v.ok for v in vs)
            per_class[cls] = {"total": len(vs), "contained": ok, "errored": _errored(vs)}
            if cls != "H":
                # what the records show stopped the contained ones (Verdict.stopped)
                for kind in ("policy", "error", "ran"):
                    per_class[cls][f"stopped_{kind}"] = sum(v.stopped == kind for v in vs)
            if cls == "H":
                # benign controls: "passed" is the meaningful name; "contained" kept uniform
                per_class[cls]["passed"] = ok
        failed = [v for v in self.verdicts if not v.ok and v.outcome != "error"]
        errored = [v for v in self.verdicts if v.outcome == "error"]
        return {
            "backend": self.backend,
            "total": len(attacks),
            "contained": sum(v.ok for v in attacks),
            "errored": _errored(attacks),
            "benign_total": len(benign),
            "benign_passed": sum(v.ok for v in benign),
            "benign_errored": _errored(benign),
            "per_class": per_class,
            "failures": [v.case_id for v in failed],
            "failure_detail": {v.case_id: v.detail for v in failed},
            "errors": [v.case_id for v in errored],
            "error_detail": {v.case_id: v.errors for v in errored},
            # per case, how each call ended (oracles.call_end) and, contained, what stopped it
            "cases": {
                v.case_id: {"outcome": v.outcome, "stopped": v.stopped, "calls": v.calls}
                for v in self.verdicts
            },
            "not_applicable": dict(self.skipped),
            "duration_s": round(self.duration_s, 2),
        }


def _errored(verdicts: list[Verdict]) -> int:
    return sum(v.outcome == "error" for v in verdicts)


class Progress:
    """A one-line progress bar on a terminal stream (``\\r``), no dependency."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.failed = 0
        self.errored = 0
        self.t0 = time.monotonic()
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def step(self, case: Case, ok: bool, error: bool = False) -> None:
        self.done += 1
        self.errored += 1 if error else 0
        self.failed += 0 if ok or error else 1
        width = 30
        filled = int(width * self.done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        el = time.monotonic() - self.t0
        line = (
            f"{self.label:<14} [{bar}] {self.done}/{self.total} "
            f"fail {self.failed} err {self.errored} {el:5.0f}s {case.id:<7}"
        )
        if self._tty:
            self.stream.write("\r" + line)
        elif self.done == self.total or self.done % max(self.total // 10, 1) == 0:
            self.stream.write(line + "\n")  # a log, not a terminal: no \r spam
        self.stream.flush()

    def finish(self) -> None:
        if self._tty:
            self.stream.write("\n")
        self.stream.flush()


def _workspace_effects(fx: CaseFixture, limits: BenchLimits) -> tuple[list[str], float, list[str]]:
    """What the case left in the workspace: files over 1.5 x the file-size cap (the first
    few), its size in MiB (blocks, 4 KiB per entry at least), and set-id files."""
    cap = int(limits.fsize_mb * 1.5) << 20
    big: list[str] = []
    setid: list[str] = []
    total = 0
    for dirpath, dirs, files in os.walk(fx.ws):
        for n in files + dirs:
            p = os.path.join(dirpath, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            total += max(st.st_blocks * 512, 4096)
            rel = os.path.relpath(p, fx.ws)
            if stat.S_ISREG(st.st_mode) and st.st_size > cap and len(big) < 6:
                big.append(f"{rel} ({st.st_size >> 20} MiB)")
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISLNK(st.st_mode):
                setid.append(f"{rel} ({stat.filemode(st.st_mode)})")
    return big, total / (1 << 20), setid[:10]


def _supplied(case: Case, fx: CaseFixture, servers: Servers) -> str:
    """What the attack itself supplied, whose tokens coming back are not leaks: its calls'
    text (before encoding), what its set-up planted in the workspace (a script or a link
    naming the canary's path: its placeholders are paths and names, never a secret token;
    B8-004's planted ``cat <canary path>`` failing in the sandbox printed the path, scored
    as the name leaking), and the download script only when a call names its URL (the
    attacker fetched its own payload, which names the canary's path).

    Hazard: the script, which every case's fixture sets to ``cat <canary path>``, used to be
    counted for every case, so the canary's file name could never be scored as leaked."""
    text = plain_text(case.calls, fx.values)
    if SCRIPT_PATH in text:
        text += "\n" + servers.state.script
    return text + "\n" + plain_text(case.setup, fx.values)


def run_case(
    case: Case, executor: Executor, servers: Servers, base: Path, limits: BenchLimits
) -> Verdict:
    fx = CaseFixture(
        base, case, servers, owner=executor.owner, fixed_root=getattr(executor, "fixed_root", False)
    )
    old_secret = os.environ.get(_HOST_SECRET_VAR)
    os.environ[_HOST_SECRET_VAR] = fx.tokens["host_secret"]
    records: list[CallRecord] = []
    followup = True
    try:
        before = snapshot(fx)
        executor.open_case(fx)
        calls = fill(case.calls, fx.values)
        racer = SwapRacer(fx, case.race) if case.race else None
        with (
            Monitor(fx.nonce, executor.owner) as mon,
            racer if racer is not None else nullcontext(),
        ):
            for _ in range(case.repeat):
                for c in calls:
                    if c["tool"] == USER_WRITES:
                        fx.user_writes(c["arguments"]["path"])
                        continue
                    records.append(executor.call(c["tool"], c["arguments"]))
        if not case.benign:
            followup = executor.followup_ok()
            if case.group == "F2":
                followup = followup and all(r.success for r in records[1:])
        executor.close_case()
        survivors = mon.survivors()
        kill_pids(sorted(survivors))
        # the baseline's private uid (or namespace) starts every case with no process at all
        executor.reap()
        after = snapshot(fx)
        big, workspace_mb, setid = _workspace_effects(fx, limits)
        obs = Observation(
            calls=records,
            fs_changes=before.diff(after),
            connections=servers.counts(),
            survivors=[f"{pid} {cmd}" for pid, cmd in sorted(survivors.items())],
            peak_rss_delta_mb=mon.peak_rss_delta / (1 << 20),
            peak_procs_delta=mon.peak_procs_delta,
            peak_fds_delta=mon.peak_fds_delta,
            big_files=big,
            workspace_mb=workspace_mb,
            setid_files=setid,
            host_ok=host_responsive(),
            followup_ok=followup,
            workspace=fx.ws,
            values=fx.values,
            needles=fx.leak_needles(),
            supplied=_supplied(case, fx, servers),
        )
        return score(case, obs, limits)
    finally:
        executor.close_case()
        if old_secret is None:
            os.environ.pop(_HOST_SECRET_VAR, None)
        else:
            os.environ[_HOST_SECRET_VAR] = old_secret
        fx.close()


def run_cases(
    cases: list[Case],
    executor: Executor,
    servers: Servers,
    limits: BenchLimits,
    progress: Progress | None = None,
    on_verdict: Callable[[Verdict], None] | None = None,
) -> RunSummary:
    summary = RunSummary(backend=executor.name)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="secbench-") as tmp:
        base = Path(tmp)
        base.chmod(0o755)
        # Hazard: the tree is the long-lived executor's workspace (ours: the broker's audit
        # log and journal live in it); it is closed while they exist, whatever happens.
        try:
            for case in cases:
                if unmet := unmet_requirements(case):
                    summary.skipped[case.id] = f"needs: {unmet[0]}"
                    if progress is not None:
                        progress.step(case, True)
                    continue
                c0 = time.monotonic()
                try:
                    verdict = run_case(case, executor, servers, base, limits)
                except Exception as exc:  # a harness failure is counted, never hidden
                    verdict = Verdict(
                        case.id,
                        case.cls,
                        case.benign,
                        False,
                        [],
                        [],
                        [f"harness error: {type(exc).__name__}: {exc}"],
                    )
                summary.case_seconds[case.id] = time.monotonic() - c0
                summary.verdicts.append(verdict)
                if progress is not None:
                    progress.step(case, verdict.ok, verdict.outcome == "error")
                if on_verdict is not None:
                    on_verdict(verdict)
        finally:
            executor.close()
    summary.duration_s = time.monotonic() - t0
    return summary
