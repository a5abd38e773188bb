"""Globs that sweep a directory, and ``find`` expressions that delete everything they walk.

Pure functions on strings and :class:`Word` lists, shared by the command rules
(:mod:`runtime.policy.commands`) and the shell walker (:mod:`runtime.policy._shell_wrappers`).
"""

from __future__ import annotations

import re

from runtime.policy.argv import Word

__all__ = ["find_delete_roots", "fixes_a_character"]


def _bracket_end(seg: str, i: int) -> int:
    """The index of the ']' closing the bracket expression that opens at ``seg[i]``, or -1
    (an unclosed '[' is a literal). A ']' first in the set is a member, '[:alpha:]' and
    friends are one member."""
    j = i + 1
    if j < len(seg) and seg[j] in "!^":
        j += 1
    if j < len(seg) and seg[j] == "]":
        j += 1
    while j < len(seg):
        if seg.startswith("[:", j):
            close = seg.find(":]", j + 2)
            if close != -1:
                j = close + 2
                continue
        if seg[j] == "]":
            return j
        j += 1
    return -1


def _group_end(seg: str, i: int) -> int:
    """The index of the ')' closing the extglob group whose '(' is ``seg[i]``, or -1."""
    depth = 0
    for j in range(i, len(seg)):
        if seg[j] == "(":
            depth += 1
        elif seg[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _alternatives(body: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in body:
        if ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur.append(ch)
    out.append("".join(cur))
    return out


def fixes_a_character(seg: str) -> bool:
    """Whether every name the glob ``seg`` (one path segment) matches holds a character the
    glob spells out: a literal, a one-member bracket ('[b]'), or an extglob group every one
    of whose alternatives fixes one ('@(build|dist)').

    A glob that fixes none chooses names by character class only ('?*', '[a-z]*',
    '[[:alpha:]]*', '!(keep)', '**'): it sweeps a directory as '*' does, leaving out
    whatever the class happens not to cover, and the rules judge it as '*'."""
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c in "?*+@!" and i + 1 < n and seg[i + 1] == "(":
            end = _group_end(seg, i + 1)
            if end != -1:
                # '!(..)' matches what the group does not; '?(..)'/'*(..)' may match nothing.
                if c in "@+" and all(fixes_a_character(a) for a in _alternatives(seg[i + 2 : end])):
                    return True
                i = end + 1
                continue
        if c in "*?":
            i += 1
            continue
        if c == "[":
            end = _bracket_end(seg, i)
            if end != -1:
                body = seg[i + 1 : end]
                if len(body) == 1 and body not in "!^":
                    return True
                i = end + 1
                continue
        return True
    return False


# find's leading options: -H/-L/-P, -D DEBUGOPTS, -O<level>.
_FIND_LEADING = frozenset({"-H", "-L", "-P"})
# Tests on a name or path: they narrow a delete when their pattern fixes a character.
_NAME_TESTS = frozenset(
    {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname"}
)
_REGEX_TESTS = frozenset({"-regex", "-iregex"})
# Tests that narrow a delete to entries that hold nothing: nothing is lost.
_EMPTY_TESTS = frozenset({"-empty"})
# Tests that narrow by something other than the name (age, size, owner ...): a value such
# as '-mtime -99999' makes them match everything, so they narrow only to "may".
_OTHER_TESTS = frozenset(
    {
        "-amin",
        "-anewer",
        "-atime",
        "-cmin",
        "-cnewer",
        "-ctime",
        "-fstype",
        "-gid",
        "-group",
        "-inum",
        "-links",
        "-mmin",
        "-mtime",
        "-newer",
        "-nogroup",
        "-nouser",
        "-perm",
        "-samefile",
        "-size",
        "-uid",
        "-used",
        "-user",
        "-context",
    }
)
_NEGATIONS = frozenset({"!", "-not"})
_ALTERNATIONS = frozenset({"-o", "-or", ","})
_CLASS_RE = re.compile(r"\[[^\]]*\]")


def _name_narrows(value: str) -> bool:
    return any(fixes_a_character(seg) for seg in value.split("/") if seg not in ("", ".", ".."))


def _regex_narrows(value: str) -> bool:
    # A letter or digit outside a bracket expression is one the name must hold.
    return any(ch.isalnum() for ch in _CLASS_RE.sub("", value))


def _narrowing(tokens: list[Word]) -> str:
    """'name' when a test in ``tokens`` narrows by name (or to empty entries), 'other' when
    one narrows only by age, size or owner, '' when none does. A group counts when every
    alternative does."""
    best = ""
    i = 0
    while i < len(tokens):
        v = tokens[i].value
        value = tokens[i + 1] if i + 1 < len(tokens) else None
        if v in _NAME_TESTS and value is not None:
            if not value.dynamic and _name_narrows(value.value):
                return "name"
            i += 2
            continue
        if v in _REGEX_TESTS and value is not None:
            if not value.dynamic and _regex_narrows(value.value):
                return "name"
            i += 2
            continue
        if v in _EMPTY_TESTS:
            return "name"
        if v in _OTHER_TESTS or v.startswith("-newer"):
            best = "other"
        elif v == "(":
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += {"(": 1, ")": -1}.get(tokens[j].value, 0)
                j += 1
            group = tokens[i + 1 : j - 1]
            alts: list[list[Word]] = [[]]
            level = 0
            for t in group:
                level += {"(": 1, ")": -1}.get(t.value, 0)
                if level == 0 and t.value in _ALTERNATIONS:
                    alts.append([])
                else:
                    alts[-1].append(t)
            kinds = [_narrowing(a) for a in alts]
            if all(k == "name" for k in kinds):
                return "name"
            if all(kinds):
                best = "other"
            i = j
            continue
        i += 1
    return best


def find_delete_roots(words: list[Word]) -> list[Word]:
    """The start paths ``find ... -delete`` (``words``, the program first) may empty, as
    operands of an ``rm -r`` that stands for it; [] when it narrows by name or has no
    ``-delete``. A start path it narrows only by age, size or owner comes back as a
    run-time operand (the rules then say "may match").

    Why: ``find . -delete`` (no start path: '.') is ``rm -rf ./*`` and the rm rules must
    see it; ``find . -name '*.pyc' -delete`` is not. A negation, or an alternation outside
    a group, can turn any test around (``! -name keep``, ``-name x -o -delete``): then
    nothing narrows."""
    i = 1
    while i < len(words):
        v = words[i].value
        if v in _FIND_LEADING or (v.startswith("-O") and v[2:].isdigit()):
            i += 1
        elif v == "-D":
            i += 2
        else:
            break
    roots: list[Word] = []
    while i < len(words) and not words[i].value.startswith(("-", "(", "!", ")")):
        if words[i].value == ",":
            break
        roots.append(words[i])
        i += 1
    expression = words[i:]
    values = [w.value for w in expression]
    if "-delete" not in values:
        return []
    if not roots:
        roots = [Word(".")]
    if any(w.dynamic for w in expression):
        kind = "other"  # a test only known at run time may narrow, or not
    elif _NEGATIONS.intersection(values):
        kind = ""
    else:
        level = 0
        kind = ""
        top_alternation = False
        for v in values:
            level += {"(": 1, ")": -1}.get(v, 0)
            if level == 0 and v in _ALTERNATIONS:
                top_alternation = True
        if not top_alternation:
            kind = _narrowing(expression[: values.index("-delete")])
    if kind == "name":
        return []
    if kind == "other":
        return [Word(w.value, dynamic=True, operand=True) for w in roots]
    return roots
