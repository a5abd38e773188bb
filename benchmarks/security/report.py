"""Reports: a Markdown table and a self-contained HTML page with an inline-SVG chart.

The HTML has no scripts and no external resources, so a reviewer can paste or attach it.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from .corpus import CLASSES, Case

__all__ = [
    "CLASS_NAMES",
    "html_report",
    "markdown_report",
    "markdown_table",
    "stopped_table",
    "svg_chart",
    "write_report",
]

CLASS_NAMES = {
    "A": "filesystem containment",
    "B": "command policy",
    "C": "resource exhaustion",
    "D": "isolation / kernel",
    "E": "network / SSRF",
    "F": "wasm guest",
    "G": "cross-tool",
    "H": "benign controls (passed)",
}
_COLOURS = {"ours": "#2b8a3e", "baseline-seed": "#e67700", "baseline-none": "#c92a2a"}


def _cell(res: dict[str, Any], cls: str) -> tuple[int, int]:
    pc = res["per_class"].get(cls)
    if not pc:
        return 0, 0
    return pc.get("contained", pc.get("passed", 0)), pc["total"]


def _cell_text(res: dict[str, Any], cls: str) -> str:
    """``ok/total``, and how many of the total ended in an error (neither ok nor not)."""
    ok, total = _cell(res, cls)
    if not total:
        return "-"
    errored = res["per_class"][cls].get("errored", 0)
    return f"{ok}/{total}" + (f" ({errored} err)" if errored else "")


def _errors_text(res: dict[str, Any]) -> str:
    return f"{res.get('errored', 0)} + {res.get('benign_errored', 0)} benign"


def _any_errors(results: list[dict[str, Any]]) -> bool:
    return any(r.get("errors") for r in results)


_ERRORS_NOTE = (
    "An *error* is a case a call of which did not run (the worker or sandbox died, hung or "
    "gave no valid reply, a tool could not import a module, the harness failed) with no "
    "effect observed: it counts neither as contained nor as not contained."
)


def markdown_table(results: list[dict[str, Any]]) -> str:
    head = "| class | " + " | ".join(r["backend"] for r in results) + " |"
    sep = "|---|" + "---:|" * len(results)
    rows = [head, sep]
    for cls in CLASSES:
        if not any(cls in r["per_class"] for r in results):
            continue
        cells = [_cell_text(r, cls) for r in results]
        rows.append(f"| {cls} {CLASS_NAMES[cls]} | " + " | ".join(cells) + " |")
    rows.append(
        "| **attacks contained** | "
        + " | ".join(f"**{r['contained']}/{r['total']}**" for r in results)
        + " |"
    )
    rows.append(
        "| **benign passed** | "
        + " | ".join(f"**{r['benign_passed']}/{r['benign_total']}**" for r in results)
        + " |"
    )
    if _any_errors(results):
        rows.append(
            "| **errors (not scored)** | "
            + " | ".join(f"**{_errors_text(r)}**" for r in results)
            + " |"
        )
    if _any_not_applicable(results):
        rows.append(
            "| not applicable (not scored) | "
            + " | ".join(_not_applicable_text(r) for r in results)
            + " |"
        )
    rows.append("| time (s) | " + " | ".join(f"{r['duration_s']:.0f}" for r in results) + " |")
    return "\n".join(rows)


def markdown_report(results: list[dict[str, Any]], meta: dict[str, Any], cases: list[Case]) -> str:
    titles = {c.id: c.title for c in cases}
    out = [
        "# Security benchmark",
        "",
        f"{meta['date']} on {meta['machine']}; {meta['cases']} cases"
        + (" (fast subset)" if meta.get("fast") else "")
        + ".",
        "Attack rows count cases *contained* (no leak, write, connection, survivor, overrun or",
        "hang observed); the benign row counts controls that succeeded with the right result.",
        _ERRORS_NOTE,
        "",
        markdown_table(results),
        "",
        _LISTS_NOTE,
        "",
    ]
    if rows := stopped_table(results):
        out += ["## What stopped the contained attacks (policy / error / ran)", "", _STOPPED_NOTE]
        out += ["", "| class | " + " | ".join(r["backend"] for r in results) + " |"]
        out += ["|---|" + "---:|" * len(results)]
        out += ["| " + " | ".join(row) + " |" for row in rows] + [""]
    for r in results:
        for key, detail_key, what in _LISTS:
            ids = r.get(key, [])
            if not ids:
                continue
            out.append(f"## {r['backend']}: {len(ids)} {what}")
            out.append("")
            for cid in ids:
                out.append(f"- `{cid}` {titles.get(cid, '')}: {_detail(r, detail_key, cid)}")
            out.append("")
        if r.get("cases"):
            out += [f"<details><summary>{r['backend']}: every case, how each call ended</summary>"]
            out += [""] + [f"- `{c}` {_case_line(c, v)}" for c, v in r["cases"].items()]
            out += ["", "</details>", ""]
    return "\n".join(out)


#: Characters of a case's detail the Markdown and HTML lists show (results.json: all of it).
_DETAIL_CHARS = 300
_LISTS_NOTE = (
    "The lists below name every case; each one's detail is cut at "
    f"{_DETAIL_CHARS} characters (marked …), results.json holds it whole."
)


def _detail(res: dict[str, Any], key: str, cid: str) -> str:
    value = res.get(key, {}).get(cid, [])
    text = value if isinstance(value, str) else "; ".join(value)
    return text if len(text) <= _DETAIL_CHARS else text[:_DETAIL_CHARS] + " …"


_STOPPED_NOTE = (
    "What the call records show stopped each contained attack: *policy* (a call was refused "
    "by a policy check, before it ran or by the egress gateway), *error* (none was, and a "
    "call failed after it started: a kernel refusal, a limit or the tool's own failure, "
    "which the records do not tell apart), "
    "*ran* (every call succeeded, with no effect). It says which layer answered, not that "
    "no other layer would have."
)


def _stopped_cell(res: dict[str, Any], cls: str) -> str:
    pc = res["per_class"].get(cls)
    if not pc or "stopped_policy" not in pc:
        return "-"
    return " / ".join(str(pc[f"stopped_{k}"]) for k in ("policy", "error", "ran"))


def stopped_table(results: list[dict[str, Any]]) -> list[list[str]]:
    """Rows (class, then one cell per backend) of contained attacks stopped by policy /
    error / ran; empty when the results hold no such counts."""
    rows = []
    for cls in CLASSES:
        if cls == "H" or not any(cls in r["per_class"] for r in results):
            continue
        cells = [_stopped_cell(r, cls) for r in results]
        if any(c != "-" for c in cells):
            rows.append([f"{cls} {CLASS_NAMES[cls]}", *cells])
    return rows


def _case_line(cid: str, case: dict[str, Any]) -> str:
    label = case["outcome"] + (f" ({case['stopped']})" if case.get("stopped") else "")
    return f"{label}: " + "; ".join(case.get("calls", [])[:5])[:_DETAIL_CHARS]


#: The per-backend case lists of the reports: result key, its detail key, what they are.
_LISTS = (
    ("failures", "failure_detail", "not contained / not passed"),
    ("errors", "error_detail", "errors (a call did not run: not scored)"),
    # {case id: what it needs}: a program this host lacks (Case.requires): left out.
    ("not_applicable", "not_applicable", "not applicable on this host (not scored)"),
)


def _not_applicable_text(res: dict[str, Any]) -> str:
    return str(len(res.get("not_applicable") or {}))


def _any_not_applicable(results: list[dict[str, Any]]) -> bool:
    return any(r.get("not_applicable") for r in results)


def svg_chart(results: list[dict[str, Any]]) -> str:
    """Grouped bars: per class, the share contained (passed for H) for each backend."""
    classes = [c for c in CLASSES if any(c in r["per_class"] for r in results)]
    bw, gap, group_gap, h, top, left = 18, 3, 22, 220, 20, 40
    group_w = len(results) * (bw + gap) + group_gap
    width = left + len(classes) * group_w + 160
    height = top + h + 50
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="share of cases contained per class and backend">',
        f'<line x1="{left}" y1="{top + h}" x2="{width - 150}" y2="{top + h}" stroke="#333"/>',
    ]
    for pct in (0, 50, 100):
        y = top + h - h * pct / 100
        parts.append(
            f'<text x="{left - 6}" y="{y + 4}" font-size="10" text-anchor="end">{pct}%</text>'
        )
        parts.append(f'<line x1="{left}" y1="{y}" x2="{width - 150}" y2="{y}" stroke="#ddd"/>')
    for i, cls in enumerate(classes):
        x0 = left + i * group_w + group_gap / 2
        for j, r in enumerate(results):
            ok, total = _cell(r, cls)
            frac = ok / total if total else 0.0
            bh = h * frac
            x = x0 + j * (bw + gap)
            colour = _COLOURS.get(r["backend"], "#555")
            parts.append(
                f'<rect x="{x:.1f}" y="{top + h - bh:.1f}" width="{bw}" height="{bh:.1f}" '
                f'fill="{colour}"><title>{html.escape(r["backend"])} {cls}: '
                f"{html.escape(_cell_text(r, cls))}"
                "</title></rect>"
            )
        parts.append(
            f'<text x="{x0 + len(results) * (bw + gap) / 2:.1f}" y="{top + h + 16}" '
            f'font-size="12" text-anchor="middle">{cls}</text>'
        )
    for j, r in enumerate(results):
        y = top + 10 + j * 18
        colour = _COLOURS.get(r["backend"], "#555")
        parts.append(
            f'<rect x="{width - 140}" y="{y - 10}" width="12" height="12" fill="{colour}"/>'
        )
        parts.append(
            f'<text x="{width - 122}" y="{y}" font-size="12">{html.escape(r["backend"])}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def html_report(results: list[dict[str, Any]], meta: dict[str, Any], cases: list[Case]) -> str:
    titles = {c.id: c.title for c in cases}
    rows = []
    for cls in CLASSES:
        if not any(cls in r["per_class"] for r in results):
            continue
        cells = "".join(f"<td>{html.escape(_cell_text(r, cls))}</td>" for r in results)
        rows.append(f"<tr><th>{cls} {html.escape(CLASS_NAMES[cls])}</th>{cells}</tr>")
    heads = "".join(f"<th>{html.escape(r['backend'])}</th>" for r in results)
    totals = "".join(f"<td><b>{r['contained']}/{r['total']}</b></td>" for r in results)
    benign = "".join(f"<td><b>{r['benign_passed']}/{r['benign_total']}</b></td>" for r in results)
    times = "".join(f"<td>{r['duration_s']:.0f}</td>" for r in results)
    errors = ""
    if _any_errors(results):
        cells = "".join(f"<td><b>{_errors_text(r)}</b></td>" for r in results)
        errors = f"<tr><th>errors (not scored)</th>{cells}</tr>"
    if _any_not_applicable(results):
        cells = "".join(f"<td>{_not_applicable_text(r)}</td>" for r in results)
        errors += f"<tr><th>not applicable (not scored)</th>{cells}</tr>"
    fails = []
    for r in results:
        for key, detail_key, what in _LISTS:
            ids = r.get(key, [])
            if not ids:
                continue
            items = "".join(
                f"<li><code>{html.escape(cid)}</code> {html.escape(titles.get(cid, ''))}: "
                f"{html.escape(_detail(r, detail_key, cid))}</li>"
                for cid in ids
            )
            fails.append(
                f"<details><summary>{html.escape(r['backend'])}: "
                f"{len(ids)} {html.escape(what)}</summary><ul>{items}</ul></details>"
            )
        if r.get("cases"):
            items = "".join(
                f"<li><code>{html.escape(c)}</code> {html.escape(_case_line(c, v))}</li>"
                for c, v in r["cases"].items()
            )
            fails.append(
                f"<details><summary>{html.escape(r['backend'])}: every case, how each call "
                f"ended</summary><ul>{items}</ul></details>"
            )
    stopped = ""
    if srows := stopped_table(results):
        body = "".join(
            f"<tr><th>{html.escape(row[0])}</th>"
            + "".join(f"<td>{html.escape(c)}</td>" for c in row[1:])
            + "</tr>"
            for row in srows
        )
        stopped = (
            "<h2>What stopped the contained attacks (policy / error / ran)</h2>"
            f"<p>{html.escape(_STOPPED_NOTE).replace('*', '')}</p>"
            f"<table><tr><th>class</th>{heads}</tr>{body}</table>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Security benchmark</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 70em; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #ccc; padding: 4px 10px; }}
td {{ text-align: right; }} th {{ text-align: left; }} code {{ font-size: 90%; }}
</style></head><body>
<h1>Security benchmark</h1>
<p>{html.escape(meta["date"])} on {html.escape(meta["machine"])};
{meta["cases"]} cases{" (fast subset)" if meta.get("fast") else ""}.
Attack classes count cases <em>contained</em> (no leak, write, connection, survivor, overrun
or hang observed); H counts benign controls that succeeded with the right result.
{html.escape(_ERRORS_NOTE).replace("*error*", "<em>error</em>")}</p>
{svg_chart(results)}
<table><tr><th>class</th>{heads}</tr>
{"".join(rows)}
<tr><th>attacks contained</th>{totals}</tr>
<tr><th>benign passed</th>{benign}</tr>
{errors}
<tr><th>time (s)</th>{times}</tr></table>
{stopped}
<p>{html.escape(_LISTS_NOTE)}</p>
{"".join(fails)}
</body></html>
"""


def write_report(
    directory: Path, results: list[dict[str, Any]], meta: dict[str, Any], cases: list[Case]
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.md").write_text(markdown_report(results, meta, cases), encoding="utf-8")
    (directory / "report.html").write_text(html_report(results, meta, cases), encoding="utf-8")
    (directory / "results.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1), encoding="utf-8"
    )
