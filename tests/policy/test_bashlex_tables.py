"""The shipped bashlex tables (runtime/policy/_bashlex_tables.py): the ones bashlex builds,
parses identical with and without them, and any file that does not fit is refused (the
tables are then built, as before)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.policy import _bashlex_tables as bt
from tests._pythonpath import python_path, run_python

REPO = Path(__file__).resolve().parents[2]

_EDGE_COMMANDS = [
    "echo hello",
    "a | b && c || d; e &",
    "for i in 1 2 3; do echo $i; done",
    "while true; do :; done",
    "if [ -f x ]; then cat x; elif y; then z; else w; fi",
    "case $x in a) echo a;; *) echo b;; esac",
    "f() { rm -rf /; }; f",
    "echo $(cat /etc/passwd) `id` $((1+2))",
    "cat <<EOF\nhello $USER\nEOF\n",
    "(cd /tmp && ls) > out 2>&1",
    "x=1 y=2 env | grep x",
    "echo 'single' \"double $HOME\" \\$escaped",
    "{ a; b; } | c",
    "echo ${x:-default} ${#y} ${z/a/b}",
    "a; b\nc",
    "echo )",
    "if then fi",
    "echo 'unterminated",
    "for",
    "a &&",
    "! true",
    "cat < in > out >> app 2>&- <&0",
]


def _corpus() -> list[str]:
    commands = list(_EDGE_COMMANDS)
    for path in sorted((REPO / "benchmarks" / "security" / "cases").glob("*.json")):
        for case in json.loads(path.read_text()):
            for call in case.get("calls", []):
                command = call.get("arguments", {}).get("command")
                if isinstance(command, str):
                    commands.append(command)
    return commands


# Parses every command (argv[1]: a JSON file of them), printing the dumps or the errors.
# ``shipped``: through import_bashlex; ``built``: a plain ``import bashlex`` (bashlex's way).
_PARSE = """
import json, sys
mode, corpus = sys.argv[1], json.load(open(sys.argv[2]))
if mode == "shipped":
    from runtime.policy._bashlex_tables import import_bashlex, shipped_tables_used
    bashlex = import_bashlex()
    used = shipped_tables_used()
else:
    import bashlex
    used = False
out = []
for text in corpus:
    try:
        out.append(["ok", [t.dump() for t in bashlex.parse(text)]])
    except Exception as exc:
        out.append(["error", type(exc).__name__, str(exc)])
print(json.dumps({"used": used, "parses": out}))
"""


def _parse_all(mode: str, corpus_file: Path) -> dict[str, Any]:
    env = {"PYTHONPATH": python_path(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", _PARSE, mode, str(corpus_file)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_parses_are_identical_with_and_without_the_shipped_tables(tmp_path: Path) -> None:
    corpus = _corpus()
    assert len(corpus) > 200
    corpus_file = tmp_path / "corpus.json"
    corpus_file.write_text(json.dumps(corpus))
    shipped = _parse_all("shipped", corpus_file)
    built = _parse_all("built", corpus_file)
    assert shipped["used"] is True  # the shipped file fits this bashlex: the fast path ran
    assert shipped["parses"] == built["parses"]
    assert any(p[0] == "error" for p in built["parses"])  # errors compared too


@pytest.fixture(scope="module")
def built() -> bt.Built:
    return bt.build_tables()


def _source() -> bytes:
    return bt._generator_source(bt.import_bashlex().yacc)


def test_the_shipped_tables_are_the_ones_bashlex_builds(built: bt.Built) -> None:
    loaded = bt.load_tables(built.grammar, _source())
    assert loaded is not None, "stale runtime/policy/_bashlex_tables.json: run write_tables()"
    assert loaded == built.tables
    # Same order of keys per state, too (dict equality ignores it).
    for ours, theirs in zip(loaded, built.tables, strict=True):
        assert [list(r) for _s, r in sorted(ours.items())] == [
            list(r) for _s, r in sorted(theirs.items())
        ]


def test_this_process_parses_on_the_shipped_tables() -> None:
    import runtime.policy._shell_parse  # noqa: F401 - imports bashlex through the hook

    assert bt.shipped_tables_used()


def _write(path: Path, header: dict[str, Any], body: bytes) -> Path:
    path.write_bytes(json.dumps(header).encode() + b"\n" + body + b"\n")
    return path


def _valid(built: bt.Built) -> tuple[dict[str, Any], bytes]:
    body = bt._encode(built.tables)
    header = {
        "format": 1,
        "signature": built.signature,
        "sha256": hashlib.sha256(body).hexdigest(),
    }
    return header, body


def test_a_written_file_round_trips(tmp_path: Path, built: bt.Built) -> None:
    header, body = _valid(built)
    path = _write(tmp_path / "t.json", header, body)
    assert bt.load_tables(built.grammar, _source(), path) == built.tables


def test_another_bashlex_is_refused(tmp_path: Path, built: bt.Built) -> None:
    header, body = _valid(built)
    path = _write(tmp_path / "t.json", header, body)
    # Another table generator (bashlex/yacc.py changed): another signature.
    assert bt.load_tables(built.grammar, _source() + b"\n# patched\n", path) is None
    # Another grammar (one production's symbols changed in place).
    production = built.grammar.Productions[5]
    saved = production.prod
    production.prod = (*saved, "SEMICOLON")
    try:
        assert bt.load_tables(built.grammar, _source(), path) is None
    finally:
        production.prod = saved
    assert bt.load_tables(built.grammar, _source(), path) == built.tables


def test_version_mismatch_and_missing_files_are_refused(tmp_path: Path, built: bt.Built) -> None:
    header, body = _valid(built)
    assert bt.load_tables(built.grammar, _source(), tmp_path / "absent.json") is None
    wrong_format = _write(tmp_path / "f.json", {**header, "format": 2}, body)
    assert bt.load_tables(built.grammar, _source(), wrong_format) is None
    wrong_signature = _write(tmp_path / "s.json", {**header, "signature": "0" * 64}, body)
    assert bt.load_tables(built.grammar, _source(), wrong_signature) is None


def test_corrupt_files_are_refused(tmp_path: Path, built: bt.Built) -> None:
    header, body = _valid(built)
    cases = {
        "truncated": json.dumps(header).encode() + b"\n" + body[: len(body) // 2],
        "flipped digit": json.dumps(header).encode() + b"\n" + body.replace(b",1,", b",2,", 1),
        "no body": json.dumps(header).encode(),
        "header not json": b"{nope\n" + body,
        "header a list": b"[]\n" + body,
        "empty": b"",
    }
    for name, raw in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(raw)
        assert bt.load_tables(built.grammar, _source(), path) is None, name


def _altered(built: bt.Built, change: Any) -> tuple[dict[str, Any], bytes]:
    """A file whose body was changed and its sha256 recomputed to match."""
    data = json.loads(bt._encode(built.tables))
    change(data)
    body = json.dumps(data).encode()
    return {
        "format": 1,
        "signature": built.signature,
        "sha256": hashlib.sha256(body).hexdigest(),
    }, body


def _add(table: str, value: Any) -> Any:
    """Adds ``value`` under a symbol the row does not have yet (a duplicate is refused on
    its own: this checks the value)."""

    def change(d: dict[str, Any]) -> None:
        row = d[table][3]
        names = d["terminals" if table == "action" else "nonterminals"]
        free = next(i for i in range(len(names)) if i not in row[::2])
        row.extend([free, value])

    return change


def test_adding_an_in_range_value_is_accepted(tmp_path: Path, built: bt.Built) -> None:
    """The check of the tests below: the same change with a value in range loads."""
    for table in ("action", "goto"):
        header, body = _altered(built, _add(table, 1))
        path = _write(tmp_path / "t.json", header, body)
        assert bt.load_tables(built.grammar, _source(), path) is not None


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(_add("action", 100_000), id="shift-out-of-range"),
        pytest.param(_add("action", -100_000), id="reduce-out-of-range"),
        pytest.param(_add("action", 1.5), id="float-action"),
        pytest.param(_add("action", True), id="bool-action"),
        pytest.param(_add("goto", 100_000), id="goto-out-of-range"),
        pytest.param(_add("goto", -1), id="goto-negative"),
        pytest.param(lambda d: d["action"][3].extend([10_000, 1]), id="symbol-out-of-range"),
        pytest.param(lambda d: d["action"][3].extend([True, 1]), id="bool-index"),
        pytest.param(lambda d: d["action"][3].append(1), id="odd-row"),
        pytest.param(lambda d: d["goto"].pop(), id="goto-rows-short"),
        pytest.param(lambda d: d["terminals"].append("NOT_A_TOKEN"), id="unknown-terminal"),
        pytest.param(lambda d: d["nonterminals"].append("nope"), id="unknown-nonterminal"),
        pytest.param(
            lambda d: d["terminals"].__setitem__(1, d["terminals"][0]), id="duplicate-terminal"
        ),
        pytest.param(lambda d: d.__setitem__("action", []), id="no-states"),
        pytest.param(lambda d: d.__setitem__("goto", {}), id="goto-not-a-list"),
    ],
)
def test_altered_tables_are_refused(tmp_path: Path, built: bt.Built, change: Any) -> None:
    header, body = _altered(built, change)
    path = _write(tmp_path / "t.json", header, body)
    assert bt.load_tables(built.grammar, _source(), path) is None


def test_a_duplicate_symbol_in_a_row_is_refused(tmp_path: Path, built: bt.Built) -> None:
    def change(d: dict[str, Any]) -> None:
        row = d["action"][0]
        row.extend(row[:2])

    header, body = _altered(built, change)
    path = _write(tmp_path / "t.json", header, body)
    assert bt.load_tables(built.grammar, _source(), path) is None


@pytest.mark.parametrize("fits", [False, True], ids=["corrupt", "intact"])
def test_a_file_that_does_not_fit_falls_back_to_building(tmp_path: Path, fits: bool) -> None:
    """The whole import with a corrupt tables file: bashlex builds its tables and parses
    (and with an intact copy at the same place, the copy is used)."""
    tables = tmp_path / "tables.json"
    raw = bt.TABLES_FILE.read_bytes()
    tables.write_bytes(raw if fits else raw.replace(b",1,", b",2,", 1))
    # The module alone: importing the runtime package would import bashlex first.
    script = (
        "import importlib.util, sys\n"
        "from pathlib import Path\n"
        f"spec = importlib.util.spec_from_file_location('bt', {str(bt.__file__)!r})\n"
        "bt = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(bt)\n"
        f"bt.TABLES_FILE = Path({str(tables)!r})\n"
        "assert 'bashlex' not in sys.modules\n"
        "bashlex = bt.import_bashlex()\n"
        "print(bt.shipped_tables_used(), bashlex.parse('a | b && c')[0].kind)\n"
    )
    done = run_python(script)
    assert done.stdout.split() == [str(fits), "list"]
