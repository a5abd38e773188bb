"""Where the policy's narrow ``[paths]`` globs confine a call: their literal prefixes.

Two walls use them (``walls.landlock_rules``: Landlock, for content and entries; ``newroot``:
the mount flags, for metadata), so they live here, below both modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.backends.sandbox.child import CallPlan

__all__ = ["narrow_prefixes", "write_binds"]


def narrow_prefixes(globs: list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The workspace-relative directories (or files) that hold every match of ``globs``:
    each glob's literal leading segments (``src/**`` → ``src``, ``docs/*.md`` → ``docs``,
    ``README.md`` → itself), the ones inside another dropped. None when they cannot be
    narrowed: ``globs`` is None (everything), or a glob starts with a wildcard (``**/*.py``,
    ``*.md``) and so may match anywhere. A superset of the globs' matches, by directory: the
    policy's lexical checks stay the exact rule for the paths a tool names.

    Fails closed: only a wildcard widens. A glob with an empty, ``.`` or ``..`` segment
    (``./out/**``, ``/workspace/out/**``, ``out/``) matches no normalised path, so it grants
    nothing here either; the policy loader rewrites or refuses such globs
    (``runtime.policy._workspace_globs``), so none should arrive. Read as "no literal head"
    it was "anywhere": the whole workspace writable."""
    if globs is None:
        return None
    found: set[str] = set()
    for pattern in globs:
        segs = pattern.split("/")
        if any(seg in ("", ".", "..") for seg in segs):
            continue
        literal: list[str] = []
        for seg in segs:
            if not set(seg).isdisjoint("*?["):
                break
            literal.append(seg)
        if not literal:
            return None
        found.add("/".join(literal))
    ordered = sorted(found)
    return tuple(p for p in ordered if not any(p.startswith(q + "/") for q in ordered))


def write_binds(plan: CallPlan) -> tuple[str, ...] | None:
    """The write prefixes of a writable call whose write globs are narrowed (``plan.narrow``):
    its workspace is mounted read-only and each of these is bound read-write on top
    (``newroot``), so that nothing outside them changes, metadata included (chmod, chown,
    utimes, xattrs: Landlock does not govern them). None: the workspace keeps the call's
    access (read-only, or writable as a whole). An empty tuple: writable nowhere. The
    TEST-ONLY ``disable={"narrow_mounts"}`` leaves ``"mounts": False`` in ``plan.narrow``."""
    if not plan.workspace or plan.access != "rw" or not plan.narrow.get("mounts", True):
        return None
    return narrow_prefixes(plan.narrow.get("write"))
