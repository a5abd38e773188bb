"""How deep things may nest: a workspace tree (one number shared by the sandbox's mask
walk, the policy's write-path check and the toolkit's directory creation) and a tool's
result (:data:`RESULT_MAX_DEPTH`). Private.

The mask walk (``runtime.backends.sandbox.masks``) descends one Python frame per directory
level and fails a call closed past :data:`WALK_MAX_DEPTH` (a protected file deeper down
could not be masked). Nothing the runtime's own tools do may build a tree that deep, or the
call that built it would leave every later call refused: the policy refuses a write path
with more than :data:`CREATE_MAX_DEPTH` components, and ``Workspace.open_dir(create=True)``
refuses to create a directory deeper than that, before anything is made. The margin between
the two leaves room for a tree the tools made to be moved a few levels down (``mv``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CREATE_MAX_DEPTH", "RESULT_MAX_DEPTH", "WALK_MAX_DEPTH", "nests_deeper"]

#: Directory levels below the workspace the mask walk descends before it fails closed.
WALK_MAX_DEPTH = 256
#: Path components (directories and the final name) a tool may create, counted from the
#: workspace root: ``a/b/c.txt`` is 3.
CREATE_MAX_DEPTH = WALK_MAX_DEPTH - 16

#: Levels of arrays and objects a tool's result may nest (``[]`` is one level, ``{"a": []}``
#: two), whatever backend made it; the broker refuses a deeper one as ``output_too_large``.
#: Hazard: every serialiser a result passes has a depth limit of its own, and one deeper
#: than it failed after the call was recorded as a success: pydantic's (``ToolResult``,
#: the MCP SDK's message) stops at 255 levels of the whole message, so a 500-level
#: ``json_parse`` crashed ``runtime exec`` with a traceback and came back from the MCP server
#: as a JSON-RPC error with code 0. Half of that leaves room for every envelope a result is
#: wrapped in. The json guest (``guests/rt/json.h`` ``JSON_MAX_DEPTH``) parses documents one
#: level less deep: ``json_parse`` wraps its document in ``{"data": ...}``.
RESULT_MAX_DEPTH = 128


def nests_deeper(value: Any, max_depth: int) -> bool:
    """Whether ``value`` nests lists/tuples/dicts more than ``max_depth`` levels. A loop over
    an explicit stack, not recursion: the value may be deeper than the interpreter's stack."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return True
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))
    return False
