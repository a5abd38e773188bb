"""JSON text for people and line readers: what the CLI prints and the audit export writes.
Private.

``json.dumps(..., ensure_ascii=False)`` keeps text readable but escapes only the C0
controls. Everything in a result, an error message or an audit record may come from the
caller or a tool (an LLM's, possibly an injected one), and a terminal acts on more than C0:
U+009B is CSI in the 8-bit C1 set (``\\x9b2J`` clears the screen like ``ESC[2J``), bidi
overrides (U+202E) and isolates reorder what is shown (``txt.exe`` for ``exe.txt``), zero
widths and other format characters hide text, and U+0085/U+2028/U+2029 are line breaks to
``str.splitlines()`` (one export record read as several). :func:`json_text` writes those as
``\\uXXXX`` escapes; outside strings ``json.dumps`` writes only ASCII, so every escape lands
inside a string, and the text decodes to the same data.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

__all__ = ["UNSAFE", "json_line", "json_text", "terminal_char", "visible"]

#: Characters written escaped: DEL and the C1 controls (U+0085 included), every format
#: character (Unicode category Cf: soft hyphen, Arabic and Syriac marks, zero widths,
#: LRM/RLM, bidi embeddings, overrides and isolates, word joiners, BOM, interlinear
#: annotation, tags), the line and paragraph separators, and surrogates (not text: a lone
#: one cannot even be written as UTF-8). tests/cli/test_cli_escapes.py checks the Cf part
#: against this interpreter's Unicode database.
UNSAFE = re.compile(
    "[\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
)
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON has no escape past U+FFFF: a UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_text(
    obj: Any, *, indent: int | None = None, default: Callable[[Any], Any] | None = None
) -> str:
    """``obj`` as JSON text, UTF-8 kept as it is but :data:`UNSAFE` characters escaped (the
    module docstring says why). ``json.loads`` gives back the same data."""
    text = json.dumps(obj, ensure_ascii=False, indent=indent, default=default)
    return UNSAFE.sub(_json_escape, text)


def json_line(obj: Any) -> str:
    """``obj`` as one JSON line (with its newline), as :func:`json_text` writes it: one
    record is one line to every reader (a raw U+2028 was a line break to some)."""
    return json_text(obj) + "\n"


#: Unicode categories a terminal shows escaped: controls (C0, DEL, C1), format (bidi
#: controls, zero widths, BOM, tags), line and paragraph separators, surrogates, private
#: use, unassigned; and every space but U+0020 (an odd-width space hides what follows).
_TERMINAL_ESCAPED = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
#: Characters of other categories a terminal shows as nothing, escaped too: every
#: Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties, which ``unicodedata`` does
#: not expose; the Cf ones are already escaped by category): the combining grapheme joiner,
#: the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0: letters that draw nothing), the
#: Khmer inherent vowels, the Mongolian variation selectors, the variation selectors
#: (U+FE00-FE0F, U+E0100-E01EF) and the reserved ignorables; and the blank-rendering symbol
#: U+2800 (BRAILLE PATTERN BLANK). A name or command could hide text behind any of them.
_BLANK = re.compile(
    "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2065\u2800\u3164\ufe00-\ufe0f"
    "\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]"
)


def terminal_char(ch: str) -> str:
    """``ch`` as a terminal should show it: itself, or a ``\\uXXXX`` / ``\\UXXXXXXXX`` escape
    for a character that hides, moves or reorders text (:data:`_TERMINAL_ESCAPED`,
    :data:`_BLANK`). The one rule for text written to a terminal (``visible`` here, the
    approval prompts of ``runtime.mcp._prompt``)."""
    category = unicodedata.category(ch)
    if (
        category not in _TERMINAL_ESCAPED
        and (category != "Zs" or ch == " ")
        and (ch < "\u034f" or not _BLANK.match(ch))
    ):
        return ch
    code = ord(ch)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` for one terminal line (not JSON): ``\\n``, ``\\r``, ``\\t`` by their short
    names and every other character :func:`terminal_char` escapes as an escape, the rest as
    it is. For a message that may hold a tool's or a caller's words (an ``ESC]8``
    hyperlink, a screen clear, a bidi override)."""
    return "".join(_SHORT.get(ch) or terminal_char(ch) for ch in text)
