"""bashlex's LALR tables, shipped with this package instead of rebuilt by every process.

Why: bashlex 0.18 bundles a trimmed PLY that cannot read table files, so ``import bashlex``
runs ``yacc.yacc()``, whose ``LRTable`` computes the LALR(1) tables of the bash grammar from
scratch: ~90 ms of every ``runtime`` process (``exec``, ``tools``, ``serve``), more than all
of its other imports of the policy engine together. The tables depend only on the grammar and
on the table generator, so they are generated once (:func:`write_tables` writes
``_bashlex_tables.json``: ``python -c 'from runtime.policy._bashlex_tables import
write_tables; write_tables()'``) and loaded by :func:`import_bashlex`.

Soundness: the file is package data, as trusted as this module: no user-writable cache, so
nothing outside the installation can change what the shell parser reads. On load it must
match, or it is not used and the tables are built as before (same result, slower):

- ``signature``: a sha256 of the grammar exactly as ``LRTable`` receives it (every
  production's number, name, symbols and precedence, the precedence table, the terminals,
  the start symbol) and of the table generator's source (``bashlex/yacc.py``): another
  bashlex, or a grammar changed in place, gives another signature;
- ``sha256``: of the table bytes (a truncated or altered file);
- the structure: every state, symbol index, shift target and reduced production in range.

JSON, never pickle: loading it runs no code. ``tests/policy/test_bashlex_tables.py`` checks
that the shipped tables are the ones bashlex builds and that parses agree with and without
them, and that a mismatched, corrupt or altered file is refused.

Hazard: the tables are given to bashlex through an import hook on ``bashlex.yacc`` (its
``LRTable`` replaced before ``bashlex.parser`` calls ``yacc.yacc()`` at import), installed
only while :func:`import_bashlex` imports bashlex. When bashlex is already imported, it is
used as it is.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

__all__ = [
    "TABLES_FILE",
    "Built",
    "build_tables",
    "grammar_signature",
    "import_bashlex",
    "load_tables",
    "shipped_tables_used",
    "write_tables",
]

log = logging.getLogger("runtime.policy")

#: The shipped tables (package data).
TABLES_FILE = Path(__file__).with_name("_bashlex_tables.json")
#: Layout of the file; part of the signature.
_FORMAT = 1
_MAX_FILE_BYTES = 4 * 1024 * 1024

#: ``action`` and ``goto`` tables: state → symbol → action (shift > 0, reduce < 0, accept 0)
#: or target state, in the insertion order ``LRTable`` gives them.
Tables = tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]
#: Whether this process's bashlex parser was given the shipped tables (else it built them).
_used = {"shipped": False}


class Built(NamedTuple):
    """What :func:`build_tables` computed: the grammar, its signature and its tables."""

    grammar: Any
    signature: str
    tables: Tables


def shipped_tables_used() -> bool:
    """True when this process's bashlex parser runs on the shipped tables."""
    return _used["shipped"]


def grammar_signature(grammar: Any, generator_source: bytes) -> str:
    """sha256 of what ``LRTable(grammar)`` depends on (see the module docstring)."""
    productions = [
        None if p is None else [p.number, p.name, list(p.prod), list(p.prec)]
        for p in grammar.Productions
    ]
    described = {
        "format": _FORMAT,
        "generator": hashlib.sha256(generator_source).hexdigest(),
        "start": grammar.Start,
        "productions": productions,
        "precedence": sorted([k, list(v)] for k, v in grammar.Precedence.items()),
        "terminals": sorted(grammar.Terminals),
        "nonterminals": sorted(grammar.Nonterminals),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


def _encode(tables: Tables) -> bytes:
    action, goto = tables
    terminals = sorted({t for row in action.values() for t in row})
    nonterminals = sorted({n for row in goto.values() for n in row})
    t_index = {t: i for i, t in enumerate(terminals)}
    n_index = {n: i for i, n in enumerate(nonterminals)}
    states = len(action)
    body = {
        "terminals": terminals,
        "nonterminals": nonterminals,
        "action": [
            [x for t, v in action[s].items() for x in (t_index[t], v)] for s in range(states)
        ],
        "goto": [[x for n, v in goto[s].items() for x in (n_index[n], v)] for s in range(states)],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _is_int(value: object) -> bool:
    return type(value) is int  # not bool


def _rows(
    rows: object, names: Sequence[str], states: int, check: Any
) -> dict[int, dict[str, int]] | None:
    if not isinstance(rows, list) or len(rows) != states:
        return None
    table: dict[int, dict[str, int]] = {}
    for state, flat in enumerate(rows):
        if not isinstance(flat, list) or len(flat) % 2:
            return None
        row: dict[str, int] = {}
        for i in range(0, len(flat), 2):
            index, value = flat[i], flat[i + 1]
            if not (_is_int(index) and _is_int(value) and 0 <= index < len(names)):
                return None
            name = names[index]
            if name in row or not check(value):
                return None
            row[name] = value
        table[state] = row
    return table


def _decode(body: bytes, grammar: Any) -> Tables | None:
    """The tables of ``body``, or None when anything is out of place."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    terminals, nonterminals = data.get("terminals"), data.get("nonterminals")
    known_terminals = {*grammar.Terminals, "$end"}
    if not (
        isinstance(terminals, list)
        and isinstance(nonterminals, list)
        and all(isinstance(t, str) and t in known_terminals for t in terminals)
        and all(isinstance(n, str) and n in grammar.Nonterminals for n in nonterminals)
        and len(set(terminals)) == len(terminals)
        and len(set(nonterminals)) == len(nonterminals)
    ):
        return None
    raw_action = data.get("action")
    states = len(raw_action) if isinstance(raw_action, list) else 0
    productions = len(grammar.Productions)
    if states == 0:
        return None
    action = _rows(
        raw_action,
        terminals,
        states,
        lambda v: (0 < v < states) or (v <= 0 and -v < productions),
    )
    goto = _rows(data.get("goto"), nonterminals, states, lambda v: 0 <= v < states)
    if action is None or goto is None:
        return None
    return action, goto


def load_tables(grammar: Any, generator_source: bytes, path: Path | None = None) -> Tables | None:
    """The tables of ``path`` (default :data:`TABLES_FILE`) when they are exactly for
    ``grammar``; None otherwise."""
    if path is None:
        path = TABLES_FILE
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_FILE_BYTES + 1)
    except OSError:
        return None
    header_line, sep, body = raw.partition(b"\n")
    body = body.removesuffix(b"\n")  # the file's final newline
    if not sep or len(raw) > _MAX_FILE_BYTES:
        return None
    try:
        header = json.loads(header_line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(header, dict):
        return None
    if header.get("format") != _FORMAT:
        return None
    if header.get("signature") != grammar_signature(grammar, generator_source):
        return None
    if header.get("sha256") != hashlib.sha256(body).hexdigest():
        return None
    return _decode(body, grammar)


def _generator_source(yacc: ModuleType) -> bytes:
    path = getattr(yacc, "__file__", None)
    if not path:
        return b""  # no source to sign: the signature then never matches a shipped file
    with open(path, "rb") as fh:
        return fh.read()


def _shipped_table_class(yacc: ModuleType) -> type:
    """``yacc.LRTable``, but taking the shipped tables when they fit the grammar."""
    generated: type = yacc.LRTable

    class ShippedLRTable(generated):  # type: ignore[misc]
        #: The class it stands in for (``build_tables`` runs it).
        generated_by: type = generated

        def __init__(self, grammar: Any, log_: Any = None) -> None:
            try:
                tables = load_tables(grammar, _generator_source(yacc))
            except OSError:
                tables = None
            if tables is None:
                log.debug("bashlex: shipped tables do not fit this bashlex; building them")
                super().__init__(grammar, log_)
                return
            # What LRTable.__init__ sets, with the tables read instead of computed.
            self.grammar = grammar
            self.log = log_ if log_ is not None else yacc.NullLogger()
            self.lr_action, self.lr_goto = tables
            self.lr_productions = grammar.Productions
            self.lr_goto_cache: dict[Any, Any] = {}
            self.lr0_cidhash: dict[Any, Any] = {}
            self._add_count = 0
            self.sr_conflict = self.rr_conflict = 0
            self.conflicts: list[Any] = []
            self.sr_conflicts: list[Any] = []
            self.rr_conflicts: list[Any] = []
            _used["shipped"] = True

    return ShippedLRTable


class _Loader(importlib.abc.Loader):
    """Runs ``bashlex.yacc`` as its own loader would, then swaps in the table class."""

    def __init__(self, inner: importlib.abc.Loader) -> None:
        self._inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        if isinstance(getattr(module, "LRTable", None), type):
            module.__dict__["LRTable"] = _shipped_table_class(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code...: the real loader's
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "bashlex.yacc":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def import_bashlex() -> ModuleType:
    """``import bashlex``, its parser's tables read from :data:`TABLES_FILE` when they fit."""
    module = sys.modules.get("bashlex")
    if module is not None:
        return module
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    try:
        import bashlex  # noqa: F401 - imported for sys.modules
    finally:
        sys.meta_path.remove(finder)
    return sys.modules["bashlex"]


def build_tables() -> Built:
    """Build the tables as bashlex does (the slow way): its signature and tables."""
    bashlex = import_bashlex()
    yacc, parser = bashlex.yacc, bashlex.parser
    # The generator itself, not the class the import hook put in its place.
    original = getattr(yacc.LRTable, "generated_by", yacc.LRTable)
    captured: dict[str, Any] = {}

    class Capture(original):  # type: ignore[misc, valid-type]
        def __init__(self, grammar: Any, log_: Any = None) -> None:
            super().__init__(grammar, log_)
            signature = grammar_signature(grammar, _generator_source(yacc))
            captured["built"] = Built(grammar, signature, (self.lr_action, self.lr_goto))

    saved = yacc.LRTable
    yacc.LRTable = Capture
    try:
        yacc.yacc(module=parser, debug=False, write_tables=False)
    finally:
        yacc.LRTable = saved
    built: Built = captured["built"]
    return built


def write_tables(path: Path = TABLES_FILE) -> None:
    """Build the tables and write them to ``path`` (for a new bashlex: then commit the file)."""
    _grammar, signature, tables = build_tables()
    body = _encode(tables)
    header = {"format": _FORMAT, "signature": signature, "sha256": hashlib.sha256(body).hexdigest()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(json.dumps(header).encode() + b"\n" + body + b"\n")
    os.replace(tmp, path)
