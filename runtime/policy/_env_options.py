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
shell). ``PROMPT_COMMAND`` keeps asking and its value is read as shell too. npm's ``node-options``
(``npm_config_node_options``, ``npm --node-options``) is NODE_OPTIONS for the scripts npm
runs. zsh's ``ZDOTDIR`` asks as ``BASH_ENV`` does, and ``HOME``/``ZDOTDIR`` set for a shell
that reads its start-up files from there (:func:`startup_files`) ask, their files read as
``. FILE`` is. ``LESS`` is less's options (``LESS=-R`` is nothing, ``LESS=--lesskey-src=k``
is what that option is, ``LESS=+!cmd`` asks as ``less +!cmd`` does). No option stands for
vim's ``VIMINIT``/``GVIMINIT``/``EXINIT`` (ex commands, ``!cmd`` included, run at start-up)
or ``VIMRUNTIME``/``VIM`` (where vim finds the scripts it sources), less's ``LESSKEY*``
files (their ``#env`` section sets ``LESSOPEN``), ``MANOPT`` (man's options, ``-P PAGER``
among them) or perl's ``PERL5DB`` (the debugger's code): they join
``commands.deny.loader-env`` (ask).
"""

from __future__ import annotations

from runtime.policy.argv import Word

__all__ = [
    "OPTION_ENV",
    "SOURCED_ENV",
    "STARTUP_DIR_ENV",
    "option_env_program",
    "option_env_words",
    "startup_files",
]

#: Variables whose value is options of the program named. npm hands its ``node-options``
#: setting (``npm_config_node_options``, ``--node-options``) to the scripts it runs as
#: NODE_OPTIONS; npm reads ``npm_config_*`` names in any case, '-' and '_' alike.
#: less reads LESS as options before its command line's ('LESS=--lesskey-src=k').
OPTION_ENV: dict[str, str] = {
    "NODE_OPTIONS": "node",
    "npm_config_node_options": "node",
    "LESS": "less",
}

#: Variables naming a file a shell sources before its commands.
SOURCED_ENV = frozenset({"BASH_ENV", "ENV"})

#: Variables naming the directory a shell reads its start-up files from: zsh reads
#: ``$ZDOTDIR/.zshenv`` (``$HOME`` when unset) on every start, bash ``~/.bashrc`` when
#: interactive and ``~/.profile`` (...) as a login shell. Setting one to a directory the
#: command fills is ``BASH_ENV=FILE`` spelled differently (see :func:`startup_files`).
STARTUP_DIR_ENV = frozenset({"HOME", "ZDOTDIR"})


def option_env_program(name: str) -> str | None:
    """The program whose options the variable ``name`` holds (:data:`OPTION_ENV`)."""
    if name.lower().replace("-", "_") == "npm_config_node_options":
        return "node"
    return OPTION_ENV.get(name)


def option_env_words(value: Word) -> list[Word]:
    """The option words of an :data:`OPTION_ENV` value, split as node's
    ``ParseNodeOptionsEnvVar`` splits NODE_OPTIONS: on spaces only (a tab is part of a
    word: node then refuses the option), double quotes group and produce no word of their
    own, a backslash within them escapes the next character. A value only known at run
    time is one run-time word (it may be any option)."""
    if value.dynamic:
        return [Word(value.value, dynamic=True)]
    out: list[str] = []
    cur: list[str] | None = None
    quoted = False
    text = value.value
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if c == "\\" and quoted and i < len(text):
            c = text[i]
            i += 1
        elif c == " " and not quoted:
            if cur is not None:
                out.append("".join(cur))
            cur = None
            continue
        elif c == '"':
            quoted = not quoted
            continue
        if cur is None:
            cur = []
        cur.append(c)
    if cur is not None:
        out.append("".join(cur))
    return [Word(v) for v in out]


# Per shell: (option words that stop it reading start-up files, files it always reads,
# files it reads when interactive, files it reads as a login shell), relative to the
# start-up directory. csh/tcsh and fish read theirs on every start.
_BASH_LOGIN = (".bash_profile", ".bash_login", ".profile")
_STARTUP: dict[str, tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "bash": (frozenset({"--norc", "--noprofile"}), (), (".bashrc",), _BASH_LOGIN),
    "zsh": (frozenset({"-f", "--no-rcs", "--norcs"}), (".zshenv",), (".zshrc",),
            (".zprofile", ".zlogin")),
    "fish": (frozenset({"-N", "--no-config"}), (".config/fish/config.fish",), (), ()),
    "csh": (frozenset({"-f"}), (".cshrc",), (), (".login",)),
    "tcsh": (frozenset({"-f"}), (".tcshrc", ".cshrc"), (), (".login",)),
    **dict.fromkeys(
        ("sh", "dash", "ash", "ksh", "mksh", "ksh93", "pdksh", "oksh", "loksh", "yash"),
        (frozenset(), (), (), (".profile",)),
    ),
}  # fmt: skip


def startup_files(shell: str, words: list[Word]) -> tuple[str, ...]:
    """The files below its start-up directory (``$HOME``, zsh's ``$ZDOTDIR``) that the
    shell ``shell`` run as ``words`` reads as shell code before its own: interactive
    (``-i``) and login (``-l``, ``--login``) modes add theirs. Options are read up to the
    first operand, as the shells read them; a mode given by a later word is not one."""
    spec = _STARTUP.get(shell)
    if spec is None:
        return ()
    off, always, interactive, login = spec
    files = list(always)
    skip = False
    for w in words[1:]:
        v = w.value
        if skip:  # the value of '-o OPT', '--rcfile FILE'
            skip = False
            continue
        if v in off:
            return ()
        if v == "--login":
            files += login
        elif v in ("--rcfile", "--init-file"):
            skip = True
        elif v.startswith("--"):
            if v == "--":
                break
        elif v.startswith(("-", "+")) and v != "-":
            cluster = v[1:]
            if v.startswith("-") and "i" in cluster:
                files += interactive
            if v.startswith("-") and "l" in cluster:
                files += login
            skip = "o" in cluster or "O" in cluster
        else:
            break
    return tuple(dict.fromkeys(files))
