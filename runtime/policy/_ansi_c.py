"""Bash's ANSI-C quoting (``$'...'``) read as the literal text it is.

``$'\\x2egit'`` is ``.git`` before anything runs: bash decodes the escapes when it reads
the word, with no parameter, substitution or glob involved. bashlex reads ``$'`` as a
parameter followed by quoted text, so the walker used to treat such a word as known only at
run time, and a write to ``$'.git'/hooks/pre-commit`` or ``sed $'1e rm -rf /'`` escaped the
rules that judge literal words. :func:`ansi_c_word` gives the word's value when every part
of it is literal (plain text, '...', "..." without expansions, backslash escapes and
``$'...'`` spans), else None (the word stays a run-time word, as before).

dash has no ``$'...'``: it reads ``$`` and then a single-quoted string, so the same word is
another text there (``$.git``), a name no rule protects as long as its first segment stays:
only a '..' can climb out of it (dash reads ``$'/../.git'`` as ``.git`` where bash reads
``/.git``), so a word holding '..' stays a run-time word, as before. The walker judges
bash's reading. ``tests/policy/test_ansi_c.py`` compares the decoding with bash itself.
"""

from __future__ import annotations

__all__ = ["ansi_c_word", "decode_ansi_c"]

_SIMPLE = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_OCTAL = "01234567"
_HEX = "0123456789abcdefABCDEF"


def _digits(text: str, start: int, allowed: str, most: int) -> str:
    end = start
    while end < len(text) and end - start < most and text[end] in allowed:
        end += 1
    return text[start:end]


def decode_ansi_c(body: str) -> str | None:
    """The text of ``$'body'`` (``body`` without the quotes; ``\\'`` inside it kept as an
    escape). A NUL ends the string, as bash's C string does. None when an escape stands
    for a byte or character beyond ASCII: bash writes those by byte or by locale, which a
    text value cannot follow."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        i += 2
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
            continue
        if e in _OCTAL:
            digits = e + _digits(body, i, _OCTAL, 2)
            i += len(digits) - 1
            code = int(digits, 8) & 0xFF
        elif e in "xuU":
            digits = _digits(body, i, _HEX, {"x": 2, "u": 4, "U": 8}[e])
            if not digits:
                out.append("\\" + e)
                continue
            i += len(digits)
            code = int(digits, 16)
        elif e == "c" and i < len(body):
            # bash's TOCTRL: '?' is DEL, any other character its upper case's low 5 bits;
            # '\\c\\\\' takes both backslashes.
            ch = body[i]
            i += 2 if body.startswith("\\\\", i) else 1
            if not ch.isascii():
                return None
            code = 0x7F if ch == "?" else ord(ch.upper()) & 0x1F
        else:
            out.append("\\" + e)
            continue
        if code >= 0x80:
            return None
        out.append(chr(code))
    text = "".join(out)
    nul = text.find("\x00")
    return text if nul < 0 else text[:nul]


def ansi_c_word(raw: str) -> str | None:
    """The value of the unquoted word ``raw`` when it holds ``$'...'`` and is otherwise
    literal; None when any part of it is only known at run time (``$x``, a substitution, a
    glob or brace character outside quotes, an expansion inside double quotes) or the
    quoting does not close."""
    if "$'" not in raw:
        return None
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "$" and raw.startswith("$'", i):
            j = i + 2
            while j < n and raw[j] != "'":
                j += 2 if raw[j] == "\\" else 1
            if j >= n:
                return None
            decoded = decode_ansi_c(raw[i + 2 : j])
            if decoded is None:
                return None
            out.append(decoded)
            i = j + 1
        elif c == "'":
            j = raw.find("'", i + 1)
            if j < 0:
                return None
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and raw[j] != '"':
                if raw[j] in "$`":
                    return None
                if raw[j] == "\\" and j + 1 < n and raw[j + 1] in '$`"\\\n':
                    if raw[j + 1] != "\n":
                        out.append(raw[j + 1])
                    j += 2
                    continue
                out.append(raw[j])
                j += 1
            if j >= n:
                return None
            i = j + 1
        elif c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
        elif c in "$`*?[{~":
            return None
        else:
            out.append(c)
            i += 1
    value = "".join(out)
    return None if ".." in value or ".." in raw else value
