"""Database command-line clients whose input is code that can run shell commands: sqlite3's
dot-commands (``.shell``, ``.system``, ``.load``, ``.once |CMD``), ``load_extension()`` and
``edit()``; psql's and mysql's ``\\!``. Their SQL arrives as arguments, ``-cmd``/``-c``
values, or on the standard input.

What the walker can read is judged: arguments and a literal here-document or here-string.
Input it cannot read (a pipe, a file redirect, ``-init FILE``, ``.read FILE``, an argument
only known at run time) is code only known at run time: an interpreter hazard (ask), as
``cat x | sh`` and ``sh < x.sh`` are. Pure functions on :class:`Word` lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from runtime.policy.argv import Word

__all__ = ["SQL_CLIENTS", "sql_client_code"]

# sqlite3's dot-commands are matched by any prefix of their name ('.sh' is '.shell').
_SQLITE_DOT_RE = re.compile(r"^\s*\.([A-Za-z]+)(.*)$", re.MULTILINE)
_SQLITE_RUNS = ("shell", "system", "load", "excel")  # run a program or load code
_SQLITE_PIPES = ("once", "output", "import", "read", "log")  # '|CMD' runs CMD
_SQLITE_FUNCS_RE = re.compile(r"\b(load_extension|edit)\s*\(", re.IGNORECASE)
_SQLITE_VALUED = frozenset(
    {"-cmd", "-init", "-separator", "-newline", "-nullvalue", "-vfs", "-maxsize", "-mmap",
     "-heap", "-pagecache", "-lookaside", "-escape", "-A", "-ascii-separator"}
)  # fmt: skip
# psql's and mysql's shell escapes and piped outputs (as runtime.policy.wrappers.HAZARD_ARGS
# reads their arguments), in their input; '\i FILE' / 'source FILE' read code from a file,
# COPY ... PROGRAM runs a command.
_MYSQL_RE = re.compile(r"\\!|\\\.|^\s*(system|source)\s", re.IGNORECASE | re.MULTILINE)
_CLIENT_RES = {
    "psql": re.compile(r"\\!|\\[ogw][^\n]*\||\\i|\bprogram\s*['\"$e]", re.IGNORECASE),
    "mysql": _MYSQL_RE,
    "mariadb": _MYSQL_RE,
}
SQL_CLIENTS = frozenset({"sqlite3", "sqlite", *_CLIENT_RES})


def _prefix_of(word: str, names: tuple[str, ...]) -> bool:
    w = word.lower()
    return len(w) >= 2 and any(n.startswith(w) for n in names)


def _sqlite_runs(text: str) -> bool:
    """Whether sqlite3 input ``text`` may run a program, load code, or read code from
    somewhere this text does not show."""
    if _SQLITE_FUNCS_RE.search(text):
        return True
    for m in _SQLITE_DOT_RE.finditer(text):
        name, rest = m.group(1), m.group(2)
        if _prefix_of(name, _SQLITE_RUNS):
            return True
        if _prefix_of(name, _SQLITE_PIPES) and (
            "|" in rest or name.lower().startswith("r") or re.search(r"(^|\s)-[ex]", rest)
        ):
            return True  # '.once |CMD', '.once -e' (an editor), '.read FILE'
    return False


def _sqlite_arguments(words: list[Word]) -> tuple[list[Word], bool]:
    """(the words sqlite3 runs as SQL or dot-commands, whether '-init FILE' is given)."""
    code: list[Word] = []
    init = False
    database_seen = False
    i = 1
    while i < len(words):
        w = words[i]
        v = w.value.lstrip("-")
        if w.value.startswith("-") and not w.dynamic and len(w.value) > 1:
            if "-" + v in _SQLITE_VALUED and i + 1 < len(words):
                if v == "cmd":
                    code.append(words[i + 1])
                elif v == "init" and words[i + 1].value != "/dev/null":
                    init = True
                i += 2
                continue
            i += 1
            continue
        if database_seen:
            code.append(w)
        database_seen = True
        i += 1
    return code, init


def sql_client_code(
    name: str, words: list[Word], *, stdin_text: str | None, stdin_code: bool
) -> str | None:
    """Why the client ``name`` may run commands or unread code (a hazard's detail), or
    None. ``stdin_text``: a literal here-document or here-string; ``stdin_code``: its
    input is fed (a pipe, a redirect) with text the command line does not show."""
    if name in ("sqlite3", "sqlite"):
        code, init = _sqlite_arguments(words)
        if init:
            return f"{name} -init reads commands from a file"
        for w in code:
            if w.dynamic:
                return f"{name} runs SQL or dot-commands only known at run time"
            if _sqlite_runs(w.value):
                return f"{name} {w.value!r} runs a command or loads code"
        runs: Callable[[str], bool] = _sqlite_runs
    else:
        client = _CLIENT_RES[name]

        def runs(text: str) -> bool:
            return client.search(text) is not None

    if stdin_text is not None:
        if runs(stdin_text):
            return f"{name} input runs a command or reads code from a file"
        return None
    if stdin_code:
        return f"{name} reads SQL and client commands (which can run programs) from its input"
    return None
