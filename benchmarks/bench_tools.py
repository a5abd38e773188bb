"""Direct-call cost of the built-in tool implementations (no broker, no sandbox).

This is the floor under an isolated call: the sandbox adds fork + namespaces + frames on
top. Run: ``python -m benchmarks.bench_tools`` from the repository root (or with it on
PYTHONPATH).
"""

from __future__ import annotations

import functools
import os
import tempfile
import timeit
from pathlib import Path

from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry


def main() -> None:
    tools = builtin_tools_dir()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "f.txt").write_bytes((b"x" * 99 + b"\n") * 41)  # ~4 KiB
        for i in range(200):
            (ws / "src").mkdir(exist_ok=True)
            (ws / "src" / f"m{i}.py").write_text(f"def func_{i}():\n    return {i}\n")
        ctx = ToolContext(workspace=ws)
        cases = {
            "read_file 4 KiB": (
                load_entry("files:read_file", tools / "files"),
                {"path": "f.txt"},
                2000,
            ),
            "write_file 4 KiB (2 fsyncs)": (
                load_entry("files:write_file", tools / "files"),
                {"path": "g.txt", "content": "y" * 4096},
                200,
            ),
            "list_files 200 entries": (
                load_entry("files:list_files", tools / "files"),
                {"path": "src"},
                200,
            ),
            "code_query over 200 .py": (
                load_entry("code:code_query", tools / "code"),
                {"query": "func_1"},
                20,
            ),
        }
        for name, (fn, args, number) in cases.items():
            call = functools.partial(fn, args, ctx)
            best = min(timeit.repeat(call, number=number, repeat=5)) / number
            print(f"{name:32s} {best * 1e6:10.1f} us")
        print(f"(pid {os.getpid()}, best of 5 repeats)")


if __name__ == "__main__":
    main()
