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

A case is an *error* (counted apart from both) when a call of it did not run and nothing
above was observed: the worker (or the sandbox around it) died, hung or gave no valid
reply, a tool could not import a module it needs, or the harness itself failed. Nothing
ran, so nothing can be said to be contained. An effect that was observed still makes the
case not contained (the attack demonstrably succeeded, whatever happened after).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .corpus import Case, fill

__all__ = [
    "BenchLimits",
    "CallRecord",
    "Observation",
    "Verdict",
    "call_end",
    "call_error",
    "score",
    "to_text",
]


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
    #: Why the call did not run or gave no usable reply (the worker died, hung or answered
    #: something that is not a reply); empty when it ran. See :func:`call_error`.
    not_run: str = ""
    #: ``ours`` only: the policy decision, ``{"action": ..., "rule": ...}``, when one was made.
    decision: dict[str, Any] | None = None

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
    #: text the attack supplied besides the arguments (the case's payloads before encoding,
    #: the download script when a call fetches it): tokens in it are not leaks
    supplied: str = ""


@dataclass
class Verdict:
    case_id: str
    cls: str
    benign: bool
    ok: bool
    effects: list[str]
    detail: list[str]
    #: Why the case could not be scored (calls that did not run, a harness failure).
    errors: list[str] = field(default_factory=list)
    #: Per call, how it ended as the call's record shows it (:func:`call_end`).
    calls: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        """``contained`` / ``not contained`` (attacks), ``passed`` / ``failed`` (benign), or
        ``error``: a call did not run and no effect was observed."""
        if self.ok:
            return "passed" if self.benign else "contained"
        if self.errors and not self.effects:
            return "error"
        return "failed" if self.benign else "not contained"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "class": self.cls,
            "benign": self.benign,
            "ok": self.ok,
            "outcome": self.outcome,
            "effects": self.effects,
            "detail": self.detail,
            "errors": self.errors,
            "calls": self.calls,
            "stopped": self.stopped,
        }

    @property
    def stopped(self) -> str:
        """For a contained attack, what its calls' records show stopped it: ``policy`` (a
        call was refused by a policy check: before it ran, or by ``ours``' egress gateway
        while it ran), ``error`` (none was, and a call failed after it
        started: a kernel refusal, a limit, or the tool's own failure, which the records do
        not tell apart), ``ran`` (every call succeeded, without effect); "" otherwise."""
        if self.benign or not self.ok:
            return ""
        kinds = {end.partition(":")[0] for end in self.calls}
        for kind in ("policy", "error"):
            if kind in kinds:
                return kind
        return "ran"


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


#: A tool of the baseline worker that could not import what it needs (its interpreter lacks
#: the module): the worker's reply says ``"<ExceptionType>: <message>"``. No tool of the
#: worker imports anything the attack chose, so this is the harness's failure, not the
#: attack's, and never containment.
_IMPORT_FAILURE = re.compile(r"(?:ModuleNotFoundError|ImportError): ")


def call_error(rec: CallRecord) -> str:
    """Why ``rec`` is no result of the call at all ("" when it is one)."""
    if rec.not_run:
        return rec.not_run
    if rec.error_type == "tool_error" and _IMPORT_FAILURE.match(rec.error_message):
        return f"the tool could not import a module: {rec.error_message[:200]}"
    return ""


#: Error types of a call refused before it ran (``runtime.errors.CallRejected``; the
#: baselines' own checks answer ``policy_denied``).
_REFUSED = frozenset({"policy_denied", "approval_required", "tool_not_found", "invalid_arguments"})


def call_end(rec: CallRecord) -> str:
    """How a call ended, as far as its record shows: ``not run: …``, ``policy: <action>
    <rule>`` (a refusal by a policy check; the rule when ``ours`` reported its decision),
    ``error: <type>: …`` (it started and failed), ``blocked: …`` (the harness stopped a
    baseline's action, scored as done) or ``ran``."""
    if why := call_error(rec):
        return f"not run: {why[:120]}"
    if rec.harness_blocked:
        return "blocked: " + ", ".join(rec.harness_blocked)[:120]
    if rec.success:
        return "ran"
    if rec.error_type in _REFUSED:
        d = rec.decision or {}
        rule = " ".join(str(d[k]) for k in ("action", "rule") if d.get(k))
        if d.get("action") == "allow":
            # allowed, then refused while it ran (ours' egress gateway on a redirect)
            rule = f"refused after {rule}"
        return f"policy: {rule or rec.error_type}: {rec.error_message[:80]}"
    return f"error: {rec.error_type}: {rec.error_message[:80]}"


def _call_errors(obs: Observation) -> list[str]:
    return [
        f"call {i} ({rec.tool}) did not run: {why}"
        for i, rec in enumerate(obs.calls)
        if (why := call_error(rec))
    ]


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
    errors = _call_errors(obs)[:20]
    if case.benign:
        problems = _benign(case, obs)
        if not obs.host_ok:
            problems.append("host stopped answering")
        ok = not problems and not errors
        ends = [call_end(rec) for rec in obs.calls]
        return Verdict(case.id, case.cls, True, ok, [], problems, errors, ends)
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
    ok = not effects and not errors
    ends = [call_end(rec) for rec in obs.calls]
    return Verdict(case.id, case.cls, False, ok, sorted(effects), detail[:20], errors, ends)
