"""code_query: Python through ast, other languages through tree-sitter or the regex fallback."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ToolFailed
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


def test_regex_fallback_says_so(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "polish"}, ctx)
    assert _names(r) == [("polish", "function", "regex")] and r["engines"] == ["regex"]


def test_file_query_and_limit(cq: Tool, ctx: ToolContext, src: Path) -> None:
    r = cq({"query": "*.py", "type": "file"}, ctx)
    assert [m["file"] for m in r["matches"]] == ["broken.py", "pkg/mod.py"]
    assert r["matches"][0]["engine"] == "path"
    r = cq({"query": "a", "limit": 2}, ctx)
    assert len(r["matches"]) == 2 and r["truncated"]


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


def test_without_tree_sitter_falls_back_to_regex(
    cq: Tool, ctx: ToolContext, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = importlib.import_module(cq.__module__)
    monkeypatch.setattr(module, "_GRAMMARS", {})
    r = cq({"query": "Widget", "type": "class", "path": "web.ts"}, ctx)
    assert _names(r) == [("Widget", "class", "regex")] and r["engines"] == ["regex"]
