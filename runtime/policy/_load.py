"""TOML text -> validated :class:`PolicyFile`, with errors that name file, line and field.

tomllib reports no positions for valid TOML, so the line of a schema error is found by a
small scan of the text that tracks table headers and keys. It is a best effort: the field
path is always exact, the line is the closest key or header found for it.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from pydantic import ValidationError

from runtime.errors import PolicyError
from runtime.policy.schema import LocatedError, PolicyFile

__all__ = ["locate", "parse_policy"]

_HEADER_RE = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY_RE = re.compile(
    r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*="""
)
_TOML_POS_RE = re.compile(r"at line (\d+), column (\d+)")


def _split_key(text: str) -> list[str]:
    parts = re.findall(r""""([^"]*)"|'([^']*)'|([A-Za-z0-9_-]+)""", text)
    return [a or b or c for a, b, c in parts]


def _indexed(names: list[str], counters: dict[tuple[str, ...], int]) -> list[str]:
    """``names`` with the index of the current entry after each array of tables."""
    out: list[str] = []
    for name in names:
        out.append(name)
        if tuple(out) in counters:
            out.append(str(counters[tuple(out)]))
    return out


def locate(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the TOML key or header that best matches the field path ``loc``."""
    want = [str(p) for p in loc]
    best_line, best_len = None, 0
    table: list[str] = []
    counters: dict[tuple[str, ...], int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        m = _HEADER_RE.match(line)
        if m and not _KEY_RE.match(line):
            names = _split_key(m.group(2))
            # A header below an array of tables names its latest entry: '[examples.spec]'
            # after the second '[[examples]]' is examples.1.spec.
            path = _indexed(names[:-1], counters) + names[-1:]
            if m.group(1) == "[[":
                key = tuple(path)
                counters[key] = counters.get(key, -1) + 1
                # An error on the array as a whole (e.g. a duplicate across its entries)
                # points at its first header.
                if want == path and len(want) > best_len:
                    best_line, best_len = lineno, len(want)
                path = [*path, str(counters[key])]
            table = path
            full = table
        else:
            km = _KEY_RE.match(line)
            if not km:
                continue
            full = table + _split_key(km.group(1))
        n = 0
        for a, b in zip(full, want, strict=False):
            if a != b:
                break
            n += 1
        if n == len(full) and n > best_len:
            best_line, best_len = lineno, n
    return best_line


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    # Drop pydantic's union-member tags ("literal['allow',...]", "ToolEntry") from the path.
    return tuple(
        p
        for p in loc
        if not (isinstance(p, str) and ("[" in p or p == "ToolEntry" or p.startswith("function-")))
    )


def _error_loc(err: Any) -> tuple[Any, ...]:
    """An error's field path: a whole-policy check (a model validator, whose errors pydantic
    places at the model itself) names the offending entry by raising LocatedError."""
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, LocatedError):
        return (*err["loc"], *cause.loc)
    return tuple(err["loc"])


def parse_policy(text: str, source: str) -> PolicyFile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _TOML_POS_RE.search(str(exc))
        line = (
            int(m.group(1))
            if m
            else (max(1, len(text.splitlines())) if "end of document" in str(exc) else None)
        )
        raise PolicyError(
            f"{source}:{line or '?'}: not valid TOML: {exc}", file=source, line=line, field=None
        ) from exc
    except RecursionError:
        # tomllib parses arrays and inline tables recursively: a policy nested some
        # hundreds deep exhausts the interpreter's stack before any rule could read it.
        raise PolicyError(
            f"{source}: not valid TOML: arrays or inline tables nest too deeply",
            file=source,
            line=None,
            field=None,
        ) from None
    try:
        return PolicyFile.model_validate(data)
    except ValidationError as exc:
        errors = [(_clean_loc(_error_loc(e)), e) for e in exc.errors()]
        # Union members each report an error; the deepest one is the most specific.
        loc, err = max(errors, key=lambda le: len(le[0]))
        field = ".".join(str(p) for p in loc) or None
        line = locate(text, loc) if loc else None
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise PolicyError(
            f"{source}:{line or '?'}: {field or 'policy'}: {err['msg']}{more}",
            file=source,
            line=line,
            field=field,
            errors=[
                {"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
                for e in exc.errors()
            ],
        ) from exc
