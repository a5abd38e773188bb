"""Shell and gitignore forms that no glob of a policy has, refused where the policy loads.

Every glob of a policy is matched with fnmatch (``[paths]`` through ``runtime._globs``,
which adds ``**``): neither has brace expansion nor a negating leading ``!``. Read
literally, ``*.{pem,key}`` matches only a name with braces in it and ``!x`` only a name
starting with '!', so a deny rule so written denied nothing, silently. ``[paths]`` refused
them first (``_workspace_globs``); the other glob fields (``[tools]`` names, ``[[rules]]``
tools and ``glob`` conditions, command-rule globs, ``[env]``, profiles) refuse them here.

A brace in an argument word is often meant literally (``awk '{print $1,$2}'``, a JSON
body, jq's ``{name,id}``: the shell has parsed the command, so a brace left in a word is
one it did not expand), and such a program is no more an alternation to this check than
``*.{pem,key}`` is: the message for argument fields leads with the literal spelling and
offers the alternatives second. A group opened by ``${`` is bash's parameter expansion,
never brace-expanded, and is not refused.
"""

from __future__ import annotations

import re

__all__ = ["refuse_braces", "refuse_leading_bang"]

#: A shell-style brace group: alternatives ('{pem,key}') or a sequence ('{1..3}'). Not one
#: opened by '${': bash reads that as a parameter expansion ('${A:-x,y}', '${v,,}') and
#: never brace-expands it, so no one writes alternatives so; it stays a literal.
_BRACES = re.compile(r"(?<!\$)\{([^{}]*(?:,|\.\.)[^{}]*)\}")
#: A character class, as fnmatch and runtime._globs read one ('[{]' is a literal brace).
_CLASS = re.compile(r"\[[!^]?\]?[^\]/]*\]")
#: What an alternative made only of these matches is (nearly) every word: '', '*', '***',
#: '**/*', '?'. Offered instead of a brace group, it turned a rule off ('unless_args').
_WILD = "*?/"
#: What a sequence ('{1..3}') stands for, in a message.
_SEQUENCE = "each glob of the sequence"


def refuse_braces(
    glob: str,
    where: str,
    shown: str | None = None,
    *,
    instead: str = "list the globs separately",
    literal_first: bool = False,
) -> None:
    """Raise ValueError when ``glob`` has a brace group outside a character class.

    The message offers the glob spelled with literal braces (each '[{]' or '[}]', in full)
    and the globs to write ``instead`` (spelled from ``shown``, the glob as it will be
    matched, ``glob`` itself by default), unless one of them would be empty or made only
    of wildcards: copied into a deny rule it denies everything, into ``unless_args`` it
    turns the rule off. ``literal_first`` (argument words and values, where a brace may
    well be meant: an awk program, a JSON body) puts the literal spelling first.
    ``where`` names the field ('[paths] globs')."""
    rel = glob if shown is None else shown
    # Classes blanked out, same length, so that a match's span is the glob's own.
    blank = _CLASS.sub(lambda m: "_" * len(m.group()), rel)
    group = _BRACES.search(blank)
    if group is None:
        return
    # Only braces outside a class are respelled: one in '[{]' is literal already.
    literal = "".join(f"[{c}]" if b in "{}" else c for c, b in zip(rel, blank, strict=True))
    listed = _alternatives(rel, group)
    what = "word" if literal_first else "name"
    if listed is None:
        others = f"alternatives are not offered, as one would be empty or match every {what}"
    else:
        meant = "a sequence" if listed == _SEQUENCE else "alternatives"
        others = f"if you meant {meant}, {instead} ({listed})"
    said = f"glob {glob!r}: braces are not expanded in {where}"
    if literal_first:
        raise ValueError(
            f"{said}; to match these braces literally, write {literal!r} (each brace as "
            f"'[{{]' or '[}}]'); {others}"
        )
    said += " (it would match a name with braces in it)"
    if listed is None:
        raise ValueError(f"{said}: a literal brace is '[{{]' or '[}}]' ({literal!r}); {others}")
    raise ValueError(f"{said}: {instead} ({listed}); a literal brace is '[{{]' or '[}}]'")


def _alternatives(rel: str, group: re.Match[str]) -> str | None:
    """The globs ``group`` (a brace group of ``rel``) stands for, listed for a message;
    None when one would be empty or only wildcards ('*{"a":1,*}*' gives '***')."""
    body = group.group(1)
    if ".." in body and "," not in body:
        return _SEQUENCE
    alts = [rel[: group.start()] + alt + rel[group.end() :] for alt in body.split(",")]
    if any(not alt.strip(_WILD) for alt in alts):
        return None
    return ", ".join(repr(alt) for alt in alts)


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
