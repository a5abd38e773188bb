"""Shell and gitignore forms that no glob of a policy has, refused where the policy loads.

Every glob of a policy is matched with fnmatch (``[paths]`` through ``runtime._globs``,
which adds ``**``): neither has brace expansion nor a negating leading ``!``. Read
literally, ``*.{pem,key}`` matches only a name with braces in it and ``!x`` only a name
starting with '!', so a deny rule so written denied nothing, silently. ``[paths]`` refused
them first (``_workspace_globs``); the other glob fields (``[tools]`` names, ``[[rules]]``
tools and ``glob`` conditions, command-rule globs, ``[env]``, profiles) refuse them here.
"""

from __future__ import annotations

import re

__all__ = ["refuse_braces", "refuse_leading_bang"]

#: A shell-style brace group: alternatives ('{pem,key}') or a sequence ('{1..3}').
_BRACES = re.compile(r"\{([^{}]*(?:,|\.\.)[^{}]*)\}")
#: A character class, as fnmatch and runtime._globs read one ('[{]' is a literal brace).
_CLASS = re.compile(r"\[[!^]?\]?[^\]/]*\]")


def refuse_braces(
    glob: str,
    where: str,
    shown: str | None = None,
    *,
    instead: str = "list the globs separately",
) -> None:
    """Raise ValueError when ``glob`` has a brace group outside a character class, naming
    the globs to write ``instead`` (spelled from ``shown``, the glob as it will be matched,
    ``glob`` itself by default). ``where`` names the field ('[paths] globs')."""
    rel = glob if shown is None else shown
    # Classes blanked out, same length, so that a match's span is the glob's own.
    group = _BRACES.search(_CLASS.sub(lambda m: "_" * len(m.group()), rel))
    if group is None:
        return
    body = group.group(1)
    if ".." in body and "," not in body:
        listed = "each glob of the sequence"
    else:
        listed = ", ".join(
            repr(rel[: group.start()] + alt + rel[group.end() :]) for alt in body.split(",")
        )
    raise ValueError(
        f"glob {glob!r}: braces are not expanded in {where} (it would match a name "
        f"with braces in it): {instead} ({listed}); a literal brace is "
        "'[{]' or '[}]'"
    )


def refuse_leading_bang(glob: str, where: str) -> None:
    """Raise ValueError when ``glob`` starts with '!', for fields whose values never do
    (tool, program and variable names, file names a command writes): there a '!' can
    only be meant as a negation, which the field does not have."""
    if glob.startswith("!"):
        raise ValueError(
            f"glob {glob!r}: a leading '!' does not negate in {where} (it would match a "
            "name starting with '!', so the entry matches nothing): list what it is for "
            "instead (for a name that does start with '!', begin the glob with '?')"
        )
