"""Here-documents for the shell walker: whether an unquoted body changes at run time, and
the command substitutions it runs, each delimited as bash delimits it.

Bash expands an unquoted here-document's body as it does a double-quoted word in which
``"`` is an ordinary character: parameters, ``$(...)``, backquotes and ``$((...))``; a
backslash quotes only ``\\``, ``$``, a backquote and a newline, and a backslash-newline is
removed before anything else is read (``$\\<newline>(cmd)`` runs cmd). The body itself is
text, not shell: ``built on $(date)`` runs ``date``, and ``built`` is no command.

What an attacker controls is the whole body. Where a substitution's end cannot be found
for certain (a ``#`` that may start a comment, a nested here-document, quotes inside an
arithmetic expansion, too many candidate ends), :func:`substitutions` returns None and
the walker reads the whole body as shell and asks, as it did before this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["backquoted_code", "expands", "substitutions", "unescaped"]

# How many candidate ends (each a parse of the text before it) one body may try: a body
# of many ')' must not make the policy decision quadratic.
_MAX_TRIES = 64
# A '#' at the start of a word starts a comment, inside which bash reads past ')'.
_COMMENT_RE = re.compile(r"(?:^|[\s;&|()<>])#")


def _unescape(body: str, chars: str) -> str:
    """``body`` with every backslash-newline removed (bash does it first) and the
    backslash before each of ``chars`` dropped; any other escape kept as it is."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in chars:
                out.append(nxt)
            elif nxt != "\n":
                out.append(c + nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _joined(body: str) -> str:
    """``body`` with every backslash-newline removed; other escapes kept."""
    return _unescape(body, "")


def expands(body: str) -> bool:
    """Whether an unquoted here-document body holds an unescaped ``$`` or backquote: its
    text is then only known at run time."""
    text = _joined(body)
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in "$`":
            return True
        i += 1
    return False


def unescaped(body: str) -> str:
    """The text an unquoted body that does not expand (:func:`expands` is False) becomes:
    backslash-newlines removed, ``\\$``, ``\\``` and ``\\\\`` unescaped, any other
    backslash kept. ``cat > a.sh <<EOF`` with ``\\$(rm x)`` in it writes ``$(rm x)``."""
    return _unescape(body, "$`\\")


def _arithmetic(text: str, start: int) -> bool | None:
    """For ``$((`` ending just before ``start``: True when bash reads it as arithmetic,
    False when as a command substitution of a subshell (``$((echo a); rm x)``), None when
    not sure. Bash's rule: find the ``)`` that closes the second ``(``; arithmetic when
    another ``)`` follows at once."""
    depth = 1
    i = start
    while i < len(text):
        c = text[i]
        if c in "'\"`#" or text.startswith("<<", i):
            return None
        if c == "\\":
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[i + 1 : i + 2] == ")"
        i += 1
    return None


def substitutions(body: str, complete: Callable[[str], bool]) -> list[str] | None:
    """The code an unquoted here-document body runs: the text inside each ``$(...)`` and
    each backquoted command (:func:`backquoted_code`), outermost first and in order (a
    nested one is inside its parent's text). ``complete(text)``: whether ``text`` parses
    as a whole shell command list. Each ``$(`` ends at the first ``)`` before which its
    text is complete, as bash's parser ends it; None when that cannot be known for certain
    (see the module's docstring)."""
    text = _joined(body)
    out: list[str] = []
    tries = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "`":
            j = i + 1
            while j < n and text[j] != "`":
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                return None
            out.extend(backquoted_code(text[i + 1 : j]))
            i = j + 1
            continue
        if text.startswith("$((", i):
            kind = _arithmetic(text, i + 3)
            if kind is None:
                return None
            if kind:
                i += 3  # its inside is scanned on: substitutions in it run
                continue
        if text.startswith("$(", i):
            start = i + 2
            k = start
            while True:
                k = text.find(")", k)
                if k < 0:
                    return None
                inner = text[start:k]
                if _COMMENT_RE.search(inner) or "<<" in inner:
                    return None
                if not inner.strip():
                    break
                tries += 1
                if tries > _MAX_TRIES:
                    return None
                if complete(inner):
                    break
                k += 1
            out.append(inner)
            i = k + 1
            continue
        i += 1
    return out


def backquoted_code(inner: str) -> list[str]:
    """The command a backquoted ```inner``` runs, read both ways shells read it: a
    backslash before ``$``, a backquote or a backslash is removed; bash keeps one before
    ``"`` in a here-document where dash removes it. Both readings are judged (they differ
    in what is quoted), so neither shell runs what the walker did not see."""
    plain = re.sub(r"\\([$`\\])", r"\1", inner)
    dash = re.sub(r"\\([$`\\\"])", r"\1", inner)
    return [plain] if dash == plain else [plain, dash]
