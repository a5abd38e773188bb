"""Whether ``runtime exec``'s call is for a sandboxed tool, known before the broker loads.

Only a hint for :class:`~runtime.broker.Broker`'s ``prespawn_sandbox`` (the fork-server's
process then boots while the broker sets up): nothing is decided from it. The broker still
normalises, looks up, validates and decides the call as always; a wrong hint costs a process
started for nothing (ended when the broker closes), or the usual start on the first call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from runtime.errors import RuntimeToolError
from runtime.models import TOOL_NAME_RE
from runtime.shapes import parse_call_bytes
from runtime.toolkit import builtin_tools_dir

__all__ = ["sandboxed_tool"]

_MAX_MANIFEST_BYTES = 1_048_576


def sandboxed_tool(raw: bytes, tool_folders: Iterable[Path] = ()) -> bool:
    """True when ``raw`` is a call whose tool's manifest (``<name>.json`` in a tool folder
    or the built-in catalogue) declares the subprocess backend."""
    try:
        name = parse_call_bytes(raw).tool
    except RuntimeToolError:
        return False
    if not TOOL_NAME_RE.match(name):  # the name goes into a glob pattern below
        return False
    for folder in [*tool_folders, builtin_tools_dir()]:
        try:
            paths = sorted(Path(folder).rglob(f"{name}.json"))
        except OSError:
            continue
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    data = json.loads(fh.read(_MAX_MANIFEST_BYTES))
            except (OSError, ValueError, RecursionError):
                continue
            if isinstance(data, dict) and data.get("name") == name:
                return data.get("backend") == "subprocess"
    return False
