"""The shape of a run-time word: whether the shell hands it to the program as exactly one
argument, and the literal text it starts with. A rule that needs an option *and* a path
(``rm -r /``) cannot get both from one argument, and an argument that starts with
``GOPATH=`` or ``/`` is never an option (:meth:`runtime.policy.argv.Word.may_be_option`).

Only bash's own rules are used: an expansion inside double quotes is neither split into
fields nor globbed; ``"$@"`` and ``"${a[@]}"`` are several words even so; an unquoted
expansion, glob or brace may become any number of words, each of which may be an option.
"""

from __future__ import annotations

__all__ = ["word_shape"]

_GLOB_OR_BRACE = frozenset("*?[{")


def word_shape(raw: str) -> tuple[bool, str]:
    """(``single``, ``prefix``) of the word's source text ``raw``: ``single`` when every
    expansion in it is inside double quotes and none can give several words (``@``);
    ``prefix``, its text before the first expansion, quotes removed (what every value of the
    first word it becomes starts with). A text this scan does not understand (an unterminated
    quote) is not single and has no prefix: the conservative shape, as before."""
    single = True
    prefix: list[str] = []
    open_prefix = True  # still reading the literal text before the first expansion
    quote = ""
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote = ""
            elif open_prefix:
                prefix.append(c)
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if open_prefix:
                prefix.append(raw[i + 1])
            i += 2
            continue
        if c == '"':
            quote = "" if quote else '"'
        elif c == "'" and not quote:
            quote = "'"
        elif c in "$`":
            open_prefix = False
            if not quote:
                single = False
            else:
                end = _expansion_end(raw, i)
                if end < 0:
                    return False, ""
                i = end
                continue
        elif c in _GLOB_OR_BRACE and not quote:
            open_prefix = False
            single = False
        elif open_prefix:
            prefix.append(c)
        i += 1
    if quote:
        return False, ""
    return single, "".join(prefix)


def _expansion_end(raw: str, i: int) -> int:
    """Where the expansion at ``raw[i]`` (inside double quotes) ends, or -1 when it may give
    several words (``"$@"``, ``"${a[@]}"``) or holds quotes, escapes or another expansion
    (``"$(echo "$x")"``): quoting nests there, and this scan does not follow it."""
    c = raw[i]
    if c == "`":
        end = raw.find("`", i + 1)
        return -1 if end < 0 or _nested(raw[i + 1 : end]) else end + 1
    rest = raw[i + 1 : i + 2]
    if rest == "@":
        return -1
    if rest in ("(", "{"):
        close = ")" if rest == "(" else "}"
        depth, k = 0, i + 1
        while k < len(raw):
            if raw[k] == rest:
                depth += 1
            elif raw[k] == close:
                depth -= 1
                if depth == 0:
                    body = raw[i + 2 : k]
                    many = rest == "{" and "@" in body
                    return -1 if many or _nested(body) else k + 1
            k += 1
        return -1
    return i + 1


def _nested(body: str) -> bool:
    return any(ch in body for ch in "\"'\\`$")
