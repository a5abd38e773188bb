"""Globs that sweep a directory, and ``find`` expressions that delete everything they walk.

Pure functions on strings and :class:`Word` lists, shared by the command rules
(:mod:`runtime.policy.commands`) and the shell walker (:mod:`runtime.policy._shell_wrappers`).
"""

from __future__ import annotations

import posixpath
import re
from fnmatch import fnmatchcase

from runtime.policy.argv import Word

__all__ = ["find_delete_roots", "find_exec_operands", "fixes_a_character", "sweeps"]


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


def sweeps(seg: str) -> bool:
    """Whether the glob ``seg`` (one path segment) sweeps a directory as '*' does: it fixes
    no character (:func:`fixes_a_character`) and matches names of any length.

    A glob of bounded length chooses names by their length as well as their class: '?'
    is the one-character names, '[a-z][0-9]' two-character ones; a directory's work is not
    in them ('rm -rf ?' is a scoped delete). A '*' or a '+(..)'/'!(..)' group lifts the
    bound ('?*', '[a-z]*', '!(keep)')."""
    if fixes_a_character(seg):
        return False
    return "*" in seg or "+(" in seg or "!(" in seg


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
# Age tests by their unit in minutes: '-mtime +N' (older than N+1 days) spares every entry
# changed within the last day, which holds the directory's current work.
_AGE_TESTS = {"-mtime": 1440, "-atime": 1440, "-ctime": 1440, "-mmin": 1, "-amin": 1, "-cmin": 1}
_DAY_MINUTES = 1440
_NEGATIONS = frozenset({"!", "-not"})
_ALTERNATIONS = frozenset({"-o", "-or", ","})
_CLASS_RE = re.compile(r"\[[^\]]*\]")


def _name_narrows(value: str) -> bool:
    return any(not sweeps(seg) for seg in value.split("/") if seg not in ("", ".", ".."))


def _regex_narrows(value: str) -> bool:
    # A letter or digit outside a bracket expression is one the name must hold.
    return any(ch.isalnum() for ch in _CLASS_RE.sub("", value))


def _spares_a_day(test: str, value: Word) -> bool:
    """'-mtime +7', '-mmin +1440': an age test that leaves out every entry changed within
    the last day. The test's own arithmetic: '+N' days is older than N+1 whole days,
    '+N' minutes older than N minutes."""
    v = value.value
    if value.dynamic or not v.startswith("+") or not v[1:].isdigit():
        return False
    unit = _AGE_TESTS[test]
    return (int(v[1:]) + (1 if unit == _DAY_MINUTES else 0)) * unit >= _DAY_MINUTES


def _narrowing(tokens: list[Word]) -> str:
    """'name' when a test in ``tokens`` narrows by name (or to empty entries, or to entries
    older than a day), 'other' when one narrows only by another age, size or owner, ''
    when none does. A group counts when every alternative does.

    Why an age of a day narrows: 'find . -mtime +7 -delete' is the clean-up of old logs
    and caches, and spares everything the caller is working on; '-mtime -99999' (newer
    than), '-size +0' or '-mmin +1' spare next to nothing and stay 'other'."""
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
        if v in _AGE_TESTS and value is not None and _spares_a_day(v, value):
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


def _find_parts(words: list[Word]) -> tuple[list[Word], list[Word]]:
    """(start paths, expression) of a find command line (``words``, the program first)."""
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
    return roots, words[i:]


def _narrowed(expression: list[Word], action: int) -> str:
    """:func:`_narrowing` of the tests before the action at ``expression[action]``. A
    negation, or an alternation outside a group, can turn any test around (``! -name
    keep``, ``-name x -o -delete``): then nothing narrows. A test only known at run time
    may narrow, or not."""
    tests = expression[:action]
    values = [w.value for w in expression]
    if any(w.dynamic for w in tests):
        return "other"
    if _NEGATIONS.intersection(values):
        return ""
    level = 0
    for v in values:
        level += {"(": 1, ")": -1}.get(v, 0)
        if level == 0 and v in _ALTERNATIONS:
            return ""
    return _narrowing(tests)


def find_delete_roots(words: list[Word]) -> list[Word]:
    """The start paths ``find ... -delete`` (``words``, the program first) may empty, as
    operands of an ``rm -r`` that stands for it; [] when it narrows by name or has no
    ``-delete``. A start path it narrows only by age, size or owner comes back as a
    run-time operand (the rules then say "may match").

    Why: ``find . -delete`` (no start path: '.') is ``rm -rf ./*`` and the rm rules must
    see it; ``find . -name '*.pyc' -delete`` is not."""
    roots, expression = _find_parts(words)
    values = [w.value for w in expression]
    if "-delete" not in values:
        return []
    kind = _narrowed(expression, values.index("-delete"))
    if kind == "name":
        return []
    roots = roots or [Word(".")]
    if kind == "other":
        return [Word(w.value, dynamic=True, operand=True) for w in roots]
    return roots


def _root_may_pass(root: str, tests: list[Word]) -> bool:
    """Whether the start path ``root`` itself may pass ``tests`` (ANDed at the top level):
    False only when a top-level -name/-iname does not match its last component."""
    base = posixpath.basename(root.rstrip("/")) or "/"
    level = 0
    for k, w in enumerate(tests[:-1]):
        level += {"(": 1, ")": -1}.get(w.value, 0)
        if level or w.value not in ("-name", "-iname"):
            continue
        pattern = tests[k + 1].value
        if w.value == "-iname":
            base, pattern = base.lower(), pattern.lower()
        if not base.startswith("~") and not fnmatchcase(base, pattern):
            return False
    return True


def find_exec_operands(words: list[Word], action: int) -> list[Word] | None:
    """What the word ``{}`` of the ``-exec`` at ``words[action]`` names, when the tests
    before it narrow by name: one path below each start path ('./{}', '/{}'), which the
    rules judge as a child of it, and the start path itself, as "may be", unless a name
    test leaves it out; None when nothing narrows (then ``{}`` is any entry, the start
    paths included, and only known at run time).

    Why: ``find . -name node_modules -prune -exec rm -rf {} +`` deletes what
    ``find . -name node_modules -delete`` would, and neither sweeps the directory; under
    '/' or '~' a child is still what the rules on those refuse, and ``find /workspace
    -maxdepth 0 -name workspace -exec rm -rf {} +`` names the workspace itself."""
    roots, expression = _find_parts(words)
    offset = len(words) - len(expression)
    if action < offset or _narrowed(expression, action - offset) != "name":
        return None
    out: list[Word] = []
    for w in roots or [Word(".")]:
        if w.dynamic:
            out.append(Word(w.value, dynamic=True))
            continue
        out.append(Word(w.value.rstrip("/") + "/{}", operand=True))
        if _root_may_pass(w.value, expression[: action - offset]):
            out.append(Word(w.value, dynamic=True, operand=True))
    return out
