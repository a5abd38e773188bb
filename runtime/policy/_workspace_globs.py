"""One spelling for every workspace glob of a policy (``[paths]`` read, write, deny,
deny_read, deny_write), fixed when the policy loads.

Paths are normalised before they are matched (``./out/a`` is checked as ``out/a``), globs
were not: ``./out/**`` or ``/workspace/out/**`` matched no normalised path, so a write glob
spelled so granted nothing to the file tools, a deny glob denied nothing, and the sandbox,
which binds the globs' literal prefixes, found none and left the whole workspace writable
(``runtime.backends.sandbox._narrow``). Now such a glob is rewritten to the one form the
lexical checks, the masks and the sandbox's prefixes all read (``out/**``), and a glob
that cannot name a path in the workspace is refused with the list and the glob named.
"""

from __future__ import annotations

from runtime.policy._glob_syntax import refuse_braces

__all__ = ["SANDBOX_ROOT", "workspace_glob"]

#: Where the sandbox shows the workspace (``newroot.WORKSPACE``); the file tools accept it.
SANDBOX_ROOT = "/workspace"

_USE = "a glob is relative to the workspace ('out/**') or under /workspace ('/workspace/out/**')"


def _names(path: str) -> list[str]:
    return [seg for seg in path.split("/") if seg not in ("", ".")]


def workspace_glob(glob: str) -> str:
    """``glob`` in its one workspace-relative form: a leading ``./``, ``/workspace/`` and
    ``//`` or ``/./`` inside dropped
    (``./out//a/./*.txt`` -> ``out/a/*.txt``). Raises ValueError, saying why, for a glob
    that names no path inside the workspace: empty, the workspace root itself, with a
    ``..`` segment, absolute elsewhere, or ending with ``/`` (which no path does: say
    ``out/**`` or ``out``). Wildcards are left as they are: a leading ``**`` still means
    anywhere."""
    if not glob:
        raise ValueError("an empty glob ('') matches nothing; '**' is the whole workspace")
    names = _names(glob)
    if ".." in names:
        raise ValueError(
            f"glob {glob!r} has a '..' segment, which names no path inside the workspace: {_USE}"
        )
    if glob.startswith("/"):
        prefix = _names(SANDBOX_ROOT)
        if names[: len(prefix)] != prefix:
            raise ValueError(f"glob {glob!r} is an absolute path outside the workspace: {_USE}")
        names = names[len(prefix) :]
    if not names:
        raise ValueError(
            f"glob {glob!r} names the workspace root itself, which no glob matches; "
            "'**' is the whole workspace"
        )
    rel = "/".join(names)
    _refuse_shell_syntax(glob, rel)
    if glob.endswith("/"):
        raise ValueError(
            f"glob {glob!r} ends with '/', which no path does: write '{rel}/**' for the "
            f"directory and everything in it, or '{rel}' for the entry alone"
        )
    return rel


def _refuse_shell_syntax(glob: str, rel: str) -> None:
    """Raise ValueError for the shell and gitignore forms these globs do not have, which
    were read literally: '**/*.{pem,key}' matched only a name with braces in it (it
    protected nothing), '!public/**' only a name starting with '!' (it excepted nothing)."""
    refuse_braces(glob, "[paths] globs", rel)
    if rel.startswith("!"):
        raise ValueError(
            f"glob {glob!r}: a leading '!' does not negate in [paths] globs (it would match "
            "a name starting with '!'): a path is refused when any deny list matches it, and "
            "readable or writable only when read or write does; narrow those lists instead "
            "(for a name that does start with '!', begin the glob with '?')"
        )
