"""Where a command's text is literal for bash: single-quoted strings, quoted here-documents.

:mod:`runtime.policy._arith` reads arithmetic from a command's text as written, quotes
ignored, so that a form bashlex does not parse is never missed. Text bash never evaluates
(an awk or jq program in single quotes, ``'{ if ((n = split($0, a)) > 1) ... }'``) is then
read too: its names are kept (an over-approximation for the rules that deny a name), but
its ``$`` is no expansion, so the run-time rule (``((x=$i))`` assigns what ``$i`` holds)
must not apply there. Shell code given to ``bash -c``, ``sh -c`` or ``eval`` in single
quotes is parsed again as a command line by the walker, where the rule applies.

The reader follows bash's quoting: backslashes, ``'...'``, ``$'...'``, ``"..."`` with
``$(...)``, ``${...}`` and backquotes nested in it, comments, arithmetic, and here-
documents (a quoted delimiter makes the body literal; an unquoted body is read as a
double-quoted word in which ``"`` is ordinary). What an attacker controls is the whole
text, and a string wrongly taken for literal would hide a real expansion: where the reader
cannot follow bash for certain (quotes inside arithmetic or backquotes, ``case`` or a
here-document inside ``$(...)``, an unclosed quote, ``'`` inside ``"${...}"``, a ``#``
right after a ``)``) it finds no
literal text at all, and every form is judged as unquoted.
"""

from __future__ import annotations

import bisect

__all__ = ["LiteralSpans", "literal_spans"]

# The characters after which a '#' starts a word, hence a comment.
_WORD_BREAKS = frozenset(" \t\n;&|()<>")
# What ends a here-document's delimiter word.
_DELIM_ENDS = frozenset(" \t\n;&|()<>")


class LiteralSpans:
    """The ``(start, end)`` index ranges of a text that bash reads as literal text."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self.spans = sorted(spans)  # disjoint: the reader finds them left to right
        self._starts = [a for a, _ in self.spans]

    def holds(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` lies inside one literal range: the last range that
        starts at or before ``start`` (ranges are disjoint), found by bisection (a scan of
        every range per question was quadratic in a text of many quotes)."""
        at = bisect.bisect_right(self._starts, start) - 1
        return at >= 0 and end <= self.spans[at][1]


class _Unsure(Exception):
    """A construct the reader does not follow as bash does for certain."""


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: list[tuple[int, int]] = []
        # Here-documents whose bodies start after the current line: (delimiter, '<<-',
        # quoted).
        self.pending: list[tuple[str, bool, bool]] = []

    def shell(self, i: int, nested: bool) -> int:
        """Shell text from ``i``: to the end, or (``nested``, inside '$(') to just past the
        ')' that closes it."""
        t = self.text
        depth = 0
        while i < len(t):
            c = t[i]
            if c == "\\":
                i += 2
            elif c == "'":
                end = t.find("'", i + 1)
                if end < 0:
                    raise _Unsure
                self.spans.append((i + 1, end))
                i = end + 1
            elif c == "#" and i > 0 and t[i - 1] == ")":
                # After a subshell's ')' bash starts a comment; after the ')' closing a
                # '$(', '$((' or '<(' the word goes on ('echo $(true)#x' prints '#x'). Which
                # one closed is not followed here: a comment wrongly read would hide the
                # quotes on the rest of the line.
                raise _Unsure
            elif c == "#" and (i == 0 or t[i - 1] in _WORD_BREAKS):
                end = t.find("\n", i)
                i = len(t) if end < 0 else end
            elif c == "\n":
                if self.pending and nested:
                    raise _Unsure
                i = self.bodies(i + 1) if self.pending else i + 1
            elif t.startswith("((", i):
                i = self.arith(i + 2, "(", ")", 2)
            elif c == "(":
                depth += 1
                i += 1
            elif c == ")":
                depth -= 1
                i += 1
                if nested and depth < 0:
                    return i
            elif t.startswith("<<<", i):
                i += 3  # a here-string: its word is read as any word is
            elif t.startswith("<<", i):
                if nested:
                    raise _Unsure
                i = self.heredoc(i + 2)
            elif nested and t.startswith("case", i) and self.word_at(i, 4):
                raise _Unsure  # its patterns' ')' do not close the '$('
            else:
                i = self.expansion(i, in_double=False)
        if nested:
            raise _Unsure
        return i

    def word_at(self, i: int, n: int) -> bool:
        t = self.text
        before = i == 0 or t[i - 1] in _WORD_BREAKS
        after = i + n >= len(t) or t[i + n] in _WORD_BREAKS
        return before and after

    def expansion(self, i: int, *, in_double: bool) -> int:
        """Past what starts at ``i``: a quote, '$(', '${', a backquote, or one character."""
        t = self.text
        if t.startswith("$'", i) and not in_double:
            return self.ansi_c(i + 2)
        if t[i] == '"' and not in_double:
            return self.double(i + 1, '"', len(t))
        if t.startswith("$((", i):
            return self.arith(i + 3, "(", ")", 2)
        if t.startswith("$[", i):
            return self.arith(i + 2, "[", "]", 1)
        if t.startswith("$(", i):
            return self.shell(i + 2, nested=True)
        if t.startswith("${", i):
            return self.brace(i + 2, in_double)
        if t[i] == "`":
            return self.backquote(i + 1)
        return i + 1

    def ansi_c(self, i: int) -> int:
        t = self.text
        while i < len(t):
            if t[i] == "\\":
                i += 2
            elif t[i] == "'":
                return i + 1
            else:
                i += 1
        raise _Unsure

    def double(self, i: int, close: str, limit: int) -> int:
        """A double-quoted word from ``i`` to just past ``close``; with ``close`` '' an
        unquoted here-document's body up to ``limit``, where '"' is ordinary."""
        t = self.text
        while i < limit:
            c = t[i]
            if c == "\\":
                i += 2
            elif close and c == close:
                return i + 1
            else:
                i = self.expansion(i, in_double=True)
        if close:
            raise _Unsure
        return limit

    def arith(self, i: int, opener: str, closer: str, depth: int) -> int:
        """Arithmetic from ``i`` to just past the ``closer`` that closes ``depth`` openers.
        Quotes in it, or a line break ('((' may be two subshells), are not followed."""
        t = self.text
        while i < len(t):
            c = t[i]
            if c in "'\"\n\\":
                raise _Unsure
            if c == opener:
                depth += 1
                i += 1
            elif c == closer:
                depth -= 1
                i += 1
                if depth == 0:
                    return i
            else:
                i = self.expansion(i, in_double=True)
        raise _Unsure

    def brace(self, i: int, in_double: bool) -> int:
        """'${...}' from ``i`` to just past its '}'. Inside double quotes bash reads a
        single quote in it one way or the other by the operator: not followed."""
        t = self.text
        depth = 1
        while i < len(t):
            c = t[i]
            if c == "\\":
                i += 2
            elif c == "'" and in_double:
                raise _Unsure
            elif c == "'":
                end = t.find("'", i + 1)
                if end < 0:
                    raise _Unsure
                self.spans.append((i + 1, end))
                i = end + 1
            elif c == "{":
                depth += 1
                i += 1
            elif c == "}":
                depth -= 1
                i += 1
                if depth == 0:
                    return i
            else:
                i = self.expansion(i, in_double=in_double)
        raise _Unsure

    def backquote(self, i: int) -> int:
        """A backquoted command: its own quoting is not followed, so quotes in it are."""
        t = self.text
        while i < len(t):
            c = t[i]
            if c == "\\":
                i += 2
            elif c == "`":
                return i + 1
            elif c in "'\"":
                raise _Unsure
            else:
                i += 1
        raise _Unsure

    def heredoc(self, i: int) -> int:
        """The delimiter after '<<' or '<<-', remembered for the next line."""
        t = self.text
        strip = t.startswith("-", i)
        i += 1 if strip else 0
        while i < len(t) and t[i] in " \t":
            i += 1
        start = i
        while i < len(t) and t[i] not in _DELIM_ENDS:
            if t[i] in "'\"":
                end = t.find(t[i], i + 1)
                if end < 0:
                    raise _Unsure
                i = end + 1
            elif t[i] == "\\":
                i += 2
            elif t[i] in "$`":
                raise _Unsure  # bash takes the delimiter as written; not followed
            else:
                i += 1
        word = t[start:i]
        delim = word.replace("'", "").replace('"', "").replace("\\", "")
        if not delim:
            raise _Unsure
        self.pending.append((delim, strip, delim != word))
        return i

    def bodies(self, i: int) -> int:
        """The pending here-documents' bodies, from ``i`` (the line after the command):
        a quoted one is literal, an unquoted one is read as a double-quoted word."""
        t = self.text
        pending, self.pending = self.pending, []
        for delim, strip, quoted in pending:
            start = i
            while i < len(t):
                end = t.find("\n", i)
                end = len(t) if end < 0 else end
                line = t[i:end]
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                i = end + 1
            body_end = min(i, len(t))
            if quoted:
                self.spans.append((start, body_end))
            else:
                self.double(start, "", body_end)
            end = t.find("\n", body_end)
            i = len(t) if end < 0 else end + 1
        return i


def literal_spans(text: str) -> LiteralSpans:
    """The ranges of ``text`` that bash reads as literal (none when not sure)."""
    reader = _Reader(text)
    try:
        reader.shell(0, nested=False)
    except (_Unsure, RecursionError):  # nesting deeper than the stack: not followed
        return LiteralSpans([])
    return LiteralSpans(reader.spans)
