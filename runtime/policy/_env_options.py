"""Environment variables whose value is a program's options or code it loads, read as what
they stand for on that program's command line.

``NODE_OPTIONS='--require ./x.js' npm test`` gives every node process the command starts the
option ``--require ./x.js``: the walker judges the value's words as node's own options are
judged on its command line (:meth:`runtime.policy._shell_code.CodeMixin.env_values`), never
stricter and never looser: a preload of a file or package is what ``node -r x app.js`` is
(allowed), inline code (``--import data:...``), a stream (``-r /dev/stdin``) or a file the
same command writes or downloads is what it is there (read, or asked). A harmless value
(``--max-old-space-size=4096``) is nothing.

How the other variables that steer code were decided (policy/README.md has the table):
``PYTHONPATH``, ``NODE_PATH``, ``RUBYLIB``, ``PERL5LIB`` add directories searched for modules a
program imports by name, as ``perl -I lib`` / ``ruby -I lib`` do (allowed): allowed.
``PYTHONSTARTUP`` is read by an interactive python only (``python3 -i``, whose input is then
its code and already asks): allowed. ``PYTHONHOME`` replaces the interpreter's own standard
library and ``site`` for every python program, as ``LD_LIBRARY_PATH`` does for every binary;
no command-line option does that: it joins ``commands.deny.loader-env`` (ask).
``BASH_ENV`` (sourced by every non-interactive bash) and ``ENV`` (interactive sh) keep asking
and their file is also read as ``. FILE`` is (a script the same command writes is read as
shell). ``PROMPT_COMMAND`` keeps asking and its value is read as shell too.
"""

from __future__ import annotations

from runtime.policy.argv import Word

__all__ = ["OPTION_ENV", "SOURCED_ENV", "option_env_words"]

#: Variables whose value is options of the program named (node splits NODE_OPTIONS on
#: white space, double quotes grouping, backslash escaping within them).
OPTION_ENV: dict[str, str] = {"NODE_OPTIONS": "node"}

#: Variables naming a file a shell sources before its commands.
SOURCED_ENV = frozenset({"BASH_ENV", "ENV"})


def option_env_words(value: Word) -> list[Word]:
    """The option words of an :data:`OPTION_ENV` value, split as node splits
    NODE_OPTIONS. A value only known at run time is one run-time word (it may be any
    option)."""
    if value.dynamic:
        return [Word(value.value, dynamic=True)]
    out: list[str] = []
    cur: list[str] = []
    quoted = False
    started = False
    text = value.value
    i = 0
    while i < len(text):
        c = text[i]
        if quoted and c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c == '"':
            quoted = not quoted
            started = True
        elif c.isspace() and not quoted:
            if started:
                out.append("".join(cur))
            cur, started = [], False
        else:
            cur.append(c)
            started = True
        i += 1
    if started:
        out.append("".join(cur))
    return [Word(v) for v in out]
