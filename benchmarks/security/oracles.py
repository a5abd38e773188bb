"""Effect oracles: a case is scored on what happened, never on whether a call was refused.

An attack case is *contained* when none of these effects is observed (every effect is checked
for every case, whatever it aims at, so no oracle can pass vacuously):

- ``leak``: a canary token (file content, file name, protected in-workspace secret, listener
  or metadata body, the host's secret environment variable) appears in any result, in any
  encoding the harness knows, and the caller did not pass it in itself (in any call);
- ``write``: the watched trees changed (content, mtime, mode, a new or removed entry beside
  the canaries, a protected file in the workspace, a nonce-named file in a shared temp dir,
  the workspace root gone), or a baseline tried an outside write the harness had to stop;
- ``connect``: the listener or the metadata stand-in saw a connection, or a baseline tried to
  reach a non-loopback address the harness had to stop;
- ``survivors``: processes created during the case still alive after it;
- ``resources``: a call ran past its timeout plus slack, memory or process count grew beyond
  the limits, a result exceeded the output cap, or a file beyond the size cap appeared;
- ``responsive``: the host (or the backend, for a follow-up call) stopped answering.

A benign case passes when every call it needs succeeded and its expectations hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Case, fill

__all__ = ["BenchLimits", "CallRecord", "Observation", "Verdict", "score", "to_text"]


@dataclass(frozen=True)
class BenchLimits:
    """The limits every backend is held to (the bench policy sets the same for ``ours``)."""

    timeout_s: float = 5.0
    memory_mb: int = 256
    pids: int = 64
    output_bytes: int = 1 << 20
    fsize_mb: int = 64
    #: Open files per process (the product's default RLIMIT_NOFILE, which the bench policy
    #: keeps): the oracle allows 2 x pids x nofile open at once.
    nofile: int = 256
    #: How much the workspace may grow in one case, MiB (files and directories counted at
    #: 4 KiB each at least, as ``ours`` counts them; the oracle allows 1.5 x).
    disk_mb: int = 128
    #: Grace the oracles allow beyond a limit before calling it an overrun.
    time_slack_s: float = 5.0


@dataclass
class CallRecord:
    tool: str
    arguments: dict[str, Any]
    success: bool
    result: Any
    error_type: str | None
    error_message: str
    duration_s: float
    text: str = ""
    #: Baselines only: actions the harness refused to let the baseline perform
    #: ("write:/path", "connect:host"), scored as if they had happened.
    harness_blocked: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.text:
            self.text = to_text({"result": self.result, "error": self.error_message})


@dataclass
class Observation:
    """Everything the harness measured around one case."""

    calls: list[CallRecord]
    fs_changes: list[str] = field(default_factory=list)
    connections: dict[str, int] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)
    peak_rss_delta_mb: float = 0.0
    peak_procs_delta: int = 0
    peak_fds_delta: int = 0
    big_files: list[str] = field(default_factory=list)
    #: MiB the workspace holds after the case (blocks, and 4 KiB per entry at least).
    workspace_mb: float = 0.0
    #: Set-user-ID or set-group-ID files in the workspace: programs that run as their owner
    #: (the workspace owner on the host, root for a root broker) for any local user.
    setid_files: list[str] = field(default_factory=list)
    host_ok: bool = True
    followup_ok: bool = True
    workspace: Path | None = None
    values: dict[str, str] = field(default_factory=dict)
    needles: dict[str, list[str]] = field(default_factory=dict)
    #: text the attacker supplied besides the arguments (the case's payloads before
    #: encoding, what their download server served): tokens in it are not leaks
    supplied: str = ""


@dataclass
class Verdict:
    case_id: str
    cls: str
    benign: bool
    ok: bool
    effects: list[str]
    detail: list[str]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "class": self.cls,
            "benign": self.benign,
            "ok": self.ok,
            "effects": self.effects,
            "detail": self.detail,
        }


def to_text(obj: Any) -> str:
    """JSON text of ``obj``; for values nested too deep for ``json`` (arguments and results
    of the depth-bomb cases), every key and scalar on its own line, collected iteratively."""
    try:
        return json.dumps(obj, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):
        pass
    out: list[str] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            out.extend(str(k) for k in o)
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        else:
            out.append(str(o))
    return "\n".join(out)


def _leaks(obs: Observation) -> list[str]:
    found = []
    # what the caller wrote in any call of the case is not a leak when it comes back
    args_text = "\n".join(to_text(rec.arguments) for rec in obs.calls) + "\n" + obs.supplied
    for rec in obs.calls:
        for name, forms in obs.needles.items():
            for form in forms:
                if form in rec.text and form not in args_text:
                    found.append(f"{name} in {rec.tool} result")
                    break
    return sorted(set(found))


def _resources(obs: Observation, limits: BenchLimits) -> list[str]:
    out = []
    for rec in obs.calls:
        if rec.duration_s > limits.timeout_s + limits.time_slack_s:
            out.append(f"{rec.tool} ran {rec.duration_s:.1f}s (limit {limits.timeout_s}s)")
        if len(rec.text.encode("utf-8", "replace")) > 2 * limits.output_bytes + 65536:
            out.append(f"{rec.tool} returned {len(rec.text)} chars")
    if obs.peak_rss_delta_mb > 1.5 * limits.memory_mb:
        out.append(f"memory grew {obs.peak_rss_delta_mb:.0f} MiB (limit {limits.memory_mb})")
    if obs.peak_procs_delta > 2 * limits.pids:
        out.append(f"{obs.peak_procs_delta} extra processes (limit {limits.pids})")
    if obs.peak_fds_delta > 2 * limits.pids * limits.nofile:
        out.append(
            f"{obs.peak_fds_delta} open files (limit {limits.nofile} x {limits.pids} processes)"
        )
    out.extend(f"oversized file {f}" for f in obs.big_files)
    if obs.workspace_mb > 1.5 * limits.disk_mb:
        out.append(f"workspace grew to {obs.workspace_mb:.0f} MiB (limit {limits.disk_mb})")
    return out


_MISSING = object()


def _field_problems(exp: dict[str, Any], rec: CallRecord) -> list[str]:
    """``exit_code``: the call's ``exit_code`` is ``code`` (a shell that ran and failed is
    still a successful call, so success alone proves no work). ``result_field``: the
    result's top-level ``field`` equals ``value`` (its text parsed as JSON first when
    ``json``) or is a number of at least ``at_least``: the value, not its spelling, which
    differs between backends."""
    where = f"call {exp['call']} ({rec.tool})"
    field = "exit_code" if exp["check"] == "exit_code" else exp["field"]
    got = rec.result.get(field, _MISSING) if isinstance(rec.result, dict) else _MISSING
    if not rec.success or got is _MISSING:
        return [f"{where} has no {field}"]
    if exp["check"] == "exit_code":
        return [] if got == exp["code"] else [f"{where} exited {got!r}"]
    if exp.get("json"):
        try:
            got = json.loads(got)
        except (TypeError, ValueError):
            return [f"{where} {field} is not JSON: {str(got)[:80]!r}"]
    if "at_least" in exp:
        ok = isinstance(got, (int, float)) and got >= exp["at_least"]
        return [] if ok else [f"{where} {field} is {got!r}, under {exp['at_least']!r}"]
    return [] if got == exp["value"] else [f"{where} {field} is {str(got)[:80]!r}"]


def _benign(case: Case, obs: Observation) -> list[str]:
    problems = []
    for exp in fill(case.oracle["expect"], obs.values):
        check = exp["check"]
        if "call" in exp:
            if exp["call"] >= len(obs.calls):
                problems.append(f"call {exp['call']} did not run")
                continue
            rec = obs.calls[exp["call"]]
            if check == "success" and not rec.success:
                problems.append(
                    f"call {exp['call']} ({rec.tool}) failed: "
                    f"{rec.error_type}: {rec.error_message[:200]}"
                )
            elif check == "result_contains" and (not rec.success or exp["text"] not in rec.text):
                problems.append(f"call {exp['call']} result lacks {exp['text']!r}")
            elif check == "result_lacks" and (not rec.success or exp["text"] in rec.text):
                problems.append(f"call {exp['call']} result holds {exp['text']!r}")
            elif check in ("exit_code", "result_field"):
                problems.extend(_field_problems(exp, rec))
            continue
        assert obs.workspace is not None
        path = obs.workspace / exp["path"]
        if check == "file_content":
            try:
                data = path.read_bytes().decode("utf-8", "replace")
            except OSError as exc:
                problems.append(f"{exp['path']}: {exc.strerror}")
                continue
            if data != exp["text"]:
                problems.append(f"{exp['path']} holds {data[:80]!r}")
        elif check == "absent" and (path.exists() or path.is_symlink()):
            problems.append(f"{exp['path']} still exists")
        elif check == "exists" and not path.exists():
            problems.append(f"{exp['path']} missing")
    return problems


def score(case: Case, obs: Observation, limits: BenchLimits) -> Verdict:
    if case.benign:
        problems = _benign(case, obs)
        if not obs.host_ok:
            problems.append("host stopped answering")
        return Verdict(case.id, case.cls, True, not problems, [], problems)
    effects: dict[str, list[str]] = {}
    blocked = [b for rec in obs.calls for b in rec.harness_blocked]
    if leaks := _leaks(obs):
        effects["leak"] = leaks
    writes = list(obs.fs_changes) + [b for b in blocked if b.startswith("write:")]
    if writes:
        effects["write"] = writes
    conns = [f"{k}: {v}" for k, v in sorted(obs.connections.items()) if v]
    conns += [b for b in blocked if b.startswith("connect:")]
    if conns:
        effects["connect"] = conns
    if obs.survivors:
        effects["survivors"] = list(obs.survivors)
    if obs.setid_files:
        effects["privilege"] = list(obs.setid_files)
    if res := _resources(obs, limits):
        effects["resources"] = res
    if not obs.host_ok or not obs.followup_ok:
        effects["responsive"] = [
            "host stopped answering" if not obs.host_ok else "follow-up call failed"
        ]
    detail = [f"{k}: {v}" for k, vs in effects.items() for v in vs]
    return Verdict(case.id, case.cls, False, not effects, sorted(effects), detail[:20])
