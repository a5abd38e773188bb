"""Command lines that ordinary tools carry in their arguments and run through a shell: tmux's
shell commands, ``nix-shell --run``, ``vagrant ssh -c``, ``man -P``, ``nix develop -c``,
hyperfine's and GNU parallel's commands, and a shell named among the arguments of a program
no table knows (``pkexec sh -c CMD``).

Pure functions on :class:`Word` lists; the shell walker reads what they return as shell
(:mod:`runtime.policy._shell_code`). What an attacker controls is every word: a tool's
grammar read wrong here must make the walker read more text as shell, never less.
"""

from __future__ import annotations

import re
import shlex

from runtime.policy._long_options import long_option
from runtime.policy.argv import Word, join_words, program_name, shell_options, short_cluster
from runtime.policy.wrappers import SHELL_STRING_OPTIONS, SHELLS, Wrapper

__all__ = [
    "argv_after_option",
    "guessed_shells",
    "hyperfine_commands",
    "option_commands",
    "parallel_commands",
    "tmux_commands",
]

# tmux commands that run a shell command line, by name and alias: the option letters that
# take a value, and what the operands are. 'shell': the operands joined are the command
# ('new-session -d "curl x | sh"'); 'keys': keys typed into a pane, read as the command
# line they spell ('send-keys "rm -rf ~" Enter'); 'if': a shell command, then tmux commands;
# 'hook': a name, then a tmux command ('set-hook -g after-new-window "run-shell CMD"');
# 'bind': a key, then a tmux command's words; 'option': an option whose value may be a
# command line ('set -g default-command CMD'); 'environment': NAME VALUE for the sessions'
# commands. The shell-running commands' '-e NAME=VALUE' is environment for their command.
_TMUX: dict[str, tuple[str, str]] = {
    "new-session": ("cefFnstxy", "shell"),
    "new-window": ("ceFnt", "shell"),
    "split-window": ("celFpt", "shell"),
    "respawn-pane": ("cet", "shell"),
    "respawn-window": ("cet", "shell"),
    "run-shell": ("cdt", "shell"),
    "pipe-pane": ("t", "shell"),
    "display-popup": ("bcdehsStTwxy", "shell"),
    "send-keys": ("cNt", "keys"),
    "if-shell": ("t", "if"),
    "set-hook": ("t", "hook"),
    "bind-key": ("NT", "bind"),
    "set-option": ("t", "option"),
    "set-environment": ("t", "environment"),
}
_TMUX_ALIASES = {
    "new": "new-session",
    "neww": "new-window",
    "splitw": "split-window",
    "respawnp": "respawn-pane",
    "respawnw": "respawn-window",
    "run": "run-shell",
    "pipep": "pipe-pane",
    "popup": "display-popup",
    "send": "send-keys",
    "if": "if-shell",
    "bind": "bind-key",
    "set": "set-option",
    "setenv": "set-environment",
}
# Other tmux commands' names and aliases that are prefixes of the names above.
_TMUX_OTHERS = frozenset(
    {"display", "display-message", "display-menu", "display-panes", "displayp"}
)
_TMUX_GLOBAL_VALUED = "cfLST"  # tmux [-c shell-command] [-f file] [-L name] [-S path] [-T f]
_TMUX_DEPTH = 4
_TMUX_COMMAND_OPTIONS = frozenset({"default-command", "default-shell"})


def _tmux_jobs(words: list[Word]) -> list[Word]:
    """The '#(CMD)' of tmux formats in any argument: tmux runs CMD through the shell when it
    expands the format ('display -p "#(CMD)"', a status line). Unclosed: the rest."""
    out: list[Word] = []
    for w in words:
        start = w.value.find("#(")
        while start != -1:
            depth, k = 1, start + 2
            while k < len(w.value) and depth:
                depth += {"(": 1, ")": -1}.get(w.value[k], 0)
                k += 1
            out.append(Word(w.value[start + 2 : k - 1 if depth == 0 else k], w.dynamic))
            start = w.value.find("#(", k)
    return out


def _tmux_spec(name: str) -> tuple[str, str] | None:
    """A tmux command's spec by name, alias or unique prefix (tmux accepts 'split-w')."""
    full = _TMUX_ALIASES.get(name, name)
    if full in _TMUX:
        return _TMUX[full]
    if name in _TMUX_OTHERS or not name:
        return None
    matches = [k for k in _TMUX if k.startswith(name)]
    return _TMUX[matches[0]] if len(matches) == 1 else None


def _tmux_sequence(words: list[Word], out: list[Word], depth: int, env: list[Word]) -> None:
    """The shell command lines of a tmux command sequence ('cmd ; cmd'; a word ending in
    an unescaped ';' ends a command too)."""
    command: list[Word] = []
    for w in [*words, Word(";")]:
        v = w.value
        if v == ";" or (v.endswith(";") and not v.endswith("\\;")):
            if v != ";":
                command.append(Word(v[:-1], w.dynamic))
            if command:
                _tmux_command(command, out, depth, env)
            command = []
        else:
            command.append(w)


def _tmux_string(word: Word, out: list[Word], depth: int, env: list[Word]) -> None:
    """A tmux command given as one string (if-shell, set-hook); unreadable: shell."""
    try:
        parts = shlex.split(word.value)
    except ValueError:
        out.append(word)
        return
    _tmux_sequence([Word(p, word.dynamic) for p in parts], out, depth + 1, env)


def _tmux_command(words: list[Word], out: list[Word], depth: int, env: list[Word]) -> None:
    spec = _tmux_spec(words[0].value)
    if spec is None:
        return
    if depth > _TMUX_DEPTH:
        out.append(Word("", dynamic=True))  # nested too deep to read: only known at run time
        return
    valued, kind = spec
    i = 1
    flags = ""
    while i < len(words) and words[i].value.startswith("-") and words[i].value != "-":
        w = words[i]
        v = w.value
        i += 1
        if v == "--":
            break
        for k, letter in enumerate(v[1:], 1):
            if letter in valued:
                value = Word(v[k + 1 :], w.dynamic) if v[k + 1 :] else None
                if value is None and i < len(words):
                    value = words[i]
                    i += 1  # '-t x' or '-tx'
                if letter == "e" and value is not None:
                    env.append(value)  # 'new-session -e LD_PRELOAD=x.so CMD'
                break
            flags += letter
    operands = words[i:]
    if not operands:
        return
    if kind in ("shell", "keys"):
        out.append(join_words(operands))
    elif kind == "if":
        out.append(operands[0])
        for w in operands[1:]:
            _tmux_string(w, out, depth, env)
    elif kind == "hook":
        for w in operands[1:]:
            _tmux_string(w, out, depth, env)
    elif kind == "bind" and len(operands) > 1:
        _tmux_sequence(operands[1:], out, depth + 1, env)
    elif kind == "option" and len(operands) > 1 and operands[0].value in _TMUX_COMMAND_OPTIONS:
        out.append(operands[1])
    elif kind == "environment" and not set(flags) & {"r", "u"}:
        # 'setenv [-g] NAME VALUE': NAME=VALUE for what the sessions run ('-r', '-u'
        # remove it). No value: an empty one, still set.
        name = operands[0]
        value = operands[1] if len(operands) > 1 else Word("")
        env.append(Word(f"{name.value}={value.value}", name.dynamic or value.dynamic))


def tmux_commands(words: list[Word]) -> tuple[list[Word], list[Word]]:
    """The shell command lines a tmux command line runs or types: '-c CMD', and those of
    new-session, new-window, split-window, respawn-*, run-shell, pipe-pane, display-popup,
    send-keys, if-shell, default-command, the commands set-hook and bind-key register, and
    the '#(CMD)' of formats; and the environment it gives them, as NAME=VALUE words
    ('new-session -e NAME=VALUE', 'setenv NAME VALUE')."""
    out: list[Word] = []
    env: list[Word] = []
    i = 1
    while i < len(words):
        v = words[i].value
        cluster = short_cluster(v)
        if cluster is None:
            break
        i += 1
        if v == "--":
            break
        for k, letter in enumerate(cluster):
            if letter in _TMUX_GLOBAL_VALUED:
                value = Word(cluster[k + 1 :], words[i - 1].dynamic) if cluster[k + 1 :] else None
                if value is None and i < len(words):
                    value = words[i]
                    i += 1
                if letter == "c" and value is not None:
                    out.append(value)
                break
    _tmux_sequence(words[i:], out, 0, env)
    return out + _tmux_jobs(words[1:]), env


def option_commands(name: str, words: list[Word]) -> list[Word]:
    """Values of the options :data:`SHELL_STRING_OPTIONS` names for ``name``: shell command
    lines ('nix-shell --run CMD', 'vagrant ssh -c CMD', 'man -P PAGER')."""
    spec = SHELL_STRING_OPTIONS.get(name)
    if spec is None:
        return []
    subcommands, options = spec
    if subcommands and not subcommands.intersection(w.value for w in words[1:]):
        return []
    return shell_options(words, Wrapper(shell_arg=options))


# 'nix develop -c CMD ARGS', 'nix shell PKG... --command CMD ARGS': a program and its
# arguments, no shell in between.
_ARGV_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "nix": (frozenset({"develop", "shell"}), frozenset({"-c", "--command"})),
}


def argv_after_option(name: str, words: list[Word]) -> list[Word] | None:
    """The program and arguments after a run-this option ('nix develop -c rm -rf ~')."""
    spec = _ARGV_OPTIONS.get(name)
    if spec is None or len(words) < 2 or words[1].value not in spec[0]:
        return None
    for k, w in enumerate(words[2:], 2):
        if w.value in spec[1] and k + 1 < len(words):
            return words[k + 1 :]
    return None


# GNU parallel's options that take a value (its Getopt::Long table, 20221122): '=s' ones
# always, '--eof'/'--replace' (':s') when the next word is no option, '--max-lines' (':f')
# when it is a number. Getopt::Long (bundling) reads a long option by any unique prefix
# (:func:`runtime.policy._long_options.long_option`); a short cluster's first valued letter
# takes the rest of the cluster, or the next word when it ends it ('-kj 4').
_PARALLEL_SHORT_VALUED = "BCDEHIJLNPSUWadjns"
_PARALLEL_LONG_VALUED = frozenset(
    {
        "--arg-file", "--arg-file-sep", "--arg-sep", "--argfile", "--argfilesep", "--argsep",
        "--basefile", "--basenameextensionreplace", "--basenamereplace", "--bf", "--bin",
        "--block", "--block-size", "--block-timeout", "--blocksize", "--blocktimeout",
        "--bner", "--bnr", "--bt", "--col-sep", "--colsep", "--compress-program",
        "--compressprogram", "--ctag-string", "--ctagstring", "--debug", "--decompress-program",
        "--decompressprogram", "--delay", "--delimiter", "--dirnamereplace", "--dnr", "--env",
        "--er", "--extensionreplace", "--filter", "--group-by", "--groupby", "--halt",
        "--halt-on-error", "--haltonerror", "--header", "--id", "--jl", "--joblog", "--jobs",
        "--limit", "--linkinputsource", "--load", "--max-args", "--max-chars", "--max-procs",
        "--max-replace-args", "--maxargs", "--maxchars", "--maxprocs", "--maxreplaceargs",
        "--memfree", "--memsuspend", "--min-version", "--minversion", "--nice", "--parens",
        "--process-slot-var", "--processslotvar", "--profile", "--recend", "--recstart",
        "--res", "--result", "--results", "--retries", "--return", "--rpl", "--rsync-opts",
        "--rsyncopts", "--semaphore-name", "--semaphore-timeout", "--semaphorename",
        "--semaphoretimeout", "--seqreplace", "--shard", "--shell-completion",
        "--shellcompletion", "--slf", "--slotreplace", "--sql", "--sql-and-worker",
        "--sql-master", "--sql-worker", "--sqlandworker", "--sqlmaster", "--sqlworker",
        "--ssh", "--ssh-delay", "--sshdelay", "--sshlogin", "--sshloginfile", "--st",
        "--tag-string", "--tagstring", "--tempdir", "--template", "--term-seq", "--termseq",
        "--tf", "--timeout", "--tmpdir", "--tmpl", "--total", "--total-jobs", "--totaljobs",
        "--transfer-file", "--transfer-files", "--transferfile", "--transferfiles", "--trc",
        "--trim", "--use-compress-program", "--use-decompress-program",
        "--usecompressprogram", "--usedecompressprogram", "--wd", "--work-dir", "--workdir",
        "--xapplyinputsource",
    }
)  # fmt: skip
# Its options whose value is a command line it runs (the ssh it reaches hosts with, the
# programs it pipes output through).
_PARALLEL_COMMANDS = frozenset(
    {
        "--ssh", "--compress-program", "--compressprogram", "--use-compress-program",
        "--usecompressprogram", "--decompress-program", "--decompressprogram",
        "--use-decompress-program", "--usedecompressprogram",
    }
)  # fmt: skip
_PARALLEL_OPTIONAL = {"--eof": "e", "--replace": "i", "--max-lines": "l", "--maxlines": "l"}
_NUMBER_RE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _parallel_takes_next(v: str, following: str) -> bool:
    """Whether parallel's option word ``v`` takes the word ``following`` as its value."""
    if v.startswith("--"):
        if "=" in v:
            return False
        names = _PARALLEL_LONG_VALUED | _PARALLEL_OPTIONAL.keys()
        name = long_option(v, names, "parallel")
        letter = _PARALLEL_OPTIONAL.get(name or "", "")
        if not letter:
            return name is not None
    else:
        cluster = short_cluster(v) or ""
        k = next((k for k, c in enumerate(cluster) if c in _PARALLEL_SHORT_VALUED + "eil"), -1)
        if k != len(cluster) - 1:
            return False  # no valued letter, or its value is the rest of the cluster
        letter = cluster[k]
    if letter == "l":
        return _NUMBER_RE.fullmatch(following) is not None
    if letter in "ei":
        return not following.startswith("-")
    return True


_PARALLEL_SOURCES = frozenset({":::", "::::", ":::+", "::::+"})
_PARALLEL_INPUTS = 16  # inputs put in the template one by one
# parallel's replacement strings: '{}', '{.}', '{/}', '{//}', '{/.}', '{1}', '{#}' ...
_REPLACEMENT_RE = re.compile(r"\{[^{}\s]*\}")
# An input only known at run time, as the shell would see it: a parameter.
_RUN_TIME_INPUT = '"$PARALLEL_INPUT"'


def parallel_commands(words: list[Word]) -> list[Word]:
    """The shell command lines GNU parallel runs: its command (a shell template) with each
    input from ':::' in its replacement strings or appended, quoted as parallel quotes it;
    with no command, each input is a command line ('parallel ::: "rm -rf ~"'). An input
    from a file or the standard input stands as a parameter ('ls | parallel rm -rf' is
    'rm -rf "$x"': the rules then say "may match"). The values of its options that are
    command lines ('--ssh CMD') come first."""
    out: list[Word] = []
    i = 1
    while i < len(words):
        w = words[i]
        v = w.value
        if v == "--":
            i += 1
            break
        if not v.startswith("-") or v == "-":
            break
        takes = i + 1 < len(words) and _parallel_takes_next(v, words[i + 1].value)
        if long_option(v, _PARALLEL_COMMANDS, "parallel") is not None:
            if "=" in v:
                out.append(w.tail(v.index("=") + 1))
            elif takes:
                out.append(words[i + 1])
        i += 2 if takes else 1
    rest = words[i:]
    cut = next((k for k, w in enumerate(rest) if w.value in _PARALLEL_SOURCES), len(rest))
    template = rest[:cut]
    inputs: list[str | None] = []
    source = ""
    for w in rest[cut:]:
        if w.value in _PARALLEL_SOURCES:
            source = w.value
            if source.startswith("::::"):
                inputs.append(None)  # lines of a file
        elif source in (":::", ":::+"):
            inputs.append(None if w.dynamic else w.value)
    if cut == len(rest):
        inputs.append(None)  # the standard input
    if not template:
        # Each input is a command line: one text, a line each (an input read at run time
        # is code only known then).
        known = [v for v in inputs if v is not None]
        lines = [Word("\n".join(known))] if known else []
        return out + lines + ([Word("", dynamic=True)] if None in inputs else [])
    line = join_words(template)
    # The template with each input: past the first few, the inputs stand as run-time ones
    # (the rules then say "may match"), so that many inputs cost one more reading.
    picked = inputs[:_PARALLEL_INPUTS] + ([None] if len(inputs) > _PARALLEL_INPUTS else [])
    for value in dict.fromkeys(picked):
        arg = _RUN_TIME_INPUT if value is None else shlex.quote(value)
        parts = _REPLACEMENT_RE.split(line.value)
        text = arg.join(parts) if len(parts) > 1 else f"{line.value} {arg}"
        out.append(Word(text, line.dynamic))
    return out


_HYPERFINE_SHELL = frozenset({"-p", "--prepare", "-c", "--cleanup", "-s", "--setup", "--conclude"})
_HYPERFINE_VALUED = {
    **dict.fromkeys(
        (
            "-r", "--runs", "-w", "--warmup", "-m", "--min-runs", "-M", "--max-runs",
            "-S", "--shell", "-n", "--command-name", "-u", "--time-unit", "--style",
            "--sort", "-o", "--output", "--input", "-D", "--parameter-step-size",
            "--export-asciidoc", "--export-csv", "--export-json", "--export-markdown",
            "--export-orgmode",
        ),
        1,
    ),
    "-L": 2,
    "--parameter-list": 2,
    "-P": 3,
    "--parameter-scan": 3,
}  # fmt: skip


def hyperfine_commands(words: list[Word]) -> list[Word]:
    """The shell commands hyperfine runs: each operand, and --prepare/--cleanup/--setup."""
    out: list[Word] = []
    i = 1
    while i < len(words):
        v = words[i].value
        opt, eq, val = v.partition("=")
        if opt in _HYPERFINE_SHELL:
            if eq:
                out.append(Word(val, words[i].dynamic))
            elif i + 1 < len(words):
                out.append(words[i + 1])
            i += 1 if eq else 2
            continue
        if opt in _HYPERFINE_VALUED:
            i += 1 if eq else 1 + _HYPERFINE_VALUED[opt]
            continue
        if not v.startswith("-"):
            out.append(words[i])
        i += 1
    return out


def guessed_shells(words: list[Word]) -> list[int]:
    """Where a shell given options stands among the arguments of a program no table knows
    ('pkexec sh -c CMD', 'rlwrap bash --login -c CMD', 'entr', 'direnv exec . sh -c',
    'docker run IMG sh -c'): that program may well run it, and the shell's own reading
    finds the code. A guess: what the rules find there asks, never denies on its own."""
    return [
        k
        for k in range(1, len(words) - 1)
        if not words[k].dynamic
        and program_name(words[k].value) in SHELLS
        and words[k + 1].value.startswith("-")
        and words[k + 1].value not in ("-", "--")
    ]
