"""Lexical path rules for arguments with role read_path / write_path / cwd.

These checks give early, clear refusals; they are not the wall (the sandbox's mounts and
Landlock are). What an attacker controls is the whole string, so:

- NUL and control characters are refused (NUL truncates in C; others hide in logs);
- absolute paths are refused unless under the logical workspace root (``/workspace``), which
  defeats the prefix-sibling bug (``/workspace-evil``);
- ``..`` is resolved lexically and a path that leaves the workspace is refused;
- a backslash is a legal name character on Linux but a separator elsewhere: deny globs are
  also matched with backslashes read as separators, and ``..`` via backslashes is an escape;
- deny globs are matched against the NFKC form and the case-folded form too, so fullwidth
  dots (U+FF0E in ``.env``) or ``.ENV`` cannot dodge a deny;
- a write path is judged with everything below it: deleting or moving ``config`` takes
  ``config/prod.env`` along, so a deny or deny_write glob that could match below the path
  *through its names* refuses it (see :func:`_anchored_below`). Decided from the globs alone:
  the broker does not walk the tree (it would race the call anyway).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal, NamedTuple

from runtime._depth import CREATE_MAX_DEPTH
from runtime._globs import compile_segments
from runtime._quote import cut, quoted
from runtime.policy._globreach import is_bounded, is_glob, segments_meet, step_glob
from runtime.policy._workspace_globs import SANDBOX_ROOT
from runtime.policy.globs import GlobSet
from runtime.policy.schema import PathsSection

__all__ = ["Access", "PathRules", "PathVerdict", "allow_globs", "mask_globs", "normalise"]

Access = Literal["read", "write"]
_CACHE_MAX = 4096
_CACHED_PATH_CHARS = 1024  # longer paths are checked every time: bounded cache memory


class PathVerdict(NamedTuple):
    allowed: bool
    rule: str
    reason: str
    path: str  # the normalised workspace-relative path ('' = the workspace root)


class _Escape(ValueError):
    pass


def normalise(path: str, root: str = "/workspace", *, backslash: bool = False) -> str:
    """Workspace-relative, lexically resolved path; '' is the root. Raises ValueError (with a
    reason) for absolute paths outside ``root`` and for paths that climb out."""
    p = path.replace("\\", "/") if backslash else path
    if p.startswith("/"):
        r = root.rstrip("/")
        stripped = "/" + p.lstrip("/")
        if stripped == r or stripped.startswith(r + "/"):
            p = stripped[len(r) :]
        else:
            raise ValueError(f"absolute path {quoted(path)} is outside the workspace")
    out: list[str] = []
    for seg in p.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if not out:
                raise _Escape(f"path {quoted(path)} leaves the workspace")
            out.pop()
            continue
        out.append(seg)
    return "/".join(out)


def _bad_char(path: str) -> str | None:
    for ch in path:
        cat = unicodedata.category(ch)
        if ch == "\x00":
            return "NUL byte"
        if cat == "Cc":
            return f"control character U+{ord(ch):04X}"
        if cat in ("Cf", "Zl", "Zp") and ch not in "\u200d":
            # Bidi overrides and invisible format characters make a path read differently
            # from what it is.
            return f"invisible format character U+{ord(ch):04X}"
    return None


_Segments = tuple[re.Pattern[str] | None, ...]


class _BelowGlob(NamedTuple):
    """A deny glob compiled for :func:`_anchored_below`."""

    pattern: str
    segs: _Segments  # one regex per name, None for '**'
    raw: tuple[str, ...]  # the segments as written (for an operand that is a glob)
    closures: tuple[frozenset[int], ...]  # per state: it and what '**' lets it skip to


def _below_glob(pattern: str) -> _BelowGlob | None:
    """``pattern`` compiled for :func:`_anchored_below`, or None when it can never match
    below a path through the path's names: '**/NAME' (one name, no '**' after the leading
    one) matches only through the last name of the entry itself, which travels with it."""
    segs = compile_segments(pattern, casefold=True)
    if len(segs) == 2 and segs[0] is None and segs[1] is not None:
        return None
    n = len(segs)
    closures: list[frozenset[int]] = []
    for state in range(n + 1):
        out = {state}
        s = state
        while s < n and segs[s] is None:
            s += 1
            out.add(s)
        closures.append(frozenset(out))
    return _BelowGlob(pattern, segs, tuple(pattern.split("/")), tuple(closures))


def _anchored_below(glob: _BelowGlob, parts: list[str], *, globs: bool = False) -> bool:
    """Whether ``glob`` could match a path strictly below ``parts`` *through* ``parts``'
    names. ``globs``: ``parts`` is a shell operand whose segments may be globs, and the
    question is whether ``glob`` could match a path at or below one the operand names
    (:mod:`runtime.policy._globreach`).

    Why not any match below: a glob's leading ``**`` absorbing all of ``parts`` matches below
    every directory (``**/.env`` below ``build``), but only through names that travel with
    the entry: ``build/.env`` moved to ``out/.env`` is still protected, and the sandbox's
    masks make the kernel refuse to unlink an existing masked entry (EBUSY). An anchored
    glob (``config/prod.env``, ``.git/hooks/**``) loses its entry when an ancestor is moved,
    and that is what is refused. Same walk as the masks' ``exposes`` (one segment at a time;
    a whole-path regex cannot say what could match below a path)."""
    segs, closures = glob.segs, glob.closures
    n = len(segs)
    states = closures[0]
    absorbed = states if segs[0] is None else frozenset()
    for name in parts:
        if globs and is_glob(name):
            states = step_glob(glob.raw, closures, states, name)
            if not states:
                return False
            continue
        nxt: set[int] = set()
        for s in states:
            if s < n:
                seg = segs[s]
                if seg is None:
                    nxt |= closures[s]
                elif seg.fullmatch(name):
                    nxt |= closures[s + 1]
        if not nxt:
            return False
        states = frozenset(nxt)
    # A state short of the end needs more names: a path below ``parts`` can supply them.
    # An operand's glob may also name the protected path itself (the literal check matches
    # that for a plain path).
    return any(s < n or globs for s in states - absorbed)


def _decoy(name: str) -> str:
    """``name`` (a glob segment) with each letter and digit outside brackets changed to
    the next one ('.env' -> '.fow', 'id_rsa*' -> 'je_stb*')."""
    out: list[str] = []
    depth = 0
    for c in name:
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        elif not depth and c.isascii() and c.isalnum():
            base, span = ("0", 10) if c.isdigit() else ("a", 26) if c.islower() else ("A", 26)
            out.append(chr(ord(base) + (ord(c) - ord(base) + 1) % span))
            continue
        out.append(c)
    return "".join(out)


def _aims(name: str) -> tuple[tuple[str, str], ...]:
    """The (target, decoy) pairs :meth:`PathRules.renamed_name` tests a glob operand
    against for the deny glob segment ``name``: the segment itself, and, when it has a
    star, its shortest names (the stars matching nothing: 'id_rsa*' -> 'id_rsa'). The
    second is what a glob with a star of its own is aimed at: '*rsa' meets 'id_rsa*' and
    its decoy 'je_stb*' alike (the decoy's star takes the 'rsa'), but it matches 'id_rsa'
    and not 'je_stb'."""
    pairs = [(name, _decoy(name))]
    if "*" in name:
        shortest = name.replace("*", "")
        pairs.append((shortest, _decoy(shortest)))
    return tuple(pairs)


def mask_globs(section: PathsSection) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The kernel's half of these rules, as ``(hide, readonly)`` globs for the sandbox's masks
    (``runtime.backends.sandbox.masks``) in every call's workspace.

    ``deny`` and ``deny_read`` entries are hidden (an empty read-only file or directory over
    them), ``deny_write`` entries are bound read-only. The lexical checks here only see
    argument strings; the masks also hold against a shell, a symlink or a copy."""
    hide = tuple(dict.fromkeys((*section.deny, *section.deny_read)))
    return hide, tuple(dict.fromkeys(section.deny_write))


def allow_globs(section: PathsSection) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The ``(read, write)`` allow globs for the file toolkit in the sandbox, each None when
    it covers everything (a '**' among them: the default). The lexical checks here see only
    an argument string: a walk from the workspace root (``list_files``, ``code_query``
    without a path) would show what the read globs leave out, and a symlink in an allowed
    folder leads outside them. The toolkit filters walks and checks where paths resolved."""

    def narrowed(globs: list[str]) -> tuple[str, ...] | None:
        return None if "**" in globs else tuple(dict.fromkeys(globs))

    return narrowed(section.read), narrowed(section.write)


class PathRules:
    """Compiled ``[paths]`` section."""

    def __init__(self, section: PathsSection) -> None:
        # Where the sandbox and the tools show the workspace ([paths] workspace_root may
        # only say the same).
        self.root = SANDBOX_ROOT
        self._read = GlobSet(section.read)
        self._write = GlobSet(section.write)
        # Deny globs are case-insensitive on purpose: refusing '.ENV' costs little, and a
        # case-insensitive mount (or a tool that lowercases) would otherwise read '.env'.
        self._deny = GlobSet(section.deny, casefold=True)
        self._deny_read = GlobSet(section.deny_read, casefold=True)
        self._deny_write = GlobSet(section.deny_write, casefold=True)
        # For writes, what lies below the path (see _anchored_below): (pattern, segments).
        self._below = tuple(
            (rule, tuple(g for g in map(_below_glob, patterns) if g is not None))
            for rule, patterns in (
                ("paths.deny", section.deny),
                ("paths.deny_write", section.deny_write),
            )
        )
        # '**/NAME' globs (what _below_glob leaves out), by their NAME: a move that renames
        # may take such an entry out from under its name (see renamed_name).
        self._names = tuple(
            (rule, pattern, _aims(pattern.split("/")[-1]))
            for rule, patterns in (
                ("paths.deny", section.deny),
                ("paths.deny_write", section.deny_write),
            )
            for pattern in patterns
            if "/" in pattern and _below_glob(pattern) is None
        )
        self._cache: dict[tuple[str, str, bool], PathVerdict] = {}

    def normal_form(self, value: str) -> str | None:
        """The workspace-relative normal form of ``value`` ('./a//b' -> 'a/b'), or None
        when it has none (outside the workspace, climbing out)."""
        try:
            return normalise(unicodedata.normalize("NFKC", value), self.root)
        except ValueError:
            return None

    def check(self, value: object, access: Access, *, role: str = "read_path") -> PathVerdict:
        """The verdict for one path argument. Verdicts are cached: agents reread paths."""
        if not isinstance(value, str):
            return PathVerdict(
                False, "paths.invalid", f"path must be a string, not {cut(repr(value))}", ""
            )
        if len(value) > _CACHED_PATH_CHARS:
            return self._check(value, access, role)
        key = (value, access, role == "cwd")
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = self._check(value, access, role)
            if len(self._cache) >= _CACHE_MAX:
                self._cache.clear()
            self._cache[key] = verdict
        return verdict

    def _check(self, value: object, access: Access, role: str) -> PathVerdict:
        if not isinstance(value, str):
            return PathVerdict(
                False, "paths.invalid", f"path must be a string, not {cut(repr(value))}", ""
            )
        # Fast path: printable ASCII has no control characters and is its own NFKC form.
        plain = value.isascii() and value.isprintable()
        bad = None if plain else _bad_char(value)
        if bad is not None:
            return PathVerdict(False, "paths.invalid", f"{bad} in path {quoted(value)}", "")
        if value.startswith("~"):
            return PathVerdict(
                False,
                "paths.invalid",
                f"'~' is not expanded; path {quoted(value)} is ambiguous",
                "",
            )
        if value == "" and access == "write":
            return PathVerdict(False, "paths.invalid", "empty path", "")
        variants: list[str] = []
        forms = (
            (value,)
            if plain
            else tuple(dict.fromkeys((value, unicodedata.normalize("NFKC", value))))
        )
        for form in forms:
            for backslash in (False, True) if "\\" in form else (False,):
                try:
                    variants.append(normalise(form, self.root, backslash=backslash))
                except _Escape as exc:
                    return PathVerdict(False, "paths.escape", str(exc), "")
                except ValueError as exc:
                    return PathVerdict(False, "paths.absolute", str(exc), "")
        rel = variants[0]
        if rel == "" and access == "write" and role != "cwd":
            return PathVerdict(
                False, "paths.root", "the workspace root itself cannot be written or deleted", ""
            )
        if access == "write" and role != "cwd" and rel.count("/") >= CREATE_MAX_DEPTH:
            # Made, such a tree would fail every later call closed at the sandbox's mask
            # walk (runtime._depth); refused before anything is created.
            return PathVerdict(
                False,
                "paths.depth",
                f"path {value[:80]!r}… has {rel.count('/') + 1} components; a write path "
                f"may have at most {CREATE_MAX_DEPTH} (deeper trees cannot be checked for "
                "policy-denied paths)",
                rel,
            )
        denies = [(self._deny, "paths.deny")]
        denies.append(
            (self._deny_write, "paths.deny_write")
            if access == "write"
            else (self._deny_read, "paths.deny_read")
        )
        for globs, rule in denies:
            for v in dict.fromkeys(variants):
                hit = globs.match(v)
                if hit is not None:
                    return PathVerdict(
                        False, rule, f"{quoted(value)} matches protected pattern {hit!r}", rel
                    )
        if access == "write" and rel:
            held = self._held_below(value, variants, rel, globs=False)
            if held is not None:
                return held
        allow = self._write if access == "write" else self._read
        if rel == "" or allow.match(rel) is not None:
            return PathVerdict(True, f"paths.{access}", "", rel)
        return PathVerdict(
            False, f"paths.{access}", f"{quoted(value)} is not in the {access}able paths", rel
        )

    def _held_below(
        self, value: str, variants: list[str], rel: str, *, globs: bool
    ) -> PathVerdict | None:
        """A deny verdict when a deny/deny_write glob could match below ``variants`` (see
        :func:`_anchored_below`; ``globs``: at or below what a shell glob could name)."""
        what = "could name paths (or directories above paths)" if globs else "holds paths below it"
        for rule, globs_below in self._below:
            for v in dict.fromkeys(variants):
                parts = v.split("/")
                for glob in globs_below:
                    if _anchored_below(glob, parts, globs=globs):
                        return PathVerdict(
                            False,
                            rule,
                            f"{quoted(value)} {what} protected by {glob.pattern!r}: "
                            "a delete or move would take them along",
                            rel,
                        )
        return None

    def check_operand(self, value: str) -> PathVerdict:
        """The verdict for a path a shell command moves or deletes (``mv``, ``rm -r``),
        relative to the workspace, ``..`` and ``.`` resolved. A glob (``c*g``) is judged by
        every path it could name: refused when a deny or deny_write glob could match one of
        them or a path below one (:mod:`runtime.policy._globreach`). ``**/NAME`` globs are
        not asked: an entry they protect stays protected wherever a move puts it under its
        name, and the masked entry itself cannot be renamed or unlinked (EBUSY); asking them
        would refuse ``mv *.txt docs/`` for ``**/id_rsa*``."""
        verdict = self.check(value, "write")
        if not verdict.allowed or not is_glob(value):
            return verdict
        variants = list(dict.fromkeys((value, unicodedata.normalize("NFKC", value))))
        held = self._held_below(value, variants, verdict.path, globs=True)
        return verdict if held is None else held

    def renamed_name(self, value: str) -> tuple[str, str] | None:
        """(rule, pattern) of a ``**/NAME`` deny glob whose NAME the glob operand ``value``
        is aimed at, else None. Such globs are not asked of a move that keeps names
        (:meth:`check_operand`), but ``mv .e* env.txt`` renames ``.env`` to a name no glob
        protects (the masks are bound by name at each call's start). A literal operand is
        judged by :meth:`check` already.

        Aimed: it could match a name NAME matches, but not one that NAME with its letters
        and digits changed matches (:func:`_decoy`): ``.e*``, ``*.pem``, ``s*.p?m``, ``id_*``
        are; ``report*`` and ``*.log`` (which meet ``*.pem`` and ``id_rsa*`` only through
        a star) are not, or every 'mv build* old' would ask. A NAME with a star is also
        aimed at through its shortest name (:func:`_aims`): ``*rsa`` and ``*d_r*`` meet
        ``id_rsa*`` only as any glob with a star does, but they match ``id_rsa`` and not
        ``je_stb``. A glob without a star
        ('??????', '.?nv', '[.]e[n]v') chooses names by length and class only: one that
        can match NAME is aimed at it whatever else it matches (the caller picks the length
        of the protected name; 'mv ?????? x' renames an 'id_rsa' that is the only
        six-letter name). The operand is read as with bash's dotglob (which 'shopt -s
        dotglob', GLOBIGNORE or BASHOPTS in the environment turn on where the policy may
        not see it): '[.]env' and '?env' can name '.env'. A heuristic on purpose: the wall
        is the kernel's (the masked entry itself cannot be renamed: EBUSY), this is the
        early, clear answer for the globs that name a protected entry."""
        if not is_glob(value):
            return None
        last = value.rstrip("/").rsplit("/", 1)[-1]
        bounded = is_bounded(last)
        for rule, pattern, aims in self._names:
            for name, decoy in aims:
                if segments_meet(last, name, dotglob=True) and (
                    bounded or not segments_meet(last, decoy, dotglob=True)
                ):
                    return rule, pattern
        return None
