"""Brace expansion of literal words, as bash does it before any other expansion.

``cp config.json{,.bak}``, ``mkdir -p src/{a,b}``, ``touch f{1..3}.txt``: bash turns each
such word into several fixed words before the program runs, so the walker can judge the
words the program gets (``rm -f build/{a,b}.o`` removes two files, ``rm -rf {a,/}`` removes
``/``) instead of one word only known at run time that may be anything.

Only a plain shape is expanded: a word with no quotes, backslashes, ``$``, backquotes or
glob characters (``rm -rf {a..z}*`` is a sweep in 26 words, each one harmless alone),
whose every ``{`` and ``}`` belongs to a comma list (``{a,b}``, nested, empty items) or a
sequence (``{1..3}``, ``{01..10..3}``, ``{a..e}``). Anything else (``{}``, a stray
brace, ``{a}``, a sequence bash would refuse, more than :data:`MAX_WORDS` words) gives
``None``: the walker keeps its conservative reading. ``tests/policy/test_braces.py``
compares this with bash itself.

dash (Debian's /bin/sh) has no brace expansion: it passes ``f{,.bak}`` as it is. Judging
the words bash would make is then stricter than needed, never looser: the braced word
itself is an ordinary name that no rule is written for.
"""

from __future__ import annotations

import re

__all__ = ["MAX_WORDS", "expand_braces"]

#: More words than this: not expanded (the word stays a run-time word).
MAX_WORDS = 64

_UNSAFE = frozenset("'\"\\$`")
# Glob characters: 'rm -rf {a..z}*' is 26 globs that together sweep nearly every name,
# which no one of them does (runtime.policy._sweeps judges one word at a time).
_GLOB = frozenset("*?[")
_INT_SEQ = re.compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?")
_CHAR_SEQ = re.compile(r"([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?")


class _Refuse(Exception):
    """The shape is not one this module expands."""


def expand_braces(raw: str) -> list[str] | None:
    """The words bash's brace expansion makes of the word ``raw`` (none, if every one is
    empty: '{,}'), or None."""
    if _UNSAFE.intersection(raw) or _GLOB.intersection(raw) or "{" not in raw:
        return None
    try:
        words, end = _sequence(raw, 0, top=True)
    except _Refuse:
        return None
    if end != len(raw) or len(words) > MAX_WORDS:
        return None
    return [w for w in words if w]  # bash drops the empty words ('{a,}' is 'a')


def _sequence(raw: str, i: int, *, top: bool) -> tuple[list[str], int]:
    """Pieces from ``i`` up to a ',' or '}' that ends an item (or the end, at the top):
    every word they make, and where they stopped."""
    words = [""]
    while i < len(raw):
        c = raw[i]
        if c == "{":
            group, i = _group(raw, i)
            words = [w + g for w in words for g in group]
            if len(words) > MAX_WORDS:
                raise _Refuse
            continue
        if c == "}":
            if top:
                raise _Refuse  # a stray '}'
            break
        if c == "," and not top:
            break
        words = [w + c for w in words]
        i += 1
    return words, i


def _group(raw: str, i: int) -> tuple[list[str], int]:
    """The ``{...}`` at ``i``: its words and the index after its '}'."""
    close = raw.find("}", i + 1)
    inner = raw[i + 1 : close] if close != -1 else ""
    if close != -1 and "{" not in inner and "," not in inner:
        return _range(inner), close + 1
    items: list[str] = []
    j = i + 1
    commas = 0
    while True:
        words, j = _sequence(raw, j, top=False)
        items.extend(words)
        if j >= len(raw):
            raise _Refuse  # no closing '}'
        if raw[j] == "}":
            break
        commas += 1
        j += 1  # past the ','
    if commas == 0:
        raise _Refuse  # '{a}' or '{{a,b}}': bash keeps some braces literal; not followed
    return items, j + 1


def _range(inner: str) -> list[str]:
    """``{X..Y[..STEP]}``: bash's sequence expression (anything else is refused)."""
    m = _INT_SEQ.fullmatch(inner)
    if m is not None:
        lo, hi = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or "1")) or 1
        if abs(hi - lo) // step + 1 > MAX_WORDS:
            raise _Refuse
        values = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        width = 0
        if _padded(m.group(1)) or _padded(m.group(2)):
            width = max(len(m.group(1)), len(m.group(2)))
        return [_pad(v, width) for v in values]
    m = _CHAR_SEQ.fullmatch(inner)
    if m is not None and m.group(1).islower() == m.group(2).islower():
        lo, hi = ord(m.group(1)), ord(m.group(2))
        step = abs(int(m.group(3) or "1")) or 1
        values = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [chr(v) for v in values]
    raise _Refuse


def _padded(number: str) -> bool:
    digits = number.lstrip("-")
    return len(digits) > 1 and digits.startswith("0")


def _pad(value: int, width: int) -> str:
    if value < 0:
        return "-" + str(-value).rjust(width - 1, "0") if width else str(value)
    return str(value).rjust(width, "0")
