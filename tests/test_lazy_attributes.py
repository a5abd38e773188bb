"""The packages whose names load on first use (``runtime._lazy``: ``runtime.audit``,
``runtime.mcp``) list those names in ``dir()`` and ``help()`` without loading them.

Before: they had a module ``__getattr__`` and no ``__dir__``, so ``dir()`` (and what reads
it: ``help()``, completion) showed none of the names not yet used.
"""

from __future__ import annotations

import json

from tests._pythonpath import run_python

#: Modules the packages defer: the audit log's models (pydantic, kept out of the sandbox's
#: fork-server) and the MCP server with its SDK.
_DEFERRED = (
    "pydantic",
    "runtime.audit._log",
    "runtime.audit._redact",
    "runtime.audit._verify",
    "mcp",
    "runtime.mcp.server",
    "runtime.mcp.external",
)


def test_dir_lists_the_lazy_names_and_loads_none_of_them() -> None:
    script = (
        "import json, sys\n"
        "import runtime.audit as audit, runtime.mcp as mcp\n"
        "listed = {p.__name__: dir(p) for p in (audit, mcp)}\n"
        "missing = {p.__name__: [n for n in p.__all__ if n not in listed[p.__name__]]"
        " for p in (audit, mcp)}\n"
        "sorted_ = all(names == sorted(names) for names in listed.values())\n"
        f"loaded = [m for m in {_DEFERRED!r} if m in sys.modules]\n"
        "print(json.dumps([missing, sorted_, loaded, '__doc__' in listed['runtime.audit']]))\n"
    )
    done = run_python(script)
    missing, sorted_, loaded, globals_listed = json.loads(done.stdout.strip().splitlines()[-1])
    assert missing == {"runtime.audit": [], "runtime.mcp": []}
    assert sorted_ and globals_listed
    assert loaded == []


def test_help_documents_the_lazy_names() -> None:
    script = (
        "import pydoc, runtime.audit as audit\n"
        "print(pydoc.render_doc(audit, renderer=pydoc.plaintext))\n"
    )
    doc = run_python(script).stdout
    assert "class AuditLog(" in doc
    assert "redact(obj" in doc
