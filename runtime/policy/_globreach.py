"""What a shell glob operand could name, against the deny globs: one segment at a time.

``mv c*g cfg`` moves ``config`` when ``config`` exists, and with it ``config/prod.env``,
which an anchored deny glob protects. A glob operand is judged by every path it could match:
the walk of :func:`runtime.policy.paths._anchored_below` takes a segment of the operand that
is a glob through every state of a deny glob whose segment could match a name the operand's
segment matches too (:func:`segments_meet`, the two segments' languages intersected), and a
``**`` through any run of names. Decided from the strings alone (the broker never walks the
tree); an early, clear answer, not the wall (the sandbox's pins are: ``sandbox._pins``).

The operand is read as the shell reads it: case-sensitive, and a name that starts with '.'
matched only by a segment that starts with a literal '.' (bash without dotglob, dash). The
deny glob is read as the masks read it: case-insensitive, ``*`` matches ``.env``. What this
cannot decide exactly (an extglob group, a POSIX class, a segment too long to intersect
cheaply) is taken to meet: refusing an odd glob costs little.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable

__all__ = ["is_bounded", "is_glob", "segments_meet", "step_glob"]

_GLOB_CHARS = frozenset("*?[")
_EXTGLOB_RE = re.compile(r"[?*+@!]\(")
#: Longer operand segments are taken to meet every deny segment (bounded work per operand).
_MAX_SEGMENT = 128
#: Characters tried for a common one, with those the two segments mention: a character
#: neither mentions is accepted by the same tokens as any other such character, and a
#: non-ASCII one stands for the rest of Unicode.
_BASE_CHARS = frozenset(string.ascii_letters + string.digits + string.punctuation + " \u00e9")

_Accepts = Callable[[str], bool]
# A token: (is_star, accepts one character).
_Token = tuple[bool, _Accepts]


def is_glob(value: str) -> bool:
    """Whether the shell would expand ``value`` as a pathname pattern."""
    return bool(_GLOB_CHARS.intersection(value)) or _EXTGLOB_RE.search(value) is not None


def is_bounded(segment: str) -> bool:
    """Whether the glob ``segment`` matches names of one length only: no '*' and no extglob
    group ('??????', '.?nv', '[.]env')."""
    return "*" not in segment and _EXTGLOB_RE.search(segment) is None


def _any(_c: str) -> bool:
    return True


def _same(lit: str, *, casefold: bool) -> _Accepts:
    if casefold:
        folded = lit.casefold()
        return lambda c: c.casefold() == folded
    return lambda c: c == lit


def _bracket(seg: str, i: int, *, shell: bool) -> tuple[_Accepts, int] | None:
    """The class that opens at ``seg[i]`` and the index after it, or None (a literal '[')."""
    j = i + 1
    if j < len(seg) and seg[j] in "!^":
        j += 1
    if j < len(seg) and seg[j] == "]":
        j += 1
    while j < len(seg) and seg[j] != "]":
        if shell and seg.startswith("[:", j) and (close := seg.find(":]", j + 2)) != -1:
            j = close + 2  # '[[:alpha:]]': a POSIX class is one member
            continue
        j += 1
    if j >= len(seg):
        return None
    body = seg[i + 1 : j]
    if shell and "[:" in body:
        return _any, j + 1  # a POSIX class: taken to accept anything
    if body[:1] in ("!", "^"):
        body = "^" + body[1:]
    try:
        rx = re.compile("[" + body.replace("\\", "\\\\") + "]", 0 if shell else re.IGNORECASE)
    except re.error:
        return _any, j + 1
    return (lambda c: rx.fullmatch(c) is not None), j + 1


@functools.lru_cache(maxsize=2048)
def _tokens(seg: str, shell: bool) -> tuple[tuple[_Token, ...], frozenset[str]]:
    """``seg`` as tokens, and the characters it mentions. ``shell``: the operand's reading
    (case-sensitive); else the deny glob's (case-insensitive, as ``runtime._globs``)."""
    out: list[_Token] = []
    mentioned: set[str] = set()
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c == "*":
            if not out or not out[-1][0]:
                out.append((True, _any))
            i += 1
            continue
        if c == "?":
            out.append((False, _any))
            i += 1
            continue
        if c == "[":
            cls = _bracket(seg, i, shell=shell)
            if cls is not None:
                mentioned.update(seg[i + 1 : cls[1] - 1])
                out.append((False, cls[0]))
                i = cls[1]
                continue
        if shell and c == "\\" and i + 1 < n:
            i += 1
            c = seg[i]
        mentioned.update((c, c.lower(), c.upper()))
        out.append((False, _same(c, casefold=not shell)))
        i += 1
    return tuple(out), frozenset(mentioned)


@functools.lru_cache(maxsize=4096)
def segments_meet(operand: str, protected: str, *, dotglob: bool = False) -> bool:
    """Whether some name matches both the shell glob ``operand`` and the deny glob segment
    ``protected`` (each one path segment): the two patterns' product, walked one character
    at a time over the characters that can tell their tokens apart. ``dotglob``: read the
    operand as bash with ``shopt -s dotglob`` (or ``GLOBIGNORE`` set) does, where '?', '*'
    and '[.]' match a leading '.' too."""
    if len(operand) > _MAX_SEGMENT or _EXTGLOB_RE.search(operand):
        return True
    g, g_chars = _tokens(operand, True)
    p, p_chars = _tokens(protected, False)
    chars = _BASE_CHARS | g_chars | p_chars
    # Without dotglob a name's leading '.' is matched only by a literal one.
    dot_rule = not dotglob and not operand.startswith(".")
    end = (len(g), len(p))

    def close(i: int, j: int) -> set[tuple[int, int]]:
        """(i, j) and the pairs stars matching nothing skip to."""
        out = {(i, j)}
        stack = [(i, j)]
        while stack:
            a, b = stack.pop()
            skips = []
            if a < len(g) and g[a][0]:
                skips.append((a + 1, b))
            if b < len(p) and p[b][0]:
                skips.append((a, b + 1))
            for nxt in skips:
                if nxt not in out:
                    out.add(nxt)
                    stack.append(nxt)
        return out

    stack = [(i, j, True) for i, j in close(0, 0)]
    seen = set(stack)
    while stack:
        i, j, first = stack.pop()
        if i >= len(g) or j >= len(p):
            continue
        (g_star, g_acc), (p_star, p_acc) = g[i], p[j]
        if not any(g_acc(c) and p_acc(c) for c in chars if not (first and dot_rule and c == ".")):
            continue
        for a, b in close(i if g_star else i + 1, j if p_star else j + 1):
            if (a, b) == end:
                return True  # a name of at least one character matches both
            if (a, b, False) not in seen:
                seen.add((a, b, False))
                stack.append((a, b, False))
    return False


def step_glob(
    raw: tuple[str, ...], closures: tuple[frozenset[int], ...], states: frozenset[int], part: str
) -> frozenset[int]:
    """The states of a deny glob (its segments ``raw``, '**' for a run of names; each
    state's ``closures``) that ``states`` reach by the operand segment ``part``, a glob.
    A ``**`` operand segment is any run of names no segment of it starts with '.' (bash's
    globstar; dash reads it as '*', which it covers)."""
    n = len(raw)

    def one(current: frozenset[int], seg: str) -> frozenset[int]:
        out: set[int] = set()
        for s in current:
            if s < n:
                if raw[s] == "**":
                    out |= closures[s]
                elif segments_meet(seg, raw[s]):
                    out |= closures[s + 1]
        return frozenset(out)

    if part != "**":
        return one(states, part)
    reached = set(states)
    frontier = states
    while frontier:
        frontier = frozenset(one(frontier, "*") - reached)
        reached |= frontier
    return frozenset(reached)
