"""Array assignments, which bashlex cannot parse, rewritten into a form it can.

``arr=(a b "$(cmd)")`` assigns the words between the parentheses, each expanded as a
command's argument is (a substitution in one runs). It becomes ``arr=$(: a b "$(cmd)")``:
a value known only at run time, whose words are read as the arguments of ``:`` inside a
substitution, so that every command they hold is walked. ``arr+=(...)`` and ``declare -a
arr=(...)`` alike. Quotes, escapes, substitutions and comments are followed with the
scanner of :mod:`runtime.policy._case`; where it is not sure, :func:`rewrite_arrays`
returns None and the text stays unparseable (ask), as before.
"""

from __future__ import annotations

import re

from runtime.policy._case import Unsure, literal_end, scan_span

__all__ = ["rewrite_arrays"]

_ARRAY_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*\+?=)\(")


def rewrite_arrays(text: str) -> str | None:
    """``text`` with every array assignment rewritten, or None when it holds none or one
    is not read with certainty."""
    if "=(" not in text:
        return None
    out: list[str] = []
    changed = False
    i, n = 0, len(text)
    try:
        while i < n:
            at_word = i == 0 or text[i - 1] in " \t\n;&|("
            end = literal_end(text, i)
            if end is not None:
                out.append(text[i:end])
                i = end
            elif at_word and (m := _ARRAY_RE.match(text, i)) is not None:
                words, close = scan_span(text, m.end(), ")")
                out.append(f"{m.group(1)}$(: {words})")
                i = close + 1
                changed = True
            else:
                out.append(text[i])
                i += 1
    except Unsure:
        return None
    return "".join(out) if changed else None
