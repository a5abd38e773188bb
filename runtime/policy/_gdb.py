"""gdb's command line, read as gdb reads it.

gdb parses its options with ``getopt_long_only`` and no short options: every option is a
long one, spelled with one dash or two (``-ex`` is ``--ex``, ``-batch`` is ``--batch``), by
its full name or any unique prefix (``--eval`` is ``--eval-command``), its value attached
with '=' or the next word; ``-nx`` is the option ``nx``, never ``-n -x``. Options may follow
the program (GNU argument permutation) up to ``--`` or ``--args``. Names from gdb 13's
``--help`` and ``main.c``'s option table.
"""

from __future__ import annotations

from runtime.policy.argv import Word

__all__ = ["gdb_code"]

# Options whose value is gdb commands, and those whose value is a file of them.
_COMMANDS = frozenset({"ex", "eval-command", "iex", "init-eval-command", "eiex",
                       "early-init-eval-command"})  # fmt: skip
_COMMAND_FILES = frozenset({"x", "command", "ix", "init-command", "eix", "early-init-command"})
_VALUED = _COMMANDS | _COMMAND_FILES | frozenset(
    {
        "annotate", "b", "baud", "c", "cd", "core", "d", "D", "data-directory", "directory",
        "e", "exec", "i", "interpreter", "l", "p", "pid", "s", "se", "symbols", "t", "tty",
    }
)  # fmt: skip
_FLAGS = frozenset(
    {
        "args", "batch", "batch-silent", "configuration", "dbx", "f", "fullname", "help", "n",
        "nh", "nowindows", "nw", "nx", "q", "quiet", "r", "readnever", "readnow",
        "return-child-result", "silent", "statistics", "tui", "version", "w", "windows",
        "write",
    }
)  # fmt: skip
_ALL = sorted(_VALUED | _FLAGS)


def _option(word: str) -> str | None:
    """The gdb option ``word`` spells (None for an operand). A prefix of several names is
    refused by gdb as ambiguous; read as a command option when one of them is (stricter
    for a command line that does not run)."""
    if not word.startswith("-") or word in ("-", "--"):
        return None
    name = word[2:] if word.startswith("--") else word[1:]
    name = name.split("=", 1)[0]
    if name in _VALUED or name in _FLAGS:
        return name
    matches = [n for n in _ALL if n.startswith(name)] if name else []
    code = [n for n in matches if n in _COMMANDS or n in _COMMAND_FILES]
    return (code or matches or [name])[0]


def gdb_code(words: list[Word], stdin_code: bool) -> str | None:
    """Why gdb run as ``words`` runs commands the command line gives it, or None: an
    ``-ex``-like option's commands, an ``-x``-like option's file, or commands read from its
    input (when it is fed and not in batch mode, which reads no input)."""
    batch = False
    i = 1
    while i < len(words):
        v = words[i].value
        if v == "--":
            break
        opt = _option(v)
        if opt == "args":
            break
        if opt in _COMMANDS:
            return f"gdb {v} runs gdb commands given as an argument"
        if opt in _COMMAND_FILES:
            return f"gdb {v} runs the gdb commands in a file"
        batch = batch or opt in ("batch", "batch-silent")
        if opt in _VALUED and "=" not in v:
            i += 1
        i += 1
    if stdin_code and not batch:
        return "gdb reads gdb commands from its input"
    return None
