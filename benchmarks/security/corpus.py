"""The attack corpus: loading, checking and filling the case records in ``cases/*.json``.

A record is data (see ``generate.py`` for the families): ``id, class, group, title, technique,
source, setup, calls, oracle`` and optionally ``race`` and ``repeat``. Placeholders are filled
per case from the fixture's values; only the names in :data:`PLACEHOLDERS` are replaced, so a
shell brace such as ``${IFS}`` or ``{rm,-rf,x}`` passes through untouched.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CASES_DIR",
    "CLASSES",
    "MIN_COUNTS",
    "PLACEHOLDERS",
    "USER_WRITES",
    "Case",
    "CorpusError",
    "fast_subset",
    "fill",
    "load_corpus",
    "plain_text",
    "unmet_requirements",
]

CASES_DIR = Path(__file__).resolve().parent / "cases"
CLASSES = ("A", "B", "C", "D", "E", "F", "G", "H")
#: Minimum number of cases per class (attacks.md).
MIN_COUNTS = {"A": 105, "B": 92, "C": 46, "D": 45, "E": 73, "F": 30, "G": 20, "H": 40}
PLACEHOLDERS = (
    "allowed_port",
    "canary_dir",
    "canary_name",
    "canary_path",
    "case_root",
    "listener_port",
    "metadata_port",
    "nonce",
    "outside",
    "sibling_dir",
    "sibling_name",
    "sibling_path",
    "workspace",
)
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_TRANSFORM_RE = re.compile(r"<<(b64|hex|rep|keys):((?:(?!>>).)*)>>", re.DOTALL)
_SETUP_OPS = {"file", "dir", "symlink", "hardlink", "fifo"}
_CHECKS = {
    "success",
    "result_contains",
    "result_lacks",
    "exit_code",
    "result_field",
    "file_content",
    "absent",
    "exists",
}
#: what each check needs besides ``check`` (the call checks need ``call`` too)
_CHECK_KEYS = {
    "result_contains": {"call", "text"},
    "result_lacks": {"call", "text"},
    "exit_code": {"call", "code"},
    "result_field": {"call", "field"},
    "file_content": {"path", "text"},
    "absent": {"path"},
    "exists": {"path"},
    "success": {"call"},
}
_EFFECTS = {"leak", "write", "connect", "survivors", "resources", "responsive", "privilege"}
_ID_RE = re.compile(r"^[A-H][0-9]{1,2}-[0-9]{3}$")  # B10: a tenth group
#: A step between calls that is no tool call: the user saves a secret to ``path`` in the
#: workspace, the way an editor or a shell's ``>>`` does (following links, appending in
#: place, creating it if missing). For the attacks that plant something for that write.
USER_WRITES = "@user_writes"


class CorpusError(ValueError):
    """A case record is malformed."""


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    cls: str
    group: str
    title: str
    technique: str
    source: str
    setup: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    oracle: dict[str, Any]
    race: dict[str, Any] | None = None
    repeat: int = 1
    #: Shell commands that exit 0 on a host where the attack can work at all (the program
    #: it drives is installed, the service it needs answers): see :func:`unmet_requirements`.
    requires: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def benign(self) -> bool:
        return bool(self.oracle["kind"] == "benign")

    @property
    def tools(self) -> list[str]:
        return [c["tool"] for c in self.calls if c["tool"] != USER_WRITES]


def _check(rec: Mapping[str, Any]) -> Case:
    cid = rec.get("id", "?")

    def bad(msg: str) -> CorpusError:
        return CorpusError(f"case {cid}: {msg}")

    for key in ("id", "class", "group", "title", "technique", "setup", "calls", "oracle"):
        if key not in rec:
            raise bad(f"missing {key!r}")
    if not _ID_RE.match(rec["id"]) or rec["id"][0] != rec["class"]:
        raise bad("id must look like 'A1-001' and start with the class")
    if rec["class"] not in CLASSES or not rec["group"].startswith(rec["class"]):
        raise bad("unknown class or group")
    if not rec["calls"]:
        raise bad("no calls")
    for c in rec["calls"]:
        if not isinstance(c.get("tool"), str) or not isinstance(c.get("arguments"), dict):
            raise bad("a call needs 'tool' (str) and 'arguments' (object)")
        if c["tool"] == USER_WRITES:
            path = c["arguments"].get("path")
            if not isinstance(path, str) or path.startswith("/") or ".." in path.split("/"):
                raise bad("a user's write names a workspace-relative path inside it")
            if rec["oracle"].get("kind") != "attack":
                raise bad("a user's write belongs to attack cases")
        elif c["tool"].startswith("@"):
            raise bad(f"unknown step {c['tool']!r}")
    for op in rec["setup"]:
        if op.get("op") not in _SETUP_OPS or not isinstance(op.get("path"), str):
            raise bad(f"bad setup op {op!r}")
        if op["op"] in {"symlink", "hardlink"} and not isinstance(op.get("target"), str):
            raise bad("links need a target")
        if op["path"].startswith("/") or ".." in op["path"].split("/"):
            raise bad("setup paths are workspace-relative and stay inside it")
    oracle = rec["oracle"]
    if oracle.get("kind") == "benign":
        if rec["class"] != "H" or not oracle.get("expect"):
            raise bad("benign cases are class H and need expectations")
        for exp in oracle["expect"]:
            if exp.get("check") not in _CHECKS:
                raise bad(f"unknown check {exp!r}")
            if not _CHECK_KEYS[exp["check"]] <= set(exp):
                raise bad(f"check {exp!r} needs {sorted(_CHECK_KEYS[exp['check']])}")
            if exp["check"] == "result_field" and not {"value", "at_least"} & set(exp):
                raise bad(f"check {exp!r} needs value or at_least")
            if "call" in exp and not 0 <= exp["call"] < len(rec["calls"]):
                raise bad("expectation names a call that does not exist")
    elif oracle.get("kind") == "attack":
        if rec["class"] == "H":
            raise bad("class H holds benign controls only")
        if not set(oracle.get("aims", [])) <= _EFFECTS or not oracle.get("aims"):
            raise bad("attack cases name the effects they aim at")
    else:
        raise bad("oracle kind must be attack or benign")
    race = rec.get("race")
    if race is not None and not {"path", "target"} <= set(race):
        raise bad("race needs path and target")
    requires = rec.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) and r for r in requires):
        raise bad("requires is a list of probe commands")
    return Case(
        id=rec["id"],
        cls=rec["class"],
        group=rec["group"],
        title=rec["title"],
        technique=rec["technique"],
        source=rec.get("source", ""),
        setup=list(rec["setup"]),
        calls=list(rec["calls"]),
        oracle=dict(oracle),
        race=race,
        repeat=int(rec.get("repeat", 1)),
        requires=tuple(requires),
        raw=dict(rec),
    )


def load_corpus(directory: Path = CASES_DIR, classes: Iterable[str] | None = None) -> list[Case]:
    """All cases, checked, in id order; ``classes`` filters (e.g. ``["A", "H"]``)."""
    wanted = {c.upper() for c in classes} if classes else set(CLASSES)
    cases: list[Case] = []
    seen: set[str] = set()
    for path in sorted(directory.glob("*.json")):
        for rec in json.loads(path.read_text(encoding="utf-8")):
            case = _check(rec)
            if case.id in seen:
                raise CorpusError(f"duplicate case id {case.id}")
            seen.add(case.id)
            if case.cls in wanted:
                cases.append(case)
    return sorted(cases, key=lambda c: (c.cls, c.group, c.id))


def fast_subset(cases: list[Case], per_group: int = 1) -> list[Case]:
    """A deterministic sample touching every class and group: the first ``per_group`` cases
    of each group, plus every benign control whose tool is not yet covered, plus the first
    control of a benign group no control picked so far belongs to."""
    picked: list[Case] = []
    counts: dict[str, int] = {}
    tools: set[str] = set()
    for case in cases:
        if case.benign:
            continue
        if counts.get(case.group, 0) < per_group:
            counts[case.group] = counts.get(case.group, 0) + 1
            picked.append(case)
    for case in cases:
        if case.benign and (not set(case.tools) <= tools or case.group not in counts):
            tools.update(case.tools)
            counts[case.group] = counts.get(case.group, 0) + 1
            picked.append(case)
    return picked


@functools.cache
def _probe_ok(command: str) -> bool:
    # Run by the harness on the host, once per run; the probes are harmless (`true` under
    # the program) and short.
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def unmet_requirements(case: Case) -> list[str]:
    """The case's probes that fail on this host. An attack that drives a program the host
    lacks cannot happen on any backend: scored, it would be "contained" everywhere, so the
    runner reports it as not applicable instead."""
    return [probe for probe in case.requires if not _probe_ok(probe)]


def _transform(match: re.Match[str]) -> str:
    kind, text = match.group(1), match.group(2)
    if kind == "b64":
        return base64.b64encode(text.encode()).decode()
    if kind == "hex":
        return text.encode().hex()
    if kind == "keys":
        n = int(text)
        return "{" + ",".join(f'"k{i}":{i}' for i in range(n)) + "}"
    count, _, body = text.partition(":")
    return body * int(count)


def _fill_str(text: str, values: Mapping[str, str]) -> str:
    filled = _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], text)
    return _TRANSFORM_RE.sub(_transform, filled)


def plain_text(obj: Any, values: Mapping[str, str]) -> str:
    """The case's own text with placeholders filled but no transform applied: what the
    attacker wrote (a path hidden in ``<<b64:...>>`` is still theirs when it comes back)."""
    import json as _json

    text = _json.dumps(obj, ensure_ascii=False)
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], text)


def fill(obj: Any, values: Mapping[str, str]) -> Any:
    """``obj`` with placeholders filled and transforms applied; ``{"$json": text}`` becomes
    the JSON value of its filled text and ``{"$nest": n}`` a list nested ``n`` deep (for
    non-string arguments too large to store)."""
    if isinstance(obj, str):
        return _fill_str(obj, values)
    if isinstance(obj, list):
        return [fill(v, values) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"$json"}:
            return json.loads(_fill_str(obj["$json"], values))
        if set(obj) == {"$nest"}:
            # built iteratively: json.loads would hit the recursion limit first
            value: Any = 0
            for _ in range(int(obj["$nest"])):
                value = [value]
            return value
        return {k: fill(v, values) for k, v in obj.items()}
    return obj
