"""How deep a workspace tree may be: one number shared by the sandbox's mask walk, the
policy's write-path check and the toolkit's directory creation. Private.

The mask walk (``runtime.backends.sandbox.masks``) descends one Python frame per directory
level and fails a call closed past :data:`WALK_MAX_DEPTH` (a protected file deeper down
could not be masked). Nothing the runtime's own tools do may build a tree that deep, or the
call that built it would leave every later call refused: the policy refuses a write path
with more than :data:`CREATE_MAX_DEPTH` components, and ``Workspace.open_dir(create=True)``
refuses to create a directory deeper than that, before anything is made. The margin between
the two leaves room for a tree the tools made to be moved a few levels down (``mv``).
"""

from __future__ import annotations

__all__ = ["CREATE_MAX_DEPTH", "WALK_MAX_DEPTH"]

#: Directory levels below the workspace the mask walk descends before it fails closed.
WALK_MAX_DEPTH = 256
#: Path components (directories and the final name) a tool may create, counted from the
#: workspace root: ``a/b/c.txt`` is 3.
CREATE_MAX_DEPTH = WALK_MAX_DEPTH - 16
