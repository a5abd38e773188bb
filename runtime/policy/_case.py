"""``case`` statements, which bashlex cannot parse, rewritten into a form it can: every
branch's commands and every word's substitutions kept, in order.

``case WORD in P1|P2) LIST1;; P3) LIST2;; esac`` becomes ``{ : WORD P1 P2 P3\\nLIST1\\nLIST2\\n}``:
the word and the patterns are expanded by bash (a substitution in either runs), so they are
arguments of ``:``; which branch runs is only known at run time, so every one is walked.
Only the keywords (``case``, ``in``, ``esac``), the branch terminators (``;;``, ``;&``,
``;;&``) and the pattern punctuation (``(``, ``|``, ``)``) are dropped.

What an attacker controls is the whole text. The scan tracks quotes, backslashes,
``$(...)``/``(...)``/``${...}``/backquotes and comments, and a nested ``case`` is rewritten
by the same scan. Where it cannot be sure (a here-document inside, an unterminated quote or
construct, a ``case`` without ``in``), :func:`rewrite_cases` returns None and the walker's
verdict stays ``unparseable`` (ask), as before. ``tests/policy/test_case.py`` runs bash on
generated statements and checks that every command bash runs is a command the walker sees.
"""

from __future__ import annotations

import re

__all__ = ["Unsure", "literal_end", "rewrite_cases", "scan_span"]

_KEYWORD_BEFORE = frozenset({"then", "do", "else", "elif", "!", "{", "(", "time"})
_WORD_END = frozenset(" \t\n;&|()<>")
_MAX_CASES = 64


class Unsure(Exception):
    """The text is not read with certainty: the caller keeps its verdict."""


def literal_end(text: str, i: int) -> int | None:
    """The index after the quoted or escaped span, or the comment, that starts at ``i``
    (copied as it is); None when none starts there (raises :class:`Unsure` for an
    unterminated quote)."""
    c = text[i]
    if c in "\\'\"`":
        return _quoted(text, i)
    if c == "#" and (i == 0 or text[i - 1] in " \t\n;&|()"):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    return None


def scan_span(text: str, i: int, stop: str) -> tuple[str, int]:
    """The text from ``i`` up to the unmatched ``stop`` (its cases rewritten), and the
    index of ``stop`` (raises :class:`Unsure`)."""
    out, end, _ = _scan(text, i, stop=stop)
    return out, end


def rewrite_cases(text: str) -> str | None:
    """``text`` with every ``case`` statement rewritten (see the module's docstring), or
    None when it holds none or one is not read with certainty."""
    if "case" not in text or "esac" not in text or "<<" in text:
        return None
    try:
        out, end, count = _scan(text, 0, stop=None)
    except Unsure:
        return None
    if end != len(text) or count == 0:
        return None
    return out


def _command_position(text: str, i: int) -> bool:
    """Whether a word starting at ``i`` is where a command starts: after an operator, an
    opening bracket, a case pattern's ')', a newline, the start, or a reserved word that a
    command follows."""
    j = i - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    if j < 0 or text[j] in "\n;&|(){`":
        return True
    k = j
    while k >= 0 and text[k] not in _WORD_END:
        k -= 1
    return text[k + 1 : j + 1] in _KEYWORD_BEFORE and (k < 0 or text[k] in " \t\n;&|(")


def _word_at(text: str, i: int, word: str) -> bool:
    end = i + len(word)
    return text.startswith(word, i) and (end == len(text) or text[end] in _WORD_END)


def _quoted(text: str, i: int) -> int:
    """The index after the quoted or escaped span starting at ``i`` (a quote or a
    backslash), tracking substitutions inside double quotes."""
    c = text[i]
    if c == "\\":
        return i + 2
    if c == "'":
        end = text.find("'", i + 1)
        if end < 0:
            raise Unsure
        return end + 1
    if c == "`":
        j = i + 1
        while j < len(text) and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        if j >= len(text):
            raise Unsure
        return j + 1
    # A double quote: escapes, and substitutions that nest their own quoting.
    j = i + 1
    while j < len(text) and text[j] != '"':
        if text[j] == "\\":
            j += 2
        elif text.startswith("$(", j) or text.startswith("${", j) or text[j] == "`":
            j = _nested(text, j)
        else:
            j += 1
    if j >= len(text):
        raise Unsure
    return j + 1


def _nested(text: str, i: int) -> int:
    """The index after the ``$(...)``, ``${...}`` or backquoted span at ``i``."""
    if text[i] == "`":
        return _quoted(text, i)
    close = ")" if text[i + 1] == "(" else "}"
    _, end, _ = _scan(text, i + 2, stop=close)
    return end + 1


def _scan(text: str, i: int, *, stop: str | None) -> tuple[str, int, int]:
    """Copy ``text`` from ``i``, rewriting the ``case`` statements met, up to the
    unmatched ``stop`` (``)`` or ``}``; None: the end). Returns (the copy, the index of
    ``stop`` or the end, how many statements were rewritten)."""
    out: list[str] = []
    count = 0
    depth = 0  # plain '(' and '{' opened inside this span
    n = len(text)
    while i < n:
        c = text[i]
        end = literal_end(text, i)
        if end is not None:
            out.append(text[i:end])
            i = end
        elif text.startswith("$(", i) or text.startswith("${", i):
            close = ")" if text[i + 1] == "(" else "}"
            inner, at, k = _scan(text, i + 2, stop=close)
            out.append(text[i : i + 2] + inner + close)
            count += k
            i = at + 1
        elif c in "({":
            depth += 1
            out.append(c)
            i += 1
        elif c in ")}":
            if depth == 0 and c == stop:
                return "".join(out), i, count
            if depth == 0 and (stop is None or c != stop):
                # A ')' that closes nothing here: a pattern's, outside a case.
                raise Unsure
            depth -= 1
            out.append(c)
            i += 1
        elif _word_at(text, i, "case") and _command_position(text, i):
            rewritten, i = _case(text, i + 4)
            out.append(rewritten)
            count += 1
            if count > _MAX_CASES:
                raise Unsure
        else:
            out.append(c)
            i += 1
    if stop is not None:
        raise Unsure
    return "".join(out), i, count


def _skip_blank(text: str, i: int, *, newlines: bool) -> int:
    while i < len(text):
        c = text[i]
        if c in " \t" or (newlines and c == "\n"):
            i += 1
        elif newlines and c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        else:
            break
    return i


def _word(text: str, i: int, extra_end: str = "") -> int:
    """The index after the shell word at ``i`` (quotes and substitutions inside it)."""
    start = i
    while i < len(text) and text[i] not in _WORD_END and text[i] not in extra_end:
        if text[i] in "\\'\"`":
            i = _quoted(text, i)
        elif text.startswith("$(", i) or text.startswith("${", i):
            i = _nested(text, i)
        else:
            i += 1
    if i == start:
        raise Unsure
    return i


_TERMINATOR_RE = re.compile(r";;&|;;|;&")


def _case(text: str, i: int) -> tuple[str, int]:
    """Rewrite the statement whose 'case' keyword ends at ``i``: (its rewrite, the index
    after its 'esac')."""
    i = _skip_blank(text, i, newlines=False)
    end = _word(text, i)
    words = [_rewrite_word(text[i:end])]
    i = _skip_blank(text, end, newlines=True)
    if not _word_at(text, i, "in"):
        raise Unsure
    i = _skip_blank(text, i + 2, newlines=True)
    bodies: list[str] = []
    while True:
        if _word_at(text, i, "esac"):
            i += 4
            break
        if i < len(text) and text[i] == "(":
            i = _skip_blank(text, i + 1, newlines=False)
        # Patterns: words separated by '|', up to ')'.
        while True:
            end = _word(text, i, extra_end="|")
            words.append(_rewrite_word(text[i:end]))
            i = _skip_blank(text, end, newlines=False)
            if i < len(text) and text[i] == "|":
                i = _skip_blank(text, i + 1, newlines=False)
                continue
            if i < len(text) and text[i] == ")":
                i += 1
                break
            raise Unsure
        body, i = _body(text, i)
        bodies.append(body)
        i = _skip_blank(text, i, newlines=True)
    lines = [": " + " ".join(words), *(b for b in bodies if b.strip())]
    return "{ " + "\n".join(lines) + "\n}", i


def _rewrite_word(word: str) -> str:
    """A word of the statement (its subject or a pattern), with any 'case' inside its
    substitutions rewritten."""
    out, end, _ = _scan(word, 0, stop=None)
    if end != len(word):
        raise Unsure
    return out


def _body(text: str, i: int) -> tuple[str, int]:
    """A branch's command list from ``i``, rewritten: up to its terminator (skipped) or
    the statement's 'esac' (left for the caller)."""
    out: list[str] = []
    n = len(text)
    while i < n:
        m = _TERMINATOR_RE.match(text, i)
        if m is not None:
            return "".join(out), m.end()
        if _word_at(text, i, "esac") and _command_position(text, i):
            return "".join(out), i
        c = text[i]
        end = literal_end(text, i)
        if end is not None:
            out.append(text[i:end])
            i = end
        elif text.startswith("$(", i) or text.startswith("${", i) or c in "({":
            # A substitution, subshell or group: copied whole, its own cases rewritten.
            opened = 2 if c == "$" else 1
            close = ")" if text[i + opened - 1] == "(" else "}"
            inner, end, _ = _scan(text, i + opened, stop=close)
            out.append(text[i : i + opened] + inner + close)
            i = end + 1
        elif c in ")}":
            raise Unsure
        elif _word_at(text, i, "case") and _command_position(text, i):
            rewritten, i = _case(text, i + 4)
            out.append(rewritten)
        else:
            out.append(c)
            i += 1
    raise Unsure
