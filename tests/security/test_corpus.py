"""The corpus itself: counts per class, unique ids, well-formed records, reproducible."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.security import corpus, generate
from benchmarks.security.corpus import (
    CASES_DIR,
    MIN_COUNTS,
    PLACEHOLDERS,
    USER_WRITES,
    CorpusError,
    fast_subset,
    fill,
    load_corpus,
)

ALL_TOOLS = {
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "delete_file",
    "move_file",
    "get_file_info",
    "file_search",
    "code_query",
    "shell_exec",
    "http_get",
    "http_post",
    "http_request",
    "web_fetch",
    "web_search",
    "current_time",
    "sleep",
    "get_env",
    "set_env",
    "json_parse",
    "json_stringify",
    "base64_encode",
    "base64_decode",
    "snippet_save",
    "snippet_load",
    "snippet_list",
    "ask_user",
}
# and whatever else the catalogue ships (tools/*/*.json)
ALL_TOOLS |= {p.stem for p in (Path(__file__).resolve().parents[2] / "tools").glob("*/*.json")}


@pytest.fixture(scope="module")
def cases():
    return load_corpus()


def test_minimum_count_per_class(cases):
    counts = Counter(c.cls for c in cases)
    for cls, minimum in MIN_COUNTS.items():
        assert counts[cls] >= minimum, (cls, counts[cls], minimum)
    assert sum(1 for c in cases if not c.benign) >= 410
    assert len(cases) >= 450


def test_ids_unique_and_benign_only_in_h(cases):
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    assert all(c.benign == (c.cls == "H") for c in cases)


def test_committed_json_is_the_generator_output():
    rendered = generate.render(generate.build())
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in CASES_DIR.glob("*.json")}
    assert rendered == on_disk, "run benchmarks/security/generate.py and commit its output"


def test_placeholders_are_known(cases):
    # A misspelt placeholder would reach the tool literally and make a case vacuous.
    known = set(PLACEHOLDERS)
    for c in cases:
        text = json.dumps([c.setup, c.calls, c.oracle, c.race], ensure_ascii=False)
        for name in re.findall(r"(?<![$\\])\{([a-z_]+)\}", text):
            assert name in known, (c.id, name)


def _strings(obj):
    # iterative: some arguments are nested 2000 deep on purpose
    stack, out = [obj], []
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            out.append(o)
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
    return out


def test_every_case_fills(cases):
    values = {k: f"/v/{k}" for k in PLACEHOLDERS}
    for c in cases:
        filled = "\n".join(_strings(fill(c.calls, values)))
        assert not re.search(r"<<(b64|hex|rep|keys):", filled), c.id
        assert not re.search(r"\{(" + "|".join(PLACEHOLDERS) + r")\}", filled), c.id


def test_attack_cases_touch_the_outside_or_a_limit(cases):
    # every attack names an effect the oracles can observe
    for c in cases:
        if not c.benign:
            assert c.oracle["aims"], c.id


def test_benign_controls_cover_every_tool(cases):
    used = {t for c in cases if c.benign for t in c.tools}
    assert used >= ALL_TOOLS, ALL_TOOLS - used


def test_fast_subset_touches_every_class_and_group(cases):
    sub = fast_subset(cases)
    assert {c.cls for c in sub} == set(MIN_COUNTS)
    assert {c.group for c in sub} == {c.group for c in cases}
    assert fast_subset(cases) == sub  # deterministic
    assert len(sub) < 80


def test_transforms():
    v = {k: "X" for k in PLACEHOLDERS}
    assert fill("echo <<b64:rm {canary_dir}>>", v) == "echo cm0gWA=="
    assert fill("<<hex:ab>>", v) == "6162"
    assert fill("<<rep:3:[>>", v) == "[[["
    assert fill({"$nest": 3}, v) == [[[0]]]
    assert fill({"$json": "[1, 2]"}, v) == [1, 2]
    assert fill("${IFS}{rm,-rf,x}", v) == "${IFS}{rm,-rf,x}"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("oracle"), "missing"),
        (lambda r: r.update(id="Z1-001"), "id"),
        (lambda r: r.update(calls=[]), "no calls"),
        (lambda r: r.update(setup=[{"op": "file", "path": "../x"}]), "inside"),
        (lambda r: r.update(oracle={"kind": "attack", "aims": ["vibes"]}), "effects"),
    ],
)
def test_malformed_records_are_refused(tmp_path, mutate, message):
    rec = json.loads((CASES_DIR / "A.json").read_text())[0]
    mutate(rec)
    (tmp_path / "A.json").write_text(json.dumps([rec]))
    with pytest.raises(CorpusError, match=message):
        load_corpus(tmp_path)


def test_duplicate_ids_are_refused(tmp_path):
    rec = json.loads((CASES_DIR / "A.json").read_text())[0]
    (tmp_path / "A.json").write_text(json.dumps([rec, rec]))
    with pytest.raises(CorpusError, match="duplicate"):
        corpus.load_corpus(tmp_path)


def test_a_users_write_between_calls(cases, tmp_path):
    """G2's step that is no tool call: checked like a setup path, attack cases only, and
    played by the fixture as an editor's save (through links, appended, created)."""
    from benchmarks.security.fixtures import CaseFixture

    g2 = [c for c in cases if c.group == "G2"]
    assert len(g2) >= 6 and all(USER_WRITES in [s["tool"] for s in c.calls] for c in g2)
    assert all(USER_WRITES not in c.tools for c in g2)
    base = dict(g2[0].raw)
    for path in ("../x", "/etc/x"):
        rec = {**base, "calls": [{"tool": USER_WRITES, "arguments": {"path": path}}]}
        with pytest.raises(CorpusError, match="workspace-relative"):
            corpus._check(rec)
    with pytest.raises(CorpusError, match="unknown step"):
        corpus._check({**base, "calls": [{"tool": "@other", "arguments": {}}]})

    class _Servers:
        listener_port = metadata_port = allowed_port = 1

        def reset(self, *args: object) -> None:
            pass

    fx = CaseFixture(tmp_path, g2[0], _Servers(), owner=None)  # type: ignore[arg-type]
    try:
        (fx.ws / "out.txt").symlink_to("notes.txt")
        fx.user_writes("out.txt")
        fx.user_writes("out.txt")
        fx.user_writes("missing-dir/x")  # a save that fails leaves nothing
        line = f"API_KEY={fx.tokens['user_secret']}\n"
        assert (fx.ws / "notes.txt").read_text() == line * 2
    finally:
        fx.close()
