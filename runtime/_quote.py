"""How an error quotes text a caller sent (a value, a key, a path): whole when short, else
its first :data:`QUOTE_MAX` characters and its length said. Private.

Hazard: an error message that quotes an argument whole is as long as the argument. A
300,000-character key or path made a 300,000-character message, repeated in the error's
details and in the policy decision the audit log records. Cutting in the text (not in its
``repr`` or JSON) never splits an escape.
"""

from __future__ import annotations

__all__ = ["QUOTE_MAX", "cut", "quoted"]

#: Characters of a caller's text an error message quotes; the rest is elided, its length said.
QUOTE_MAX = 64


def cut(text: str) -> str:
    """``text`` as it is when short; else ``'<first QUOTE_MAX characters>… (N characters)'``."""
    if len(text) <= QUOTE_MAX:
        return text
    return f"{text[:QUOTE_MAX]}… ({len(text)} characters)"


def quoted(text: str) -> str:
    """``repr(text)`` when short; else the ``repr`` of its first characters, its length said."""
    if len(text) <= QUOTE_MAX:
        return repr(text)
    return f"{text[:QUOTE_MAX]!r}… ({len(text)} characters)"
