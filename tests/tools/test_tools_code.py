"""code_query: Python through ast, other languages through tree-sitter or the regex fallback."""

from __future__ import annotations

import importlib
import importlib.util
import json
import multiprocessing
import os
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.errors import ToolFailed
from runtime.models import Limits
from runtime.toolkit import ToolContext

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]

HAVE_TS = all(
    importlib.util.find_spec(m) is not None
    for m in ("tree_sitter", "tree_sitter_javascript", "tree_sitter_typescript")
)


@pytest.fixture
def cq(tool: Callable[[str], Tool]) -> Tool:
    return tool("code_query")


@pytest.fixture
def src(ws: Path) -> Path:
    (ws / "pkg").mkdir()
    (ws / "pkg" / "mod.py").write_text(
        textwrap.dedent("""\
        import os

        MAX_ITEMS = 10


        class Parser:
            depth: int = 0

            def parse(self, text):
                return text

        async def parse_all(items):
            result = [x for x in items]
            return result
        """)
    )
    (ws / "web.ts").write_text(
        textwrap.dedent("""\
        export class Widget {
          render(): void {}
        }
        const makeWidget = () => new Widget();
        let counter = 0;
        """)
    )
    (ws / "lib.rb").write_text("class Gem\n  def polish\n  end\nend\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "dep.py").write_text("def parse(): pass\n")
    (ws / "broken.py").write_text("def parse_broken(:\n")
    return ws


def _names(r: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(m["name"], m["kind"], m["engine"]) for m in r["matches"]]


def test_python_ast(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "parse", "type": "function", "path": "pkg"}, ctx)
    assert _names(r) == [("parse", "function", "ast"), ("parse_all", "function", "ast")]
    m = r["matches"][0]
    assert (m["file"], m["line"], m["column"]) == ("pkg/mod.py", 9, 5)
    assert m["code"] == "    def parse(self, text):"
    assert m["context"] == "    depth: int = 0\n\n    def parse(self, text):\n        return text\n"
    assert r["engines"] == ["ast"]


def test_python_classes_and_variables(cq: Tool, ctx: ToolContext, src: Path) -> None:
    assert _names(cq({"query": "Parser", "type": "class"}, ctx)) == [("Parser", "class", "ast")]
    r = cq({"query": "MAX_*", "type": "variable"}, ctx)
    assert _names(r) == [("MAX_ITEMS", "variable", "ast")] and r["matches"][0]["line"] == 3
    assert _names(cq({"query": "depth", "type": "variable"}, ctx)) == [("depth", "variable", "ast")]
    # locals inside functions are not definitions worth listing
    assert cq({"query": "result", "type": "variable"}, ctx)["count"] == 0


_NESTED = """\
try:
    import ujson
except ImportError:
    def in_except(s):
        return s
else:
    def in_try_else(): pass
finally:
    IN_FINALLY = 1
try:
    pass
except* ValueError:
    def star_handler_def(): pass
async def outer():
    async with x:
        def in_async_with(): pass
    async for i in y:
        def in_async_for(): pass
match cmd:
    case [1, *rest]:
        class InMatch: pass
    case _:
        IN_MATCH_DEFAULT = 2
while True:
    def loop_body_def(): pass
    break
else:
    def in_while_else(): pass
"""


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("in_except", "function"),
        ("in_try_else", "function"),
        ("IN_FINALLY", "variable"),
        ("star_handler_def", "function"),
        ("in_async_with", "function"),
        ("in_async_for", "function"),
        ("InMatch", "class"),
        ("IN_MATCH_DEFAULT", "variable"),
        ("loop_body_def", "function"),
        ("in_while_else", "function"),
    ],
)
def test_python_definitions_in_every_block(
    cq: Tool, ctx: ToolContext, ws: Path, name: str, kind: str
) -> None:
    """Every statement list is searched: except handlers, match cases, async with/for,
    except*. Only if/try/with/for/while bodies were, so a definition in an except handler
    was missed by the ast engine, with truncated false (an empty answer to be trusted)."""
    (ws / "m.py").write_text(_NESTED)
    r = cq({"query": name}, ctx)
    assert _names(r) == [(name, kind, "ast")] and not r["truncated"]


def test_exact_name_ranks_first(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "parse", "path": "pkg"}, ctx)
    assert r["matches"][0]["name"] == "parse"


def test_skips_vendored_dirs(cq: Tool, ctx: ToolContext, src: Path) -> None:
    files = {m["file"] for m in cq({"query": "parse"}, ctx)["matches"]}
    assert not any(f.startswith("node_modules/") for f in files)


def test_syntax_error_falls_back_to_regex(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "parse_broken"}, ctx)
    assert _names(r) == [("parse_broken", "function", "regex")]


@pytest.mark.skipif(not HAVE_TS, reason="tree-sitter grammar wheels not installed")
def test_typescript_tree_sitter(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "widget", "path": "web.ts"}, ctx)
    assert _names(r) == [
        ("Widget", "class", "tree-sitter"),
        ("makeWidget", "function", "tree-sitter"),
    ]
    assert r["matches"][0]["line"] == 1 and r["matches"][0]["column"] == 14
    assert _names(cq({"query": "counter", "type": "variable"}, ctx)) == [
        ("counter", "variable", "tree-sitter")
    ]


def test_parser_memory_error_falls_back_to_regex(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # Red team (K3): CPython's parser raises MemoryError on deep nesting, with the process
    # far below any limit; one such 10 KB file made every query fail as resource_limit.
    (ws / "src").mkdir()
    for i in range(1, 21):
        (ws / "src" / f"m{i}.py").write_text(f"def good_{i}(): pass\n")
    (ws / "src" / "zz_tiny.py").write_text("x = " + "-" * 10000 + "1\ndef good_tiny(): pass\n")
    (ws / "src" / "zz_lambda.py").write_text("lambda: " * 100000 + "1\ngood_lambda = 1\n")
    r = cq({"query": "good"}, ctx)
    names = {(m["name"], m["engine"]) for m in r["matches"]}
    assert {(f"good_{i}", "ast") for i in range(1, 21)} <= names
    assert {("good_tiny", "regex"), ("good_lambda", "regex")} <= names
    assert r["count"] == 22 and r["skipped"] == 0 and r["engines"] == ["ast", "regex"]
    # Named outright, the file is read by the fallback too.
    one = cq({"query": "good", "path": "src/zz_tiny.py"}, ctx)
    assert _names(one) == [("good_tiny", "function", "regex")]


@pytest.mark.sandbox
def test_parser_memory_error_is_not_a_resource_limit(tmp_path: Path) -> None:
    # Through the broker the uncaught MemoryError read as "exceeded its 512 MiB memory
    # limit" (resource_limit) at 22 MB RSS.
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "m.py").write_text("def good_1(): pass\n")
    (ws / "src" / "zz_tiny.py").write_text("x = " + "-" * 10000 + "1\n")
    with SyncBroker(workspace=ws) as broker:
        r = broker.call({"tool": "code_query", "arguments": {"query": "good"}})
    assert r.success, r.error
    assert r.result is not None and [m["name"] for m in r.result["matches"]] == ["good_1"]


@pytest.mark.parametrize("error", [MemoryError, RecursionError])
def test_tree_sitter_failure_falls_back_to_regex(
    cq: Tool, ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch, error: type
) -> None:
    # A grammar that gives up on a file (as ast does above) must not fail the query.
    def parse(src: bytes) -> Any:
        raise error()

    module = importlib.import_module(cq.__module__)
    monkeypatch.setattr(module, "_GRAMMARS", {".ts": parse})
    (ws / "web.ts").write_text("export class Widget {}\n")
    (ws / "ok.py").write_text("class WidgetPy: pass\n")
    r = cq({"query": "Widget", "type": "class"}, ctx)
    assert sorted(_names(r)) == [("Widget", "class", "regex"), ("WidgetPy", "class", "ast")]


def test_regex_fallback_says_so(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "polish"}, ctx)
    assert _names(r) == [("polish", "function", "regex")] and r["engines"] == ["regex"]


def test_file_query_and_limit(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "*.py", "type": "file"}, ctx)
    assert [m["file"] for m in r["matches"]] == ["broken.py", "pkg/mod.py"]
    assert r["matches"][0]["engine"] == "path"
    r = cq({"query": "a", "limit": 2}, ctx)
    assert len(r["matches"]) == 2 and r["truncated"]


def test_glob_queries_are_the_listings_globs(cq: Tool, ctx: ToolContext, src: Path) -> None:
    """A glob query is matched as list_files' and file_search's patterns are (runtime._globs):
    fnmatch read '[^P]' as the class of '^' and 'P', where the project's globs (and the
    policy's) read it as 'not P'."""
    assert _names(cq({"query": "[P]arser"}, ctx)) == [("Parser", "class", "ast")]
    assert cq({"query": "[!P]arser"}, ctx)["count"] == 0
    assert cq({"query": "[^P]arser"}, ctx)["count"] == 0
    assert [m["file"] for m in cq({"query": "m?d.*", "type": "file"}, ctx)["matches"]] == [
        "pkg/mod.py"
    ]


def test_bad_input(cq: Tool, ctx: ToolContext, src: Path, outside: Path) -> None:
    with pytest.raises(ToolFailed):
        cq({"query": "   "}, ctx)
    with pytest.raises(ToolFailed):
        cq({"query": "x", "path": "../outside"}, ctx)
    (src / "o").symlink_to(outside)
    with pytest.raises(ToolFailed):
        cq({"query": "x", "path": "o"}, ctx)
    (src / "loop").symlink_to(".")
    assert cq({"query": "Parser"}, ctx)["count"] == 1  # loops are not followed


@pytest.mark.skipif(not HAVE_TS, reason="tree-sitter grammar wheels not installed")
def test_tree_sitter_skips_locals(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    (ws / "a.js").write_text("const top = 1;\nfunction f() { const inner = 2; }\n")
    assert _names(cq({"query": "top"}, ctx)) == [("top", "variable", "tree-sitter")]
    assert cq({"query": "inner"}, ctx)["count"] == 0


def test_long_lines_are_cut(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    (ws / "min.js").write_text("var minified = 1;" + "x" * 100_000 + "\n")
    m = cq({"query": "minified"}, ctx)["matches"][0]
    assert len(m["code"]) == 400 and len(m["context"]) <= 1200


def _bundle() -> str:
    """A minified bundle: one 1,000,000-byte line of short declarations (under the 1 MiB cap)."""
    return "".join(f"var v{i}=1;" for i in range(90000))[:1_000_000]


@pytest.mark.sandbox
def test_a_minified_bundle_is_searched_within_the_call_limits(tmp_path: Path) -> None:
    # Every match decoded its whole 1 MB line, and that line again as its context, before
    # the cut, and every match was kept: code_query hit its 512 MiB (resource_limit) on
    # this one file, 11,111 matches of "v1". Through the broker: its real memory limit.
    ws = tmp_path / "ws"
    (ws / "static").mkdir(parents=True)
    body = _bundle()
    (ws / "static" / "app.min.js").write_text(body)
    expected = sum(1 for name in re.findall(r"var (\w+)=", body) if "v1" in name)
    with SyncBroker(workspace=ws) as broker:
        r = broker.call({"tool": "code_query", "arguments": {"query": "v1", "limit": 500}})
    assert r.success, r.error
    assert r.usage is not None and r.usage.max_rss_kb is not None
    assert r.usage.max_rss_kb < 256 * 1024, r.usage
    assert r.result is not None
    assert r.result["count"] == expected == 11111 and r.result["truncated"]
    matches = r.result["matches"]
    assert 0 < len(matches) <= 500 and matches[0]["name"] == "v1"  # the exact name first
    for m in matches:
        assert len(m["code"]) <= 400 and len(m["context"]) <= 1200
        assert m["column"] == body.index(f"var {m['name']}=") + 5


def test_a_long_line_is_cut_around_the_match(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # The cut kept the line's first 400 characters: far from a match deep in a bundle.
    head = "".join(f"var a{i}=1;" for i in range(50000))
    (ws / "app.min.js").write_text(head + "var needle=1;" + "var b=2;" * 1000)
    m = cq({"query": "needle"}, ctx)["matches"][0]
    assert m["column"] == len(head) + 5
    assert "var needle=1;" in m["code"] and len(m["code"]) == 400
    assert "var needle=1;" in m["context"] and len(m["context"]) <= 1200


def test_the_kept_matches_are_the_best_ones(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # Only the best `limit` are kept while all are counted: the exact name, found last,
    # still comes first, and the rest follow in file and line order.
    for name in ("a", "b", "c"):
        (ws / f"{name}.py").write_text("".join(f"def parse_{i}(): pass\n" for i in range(30)))
    (ws / "z.py").write_text("def parse(): pass\n")
    r = cq({"query": "parse", "limit": 4}, ctx)
    assert r["count"] == 91 and r["truncated"]
    got = [(m["file"], m["name"]) for m in r["matches"]]
    assert got == [("z.py", "parse"), ("a.py", "parse_0"), ("a.py", "parse_1"), ("a.py", "parse_2")]


def test_without_tree_sitter_falls_back_to_regex(
    cq: Tool, ctx: ToolContext, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(cq.__module__)
    monkeypatch.setattr(module, "_GRAMMARS", {})
    r = cq({"query": "Widget", "type": "class", "path": "web.ts"}, ctx)
    assert _names(r) == [("Widget", "class", "regex")] and r["engines"] == ["regex"]


_C_SOURCE = textwrap.dedent("""\
    #include <stdio.h>
    struct point { int x; };
    static const char *name_of(struct point *p) {
        return "p";
    }
    static int
    gnu_style(int a,
              char **argv)
    {
        if (a) {
            return 1;
        }
        return 0;
    }
    int main(void) {
        int total = 0;
        for (int i = 0; i < 3; i++) { total += i; }
        return total;
    }
    void declared_only(int a);
    unsigned long long *make_table (size_t n) {
        return 0;
    }
    counter = 3
    local lua_var = 1
    """)


def test_regex_fallback_finds_c_definitions(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # The same definitions the multi-line patterns found, one line at a time.
    (ws / "prog.c").write_text(_C_SOURCE)
    r = cq({"query": "*", "limit": 500}, ctx)
    got = [(m["name"], m["kind"], m["line"], m["column"]) for m in r["matches"]]
    assert sorted(x for x in got if x[1] != "file") == sorted(
        [
            ("point", "class", 2, 8),
            ("name_of", "function", 3, 20),
            ("gnu_style", "function", 7, 1),
            ("main", "function", 15, 5),
            ("make_table", "function", 21, 21),
            ("counter", "variable", 24, 1),
            ("lua_var", "variable", 25, 7),
        ]
    )


def test_regex_fallback_is_not_quadratic(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # Red team: 120 KB of "a\n" kept the old C-definition pattern backtracking past the
    # call's 30 s timeout (12,000 lines: 22 s). Bounded by a thread with the tool's own
    # timeout rather than a tight timing: it must simply finish.
    (ws / "gen.c").write_bytes(b"a\n" * 60_000)
    (ws / "gen2.c").write_bytes(b"int a a a a a a a a a a a a a a a a a a a\n" * 3000)
    (ws / "gen3.c").write_bytes(b"x = 1\n" * 100_000)
    # In a forked child: the regex engine holds the GIL, so a thread could not be timed out.
    reader, writer = multiprocessing.get_context("fork").Pipe(duplex=False)

    def run() -> None:
        writer.send(cq({"query": "main"}, ctx))

    child = multiprocessing.get_context("fork").Process(target=run, daemon=True)
    child.start()
    try:
        assert reader.poll(ctx.limits.timeout_s), (
            f"code_query did not finish within {ctx.limits.timeout_s} s"
        )
        r = reader.recv()
    finally:
        child.kill()
        child.join()
    assert r["count"] == 0 and r["skipped"] == 0


def test_unreadable_files_are_skipped_and_counted(cq: Tool, ctx: ToolContext, ws: Path) -> None:
    # Red team: one file that cannot be opened failed the whole query with tool_error.
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("def main():\n    pass\n")
    (ws / "src" / ".env.local.js").write_text("const KEY = 's3cret';\n")
    (ws / "src" / "locked.py").write_text("def main_locked(): pass\n")
    (ws / "src" / "locked.py").chmod(0)
    try:
        ctx.options["path_deny"] = ["**/.env.*"]
        r = cq({"query": "main"}, ctx)
        names = [m["name"] for m in r["matches"] if m["kind"] != "file"]
        root = os.geteuid() == 0  # root reads a mode-000 file
        assert names == (["main", "main_locked"] if root else ["main"])
        assert r["skipped"] == (1 if root else 2)
        assert cq({"query": "KEY"}, ctx)["count"] == 0
        # A file named outright still says why it cannot be read.
        with pytest.raises(ToolFailed) as exc:
            cq({"query": "KEY", "path": "src/.env.local.js"}, ctx)
        assert exc.value.details["reason"] == "path_denied"
    finally:
        (ws / "src" / "locked.py").chmod(0o644)


def test_file_removed_between_walk_and_open_is_skipped(
    cq: Tool, ctx: ToolContext, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.py").write_text("def main(): pass\n")
    (ws / "b.py").write_text("def main_b(): pass\n")
    from runtime.toolkit_fs import Workspace

    real = Workspace.open_file

    def vanishing(self: Workspace, parts: tuple[str, ...], flags: int = os.O_RDONLY) -> Any:
        if parts == ("b.py",):
            (ws / "b.py").unlink()
        return real(self, parts, flags)

    monkeypatch.setattr(Workspace, "open_file", vanishing)
    r = cq({"query": "main"}, ctx)
    assert [m["name"] for m in r["matches"] if m["kind"] != "file"] == ["main"]
    assert r["skipped"] == 1


@pytest.mark.parametrize("text", ["中文注释" * 100, '\\x01"\n' * 50, "\x01" * 300, "a" * 400])
def test_result_fits_the_cap_in_bytes(cq: Tool, ws: Path, text: str) -> None:
    """The matches are cut to the output cap as the other file tools cut theirs, in bytes of
    the result's JSON (json_size): half the cap counted in characters let 400 matches in
    Chinese code outgrow it, and the whole query failed output_too_large."""
    lines = [f"def handler_{i:03d}(): return {text!r}" for i in range(400)]
    (ws / "cn.py").write_text("\n".join(lines) + "\n")
    cap = 65536
    small = ToolContext(workspace=ws, limits=Limits(output_bytes=cap))
    r = cq({"query": "handler", "limit": 500}, small)
    size = len(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    assert r["truncated"] and r["count"] == 400 and size <= cap
    assert size > cap * 3 // 4  # the room is used
