"""Path-aware globs, compiled once when a policy loads.

Semantics (documented in the policy schema): patterns are matched against a whole
slash-separated path. ``*`` and ``?`` never cross ``/``; ``**`` as a whole segment matches zero or
more segments, so ``.git/**`` covers ``.git`` itself and everything below it, and ``**/x``
covers ``x`` at any depth; ``[abc]`` / ``[!abc]`` are character classes (``[*]`` is a literal
star). Hidden names are not special: ``*`` matches ``.env``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = ["GlobSet", "compile_glob", "compile_segments", "star_closure", "step_segments"]


def _translate_segment(seg: str) -> str:
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            while i < n and seg[i] == "*":
                i += 1
            out.append("[^/]*")
            continue
        if c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            if j < n and seg[j] in "!^":
                j += 1
            if j < n and seg[j] == "]":
                j += 1
            while j < n and seg[j] != "]":
                j += 1
            if j >= n:
                out.append(re.escape(c))
            else:
                body = seg[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                # '/' never belongs to a class: a class matches one character of one name.
                out.append("(?!/)[" + body.replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=1024)
def _translate(pattern: str) -> str:
    # Cached: the file toolkit compiles the policy's deny globs in every sandboxed call, and
    # a fork inherits what the fork-server translated (the masks are the same globs). The
    # translation is pure; re.compile keeps its own cache of the patterns.
    segs = pattern.split("/")
    parts: list[str] = []
    last = len(segs) - 1
    for idx, seg in enumerate(segs):
        if seg == "**":
            if idx == last:
                # 'a/**' also matches 'a': the trailing separator is optional.
                if parts:
                    parts[-1] = parts[-1].removesuffix("/")
                    parts.append("(?:/.*)?")
                else:
                    parts.append(".*")
            else:
                parts.append("(?:[^/]*/)*")
            continue
        parts.append(_translate_segment(seg) + ("" if idx == last else "/"))
    return "".join(parts)


def compile_glob(pattern: str, *, casefold: bool = False) -> re.Pattern[str]:
    """Compile ``pattern`` into a regex to ``fullmatch`` a slash-separated path."""
    flags = re.IGNORECASE if casefold else 0
    return re.compile(_translate(pattern), flags | re.DOTALL)


def compile_segments(pattern: str, *, casefold: bool = False) -> tuple[re.Pattern[str] | None, ...]:
    """``pattern`` one segment at a time: a regex to ``fullmatch`` one name, or None for
    ``**`` (zero or more names). For questions a whole-path regex cannot answer, such as
    whether anything *below* a path could match (``masks``)."""
    flags = (re.IGNORECASE if casefold else 0) | re.DOTALL
    return tuple(
        None if seg == "**" else re.compile(_translate_segment(seg), flags)
        for seg in pattern.split("/")
    )


def star_closure(segs: tuple[re.Pattern[str] | None, ...], states: set[int]) -> frozenset[int]:
    """``states`` (indices into ``compile_segments``' output) and every state a ``**``
    (None) lets a segment-wise match skip to, matching zero names."""
    out = set(states)
    stack = list(states)
    while stack:
        s = stack.pop()
        if s < len(segs) and segs[s] is None and s + 1 not in out:
            out.add(s + 1)
            stack.append(s + 1)
    return frozenset(out)


def step_segments(
    segs: tuple[re.Pattern[str] | None, ...], states: frozenset[int], name: str | None
) -> frozenset[int]:
    """One name further in a segment-wise match: the states ``states`` (closed under
    :func:`star_closure`) reach by ``name``. ``name`` None stands for a run of names that
    only a ``**`` segment may take (``sandbox._pins``' gaps)."""
    n = len(segs)
    nxt: set[int] = set()
    for s in states:
        if s < n:
            seg = segs[s]
            if seg is None:
                nxt.add(s)
            elif name is not None and seg.fullmatch(name):
                nxt.add(s + 1)
    return star_closure(segs, nxt)


class GlobSet:
    """Several globs folded into one alternation; ``match`` names the first glob that hit."""

    __slots__ = ("_compiled", "_one", "patterns")

    def __init__(self, patterns: Iterable[str], *, casefold: bool = False) -> None:
        self.patterns: tuple[str, ...] = tuple(patterns)
        self._compiled = [compile_glob(p, casefold=casefold) for p in self.patterns]
        flags = (re.IGNORECASE if casefold else 0) | re.DOTALL
        self._one = (
            re.compile("|".join(f"(?:{_translate(p)})" for p in self.patterns), flags)
            if self.patterns
            else None
        )

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, path: str) -> str | None:
        """The first pattern matching ``path`` (whole path), or None."""
        if self._one is None or self._one.fullmatch(path) is None:
            return None
        for pattern, rx in zip(self.patterns, self._compiled, strict=True):
            if rx.fullmatch(path):
                return pattern
        return None  # pragma: no cover - the alternation and the parts agree
