"""How the built-in catalogue's tools look to the policy, for checking ``[[examples]]`` at load
time (the catalogue itself is not loaded then). An example may override with ``spec``."""

from __future__ import annotations

import functools
import json
from typing import Any

__all__ = ["CATALOGUE_HINTS", "builtin_parameters"]

_R, _W, _RW = "read_path", "write_path", "read_write_path"

#: name -> (category, arg_roles, egress)
CATALOGUE_HINTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "read_file": ("file", {"path": _R}, False),
    "write_file": ("file", {"path": _W}, False),
    "edit_file": ("file", {"path": _RW}, False),
    "list_files": ("file", {"path": _R}, False),
    "delete_file": ("file", {"path": _W}, False),
    "move_file": ("file", {"source": _RW, "destination": _W}, False),
    "get_file_info": ("file", {"path": _R}, False),
    "file_search": ("file", {"path": _R}, False),
    "code_query": ("code", {"path": _R}, False),
    "shell_exec": ("shell", {"command": "command", "cwd": "cwd", "env": "env"}, False),
    "http_get": ("network", {"url": "url"}, True),
    "http_post": ("network", {"url": "url"}, True),
    "http_request": ("network", {"url": "url"}, True),
    "web_fetch": ("network", {"url": "url", "urls": "url"}, True),
    "web_search": ("network", {}, True),
    "current_time": ("system", {}, False),
    "sleep": ("system", {}, False),
    "get_env": ("system", {}, False),
    "set_env": ("system", {"key": "session_env"}, False),
    "json_parse": ("data", {}, False),
    "json_stringify": ("data", {}, False),
    "json_query": ("data", {}, False),
    "csv_to_json": ("data", {}, False),
    "hash": ("data", {}, False),
    "base64_encode": ("data", {}, False),
    "base64_decode": ("data", {}, False),
    "regex_match": ("data", {}, False),
    "snippet_save": ("memory", {}, False),
    "snippet_load": ("memory", {}, False),
    "snippet_list": ("memory", {}, False),
    "snippet_delete": ("memory", {}, False),
    "memory_write": ("memory", {}, False),
    "memory_read": ("memory", {}, False),
    "memory_search": ("memory", {}, False),
    "memory_delete": ("memory", {}, False),
    "ask_user": ("interaction", {}, False),
    "request_confirmation": ("interaction", {}, False),
    "review_with_feedback_content": ("interaction", {}, False),
}


@functools.cache
def builtin_parameters(name: str) -> dict[str, Any] | None:
    """The parameters schema of the built-in tool ``name``, read from its manifest alone
    (``<builtin tools>/<group>/<name>.json``), so that an example's arguments can be
    checked at load without loading the catalogue; None when ``name`` is no built-in tool.
    Shared and cached: not to be modified."""
    if name not in CATALOGUE_HINTS:
        return None
    from runtime.toolkit import builtin_tools_dir  # only when an example names a built-in

    for path in builtin_tools_dir().glob(f"*/{name}.json"):
        params = json.loads(path.read_text(encoding="utf-8")).get("parameters")
        return params if isinstance(params, dict) else None
    return None
