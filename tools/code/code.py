"""code_query: find definitions (functions, classes, variables) and files by name.

Structure, not grep: Python through :mod:`ast`; JavaScript, TypeScript, Go and Rust through
tree-sitter when its grammar wheels are installed; anything else (a grammar missing, or
a file its parser gives up on: a syntax error, nesting too deep) through a regex fallback.
Every match says which engine found it, so the caller knows how far to trust it. Files are
read through the workspace-confined helpers and size-capped.
"""

from __future__ import annotations

import ast
import bisect
import heapq
import re
from collections.abc import Callable, Iterator
from typing import Any

from runtime._globs import compile_glob
from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext, json_size
from runtime.toolkit_fs import Workspace, printable, read_bytes

__all__ = ["code_query"]

_MAX_FILE_BYTES = 1_048_576
_MAX_FILES = 5000
_CONTEXT = 2
_MAX_CODE = 400  # characters of a matched line kept (minified code has megabyte lines)
_SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "target",
        "dist",
        "build",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
    }
)
_SOURCE_EXT = frozenset(
    {
        ".py",
        ".pyi",
        ".js",
        ".mjs",
        ".cjs",
        ".jsx",
        ".ts",
        ".tsx",
        ".go",
        ".rs",
        ".java",
        ".c",
        ".h",
        ".cc",
        ".cpp",
        ".hpp",
        ".cs",
        ".rb",
        ".php",
        ".kt",
        ".swift",
        ".scala",
        ".sh",
        ".lua",
    }
)

# (kind, name, line 1-based, byte column 0-based)
Symbol = tuple[str, str, int, int]


def _python_symbols(src: bytes) -> Iterator[Symbol]:
    tree = ast.parse(src)

    def visit(body: list[ast.stmt], local: bool) -> Iterator[Symbol]:
        """``local``: inside a function, where assignments are locals, not definitions."""
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield "function", node.name, node.lineno, node.col_offset
                yield from visit(node.body, True)
            elif isinstance(node, ast.ClassDef):
                yield "class", node.name, node.lineno, node.col_offset
                yield from visit(node.body, False)
            elif isinstance(node, ast.Assign | ast.AnnAssign) and not local:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            yield "variable", name.id, name.lineno, name.col_offset
            else:
                for block in _blocks(node):
                    yield from visit(block, local)

    yield from visit(tree.body, False)


def _blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists a statement holds, whatever its kind: every compound statement's
    bodies (``body``, ``orelse``, ``finalbody``) and those of its except handlers and match
    cases, the only other nodes of Python's grammar that hold statements. Naming the
    compound statements one by one missed except handlers, match cases, ``async with``,
    ``async for`` and ``except*``, and the ast engine's empty answer was then trusted."""
    for _, value in ast.iter_fields(node):
        if not isinstance(value, list) or not value:
            continue
        if isinstance(value[0], ast.stmt):
            yield value
        elif isinstance(value[0], ast.excepthandler | ast.match_case):
            for holder in value:
                yield from _blocks(holder)


# ----------------------------------------------------------------------------- tree-sitter

_TS_KINDS = {
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "method_definition": "function",
    "method_declaration": "function",
    "function_item": "function",
    "function_signature_item": "function",
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "class",
    "type_alias_declaration": "class",
    "enum_declaration": "class",
    "type_spec": "class",
    "struct_item": "class",
    "enum_item": "class",
    "trait_item": "class",
    "variable_declarator": "variable",
    "var_spec": "variable",
    "const_spec": "variable",
    "const_item": "variable",
    "static_item": "variable",
}
_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function"})


def _load_grammars() -> dict[str, Callable[[bytes], Any]]:
    """Parsers by file extension, for the grammar wheels that are installed."""
    try:
        from tree_sitter import Language, Parser
    except ImportError:
        return {}
    makers: dict[str, tuple[str, str]] = {
        ".js": ("tree_sitter_javascript", "language"),
        ".mjs": ("tree_sitter_javascript", "language"),
        ".cjs": ("tree_sitter_javascript", "language"),
        ".jsx": ("tree_sitter_javascript", "language"),
        ".ts": ("tree_sitter_typescript", "language_typescript"),
        ".tsx": ("tree_sitter_typescript", "language_tsx"),
        ".go": ("tree_sitter_go", "language"),
        ".rs": ("tree_sitter_rust", "language"),
    }
    out: dict[str, Callable[[bytes], Any]] = {}
    for ext, (module, func) in makers.items():
        try:
            mod = __import__(module)
            parser = Parser(Language(getattr(mod, func)()))
        except (ImportError, AttributeError, ValueError):
            continue
        out[ext] = parser.parse
    return out


#: Loaded at import: the fork-server imports this module once, so sandboxed children find
#: the grammars already mapped and never dlopen anything themselves.
_GRAMMARS = _load_grammars()


def _ts_symbols(parse: Callable[[bytes], Any], src: bytes) -> Iterator[Symbol]:
    # (node, inside a function body): variables there are locals, not definitions.
    stack: list[tuple[Any, bool]] = [(parse(src).root_node, False)]
    while stack:
        node, local = stack.pop()
        kind = _TS_KINDS.get(node.type)
        inner = local or kind == "function" or node.type in _FUNCTION_VALUES
        stack.extend((child, inner) for child in reversed(node.children))
        if kind is None or (kind == "variable" and local):
            continue
        name = node.child_by_field_name("name") or node.child_by_field_name("pattern")
        if name is None or name.type not in (
            "identifier",
            "property_identifier",
            "type_identifier",
            "field_identifier",
        ):
            continue
        if kind == "variable":
            value = node.child_by_field_name("value")
            if value is not None and value.type in _FUNCTION_VALUES:
                kind = "function"
        text = src[name.start_byte : name.end_byte].decode("utf-8", "replace")
        yield kind, text, name.start_point[0] + 1, name.start_point[1]


# ----------------------------------------------------------------------------- regex

# Matched one line at a time, never across a newline ([ \t], not \s), and with no nested
# unbounded quantifiers: a file of 60,000 "a\n" lines kept the old multi-line patterns
# backtracking for over 30 s. The C-style definition (``int main(int argc, ...) {``) is
# found without a regex over its head (see ``_c_head``).
_LINE_REGEXES = [
    (
        "class",
        re.compile(
            rb"[ \t]*(?:(?:export|public|private|abstract|final)[ \t]+)*"
            rb"(?:class|struct|interface|enum|trait|module)[ \t]+([A-Za-z_]\w*)"
        ),
    ),
    (
        "function",
        re.compile(
            rb"[ \t]*(?:(?:export|public|private|static|async)[ \t]+)*"
            rb"(?:def|function|func|fn|sub)[ \t]+([A-Za-z_]\w*)"
        ),
    ),
    (
        "variable",
        re.compile(rb"[ \t]*(?:export[ \t]+)?(?:const|let|var|local)[ \t]+([A-Za-z_]\w*)"),
    ),
    ("variable", re.compile(rb"([A-Za-z_]\w*)[ \t]*=(?:[^=]|$)")),
]
_REGEX_STOPWORDS = frozenset({b"if", b"for", b"while", b"switch", b"return", b"else"})
_TYPE_TOKEN = re.compile(rb"[\w:<>*&]+")
_NAME = re.compile(rb"\**([A-Za-z_]\w*)")
_BRACE_OR_SEMI = re.compile(rb"[;{]")
#: How far past a C-style head's '(' its ') {' is looked for (a long parameter list).
_C_SIGNATURE_BYTES = 8192


def _c_head(line: bytes, prev: bytes | None) -> tuple[bytes, int] | None:
    """The name and its column if ``line`` starts a C-style definition head: type tokens
    (``[\\w:<>*&]+``, on this line or, GNU style, alone on the line before), then the name
    (after any '*'s) right before the line's first '('. Plain splits, no backtracking."""
    paren = line.find(b"(")
    if paren < 0:
        return None
    head = line[:paren]
    tokens = _tokens(head)
    if not tokens:
        return None
    if len(tokens) == 1 and (prev is None or not _tokens(prev)):
        return None  # a type is needed: here, or ("static int\nmain(void) {") the line before
    name = _NAME.fullmatch(tokens[-1])
    if name is None or name.group(1) in _REGEX_STOPWORDS:
        return None
    end = len(head.rstrip())
    return name.group(1), end - len(name.group(1))


def _tokens(text: bytes) -> list[bytes]:
    """``text`` as ``[ \\t]*`` and whitespace-separated type tokens, or [] if it is not."""
    body = text.lstrip(b" \t")
    if not body or body[:1].isspace():
        return []
    tokens = body.split()
    return tokens if all(_TYPE_TOKEN.fullmatch(t) for t in tokens) else []


def _regex_symbols(src: bytes) -> Iterator[Symbol]:
    stops = [m.start() for m in _BRACE_OR_SEMI.finditer(src)]
    offset = 0
    prev: bytes | None = None
    for number, line in enumerate(src.split(b"\n"), 1):
        hits: list[Symbol] = []
        for kind, rx in _LINE_REGEXES[:2]:
            if (m := rx.match(line)) and m.group(1) not in _REGEX_STOPWORDS:
                hits.append((kind, m.group(1).decode("utf-8", "replace"), number, m.start(1)))
        head = _c_head(line, prev)
        if head is not None:
            # ``\\([^;{]*\\)\\s*\\{``: the first ';' or '{' after the '(' must be a '{' with
            # only whitespace between it and a ')'. Found by bisecting the stops, not a scan.
            paren = offset + line.index(b"(")
            i = bisect.bisect_right(stops, paren)
            if i < len(stops) and stops[i] - paren <= _C_SIGNATURE_BYTES:
                stop = stops[i]
                if src[stop : stop + 1] == b"{" and src[paren + 1 : stop].rstrip().endswith(b")"):
                    hits.append(("function", head[0].decode("utf-8", "replace"), number, head[1]))
        for kind, rx in _LINE_REGEXES[2:]:
            if (m := rx.match(line)) and m.group(1) not in _REGEX_STOPWORDS:
                hits.append((kind, m.group(1).decode("utf-8", "replace"), number, m.start(1)))
        yield from hits
        offset += len(line) + 1
        prev = line


# ----------------------------------------------------------------------------- the tool


#: What a parser raises on a file it cannot take: the fallback (regex) reads it instead.
#: MemoryError too: CPython's parser raises it for deep nesting ("x = " + "-" * 10000 + "1",
#: "lambda: " * 100000: a 10 KB file), with the process far below its memory limit, and
#: uncaught it failed the whole query as resource_limit. A real allocation failure in a
#: parse is also best met this way: the tree is freed as the error unwinds, and the regex
#: reads the file line by line in little memory.
_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)


def _symbols(ext: str, src: bytes) -> tuple[str, list[Symbol]]:
    if ext in (".py", ".pyi"):
        try:
            return "ast", list(_python_symbols(src))
        except _PARSE_ERRORS:
            return "regex", list(_regex_symbols(src))
    parse = _GRAMMARS.get(ext)
    if parse is not None:
        try:
            return "tree-sitter", list(_ts_symbols(parse, src))
        except _PARSE_ERRORS:
            return "regex", list(_regex_symbols(src))
    return "regex", list(_regex_symbols(src))


def _matcher(query: str) -> Callable[[str], int]:
    """0 = no match, 2 = exact, 1 = glob / case-insensitive substring."""
    if any(ch in query for ch in "*?["):
        # The project's globs (list_files', file_search's and the policy's), case-sensitive.
        rx = compile_glob(query)
        return lambda name: 1 if rx.fullmatch(name) else 0
    q = query.casefold()
    return lambda name: 2 if name == query else (1 if q in name.casefold() else 0)


#: Bytes of a long line kept before the match's column (the rest of the window follows it).
_BEFORE = _MAX_CODE // 4


def _window(line: bytes, col: int) -> str:
    """At most :data:`_MAX_CODE` characters of ``line`` from a little before byte ``col``:
    the bytes are cut first (4 per character at most), then decoded. Decoding whole lines
    first made a minified bundle's one 1 MB line a megabyte string per match and per
    context line: one file under the 1 MiB cap used up code_query's 512 MiB."""
    if len(line) <= _MAX_CODE:
        return line.decode("utf-8", "replace")
    start = max(0, col - _BEFORE) if col > _MAX_CODE - _BEFORE else 0
    while 0 < start < len(line) and line[start] & 0xC0 == 0x80:  # not mid-character
        start += 1
    return line[start : start + 4 * _MAX_CODE].decode("utf-8", "replace")[:_MAX_CODE]


def _excerpt(lines: list[bytes], line: int, col: int) -> tuple[str, str, int]:
    """The matched line's window around ``col`` (bytes), the windows of up to
    :data:`_CONTEXT` lines each side (from their start), and the 1-based character column."""
    text = lines[line - 1] if 0 < line <= len(lines) else b""
    lo, hi = max(0, line - 1 - _CONTEXT), min(len(lines), line + _CONTEXT)
    context = "\n".join(_window(lines[i], col if i == line - 1 else 0) for i in range(lo, hi))
    column = len(text[:col].decode("utf-8", "ignore")) + 1
    return _window(text, col).rstrip(), context, column


#: A result's JSON but its query, type and matches, at most: keys, the four engines, two
#: numbers of up to 19 digits; plus room for the frame's envelope and msgpack's encoding
#: where it is larger than JSON's (as the file tools leave), bytes.
_RESULT_OVERHEAD = 160 + 64
#: A match's JSON but its strings' contents: keys, quotes, two numbers of up to 19 digits,
#: the comma between matches, bytes.
_MATCH_OVERHEAD = 128


def _match_size(m: dict[str, Any]) -> int:
    """Bytes ``m`` takes in the result's JSON. Measured as the output cap is checked
    (json_size: UTF-8, escapes), not in characters: half the cap counted in characters let
    400 matches in Chinese code outgrow it, and the whole query failed output_too_large."""
    strings = ("file", "kind", "name", "code", "context", "engine")
    return _MATCH_OVERHEAD + sum(json_size(m[key]) for key in strings)


class _Desc:
    """A text that orders in reverse (heap keys: a file earlier in the result ranks higher)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __lt__(self, other: _Desc) -> bool:
        return self.text > other.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.text == other.text

    __hash__ = None  # type: ignore[assignment]


_Key = tuple[int, _Desc, int, int]


def _admits(found: list[tuple[_Key, dict[str, Any]]], limit: int, key: _Key) -> bool:
    """Whether a match of ``key`` is among the best ``limit`` so far (its excerpt is then
    worth making: :func:`_keep`)."""
    return len(found) < limit or found[0][0] < key


def _keep(
    found: list[tuple[_Key, dict[str, Any]]], limit: int, key: _Key, match: dict[str, Any]
) -> None:
    """Keep ``match`` among the best ``limit``, the worst kept dropped (an admitted key)."""
    if len(found) < limit:
        heapq.heappush(found, (key, match))
    else:
        heapq.heapreplace(found, (key, match))


def code_query(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    query: str = args["query"].strip()
    if not query:
        raise ToolFailed("query must not be empty", reason="empty_query")
    want = args.get("type", "all")
    limit = int(args.get("limit", 50))
    match = _matcher(query)
    # The best ``limit`` matches so far, as a heap whose top is the worst kept (keys are
    # the result's order negated); every match is counted, only these are kept. All were
    # kept, each with its excerpt: tens of thousands in one minified bundle.
    found: list[tuple[_Key, dict[str, Any]]] = []
    count = 0
    engines: set[str] = set()
    scanned = skipped = 0
    with Workspace.for_call(ctx) as ws:
        base = ws.parts(args.get("path", "."))
        # lstat refuses (path_not_allowed) a path whose folder resolved outside the read
        # globs, before the path match below names it (``type: file`` opens nothing).
        single = (st := ws.lstat(base)) is not None and st.st_mode & 0o170000 == 0o100000
        if single:
            entries = [(base, base[-1] if base else "")]
        else:
            # Skipped folders are not entered at all: walked and filtered afterwards, a
            # big node_modules used up the walk's bound before the project's own code.
            entries = [
                (tuple(e.path.split("/")), e.name)
                for e in ws.walk(base, max_depth=-1, skip_dirs=_SKIP_DIRS)
                if e.type == "file"
                and not _SKIP_DIRS.intersection(e.path.split("/")[len(base) : -1])
            ]
        for parts, raw_name in entries:
            rel, name = printable(ws.rel(parts)), printable(raw_name)
            if want in ("file", "all") and (score := match(name)):
                count += 1
                key = (score, _Desc(rel), -1, -count)
                if _admits(found, limit, key):
                    path_match = {
                        "file": rel,
                        "kind": "file",
                        "name": name,
                        "line": 1,
                        "column": 1,
                        "code": "",
                        "context": "",
                        "engine": "path",
                    }
                    _keep(found, limit, key, path_match)
            ext = "." + name.rsplit(".", 1)[-1] if "." in name else ""
            if want == "file" or ext not in _SOURCE_EXT or scanned >= _MAX_FILES:
                continue
            scanned += 1
            try:
                fd, _ = ws.open_file(parts)
                with fd:
                    src, too_big = read_bytes(fd.fd, _MAX_FILE_BYTES)
            except (ToolFailed, OSError):
                if single:
                    raise
                # One file the walk found but that cannot be read (hidden by the policy,
                # mode 000, removed since) must not fail the whole query: counted instead.
                skipped += 1
                continue
            if too_big or b"\0" in src:
                continue
            engine, symbols = _symbols(ext, src)
            lines = src.split(b"\n")
            for kind, sym, line, col in symbols:
                if want not in ("all", kind) or not (score := match(sym)):
                    continue
                engines.add(engine)
                count += 1
                key = (score, _Desc(rel), -line, -count)
                if not _admits(found, limit, key):
                    continue
                code, context, column = _excerpt(lines, line, col)
                sym_match = {
                    "file": rel,
                    "kind": kind,
                    "name": sym,
                    "line": line,
                    "column": column,
                    "code": code,
                    "context": context,
                    "engine": engine,
                }
                _keep(found, limit, key, sym_match)
        walk_cut = ws.walk_cut
    found.sort(key=lambda f: f[0], reverse=True)
    matches: list[dict[str, Any]] = []
    budget = ctx.limits.output_bytes - _RESULT_OVERHEAD - json_size(query) - json_size(want)
    for _, m in found:
        m["code"], m["context"] = m["code"][:_MAX_CODE], m["context"][: _MAX_CODE * 3]
        budget -= _match_size(m)
        if budget < 0:
            break
        matches.append(m)
    return {
        "query": query,
        "type": want,
        "matches": matches,
        "count": count,
        "truncated": len(matches) < count or scanned >= _MAX_FILES or walk_cut,
        "engines": sorted(engines),
        "skipped": skipped,
    }
