"""Options of ordinary tools whose value is a command line, a program or a library the tool
runs: tar's ``-I``/``-F`` in a cluster or old-style letters, ssh's ``-o proxycommand CMD`` (any
case, ``=`` or a space), ``sftp -D CMD``/``-S PROG``, ``zip -qTT CMD``, ``strace -o '|CMD'``,
``make 'x!=CMD'`` and ``$(shell CMD)`` in a command-line variable, ``npm pkg set
scripts.X=CMD``, apt's ``-o APT::Update::Pre-Invoke::=CMD``, ``groff -U``, ``run-parts DIR``,
the compiler drivers' (gcc, clang, c99, cpp, gfortran, ...) ``-wrapper PROG,ARG...``,
``-fplugin=``, ``-B``, ``-specs=``, the programs ``--diff-program`` (sdiff, diff3),
``--strip-program`` (install) and ``--rsh-command`` (tar, cpio, mt) name, and ``env -S``
strings split as env splits them, go's ``-exec``, ``-toolexec`` and ``-vettool``.

Since no table is complete, a program none of them reads gets a general rule: an option
named like one that runs something (``--*-program``, ``--*_prog``, ``-*-command``,
``--exec``, ``--cmd``, ``--*-wrapper``, ``--*-shell``, ``--*-editor``, ``--*-pager``,
``--rsh-comm`` as getopt abbreviates, ...) asks (:func:`_named_runners`).

Pure functions on :class:`Word` lists; :meth:`runtime.policy._shell_code.CodeMixin.option_code`
reads what they return: a command line as shell (a visible ``rm -rf /`` is denied), a program
run with arguments of the tool's as that argv (a written script it names is read, a program
named at run time asks), a program or library it cannot read as an interpreter hazard
(asks). What an attacker controls is every word: a grammar read wrong here must find more,
never less.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import NamedTuple

from runtime.policy._long_options import long_option
from runtime.policy._writes import COMPILER_DRIVER_RE, option_values
from runtime.policy.argv import Word, short_cluster
from runtime.policy.wrappers import HAZARD_ARGS, SHELL_STRING_OPTIONS

__all__ = [
    "COMMAND_OPTIONS",
    "OptionCode",
    "ed_commands",
    "ed_written_files",
    "env_split_string",
    "response_file_words",
    "tool_option_code",
]


class OptionCode(NamedTuple):
    """What a tool's options make it run: command lines (read as shell), reasons a program
    or library it runs cannot be read (interpreter hazards), and files read as its own
    configuration or code (a file the same command writes is then a script it runs)."""

    shell: tuple[Word, ...] = ()
    hazards: tuple[str, ...] = ()
    files: tuple[Word, ...] = ()
    #: Values that may be run as a command line, depending on text this command does not
    #: show (a makefile's recipes): read as a guess, so a deny rule matching them asks.
    guesses: tuple[Word, ...] = ()
    #: Programs run with arguments the tool adds ('gcc -wrapper sh,-c,CMD' runs 'sh -c CMD
    #: cc1 ...', 'sdiff --diff-program=PROG' runs 'PROG ... A B'): each an argv, judged with
    #: the tool's own arguments (only known at run time) after it.
    argvs: tuple[tuple[Word, ...], ...] = ()
    #: Where a response file ('gcc @FILE') stands among the words: the tool reads the
    #: file's words in its place, options included ('-wrapper' on one line, its value on
    #: the next). The first one only: the command read with it spliced in shows the next.
    response: int | None = None


_NONE = OptionCode()

# Long options whose value is a command line the tool runs, for any program, by any prefix
# ('--to-com=CMD'): the option, and what the command follows in its value. Read as shell
# by the walker (runtime.policy._shell_code.CodeMixin.option_code).
COMMAND_OPTIONS = {
    "--checkpoint-action": "exec=",
    "--to-command": "",
    "--use-compress-program": "",
    "--rsh": "",
    "--info-script": "",
    "--new-volume-script": "",
}


def _short_values(
    words: list[Word], valued: str, *, old_style: bool = False
) -> list[tuple[str, Word]]:
    """(letter, value) of each short option in ``valued`` (getopt: '-oV', '-o V', '-vo V';
    the first valued letter of a cluster takes its rest or the next word). With
    ``old_style`` (tar), a first word without '-' is letters whose values are the next words,
    in order ('cIf CMD A.tar'). Long options are skipped, their values unread: a value that
    looks like a cluster is read as one (more found, never less)."""
    out: list[tuple[str, Word]] = []
    pending: list[str] = []
    for k, w in enumerate(words[1:]):
        v = w.value
        if pending:
            out.append((pending.pop(0), w))
            continue
        if v == "--":
            break
        if old_style and k == 0 and v and not v.startswith("-"):
            pending.extend(c for c in v if c in valued)
            continue
        cluster = short_cluster(v)
        if cluster is None:
            continue
        for i, c in enumerate(cluster):
            if c not in valued:
                continue
            if i < len(cluster) - 1:
                out.append((c, w.tail(i + 2)))  # '-I'CMD', '-oProxyCommand=CMD'
            else:
                pending.append(c)
            break
    return out


# GNU tar's short options that take a value; -I (compress program) and -F (info script)
# are command lines tar runs through /bin/sh -c ('--use-compress-program=' and
# '--info-script=' are read by their long names in _shell_code).
_TAR_VALUED = "bCfFgHIKLNTVX"


def _tar(words: list[Word]) -> OptionCode:
    found = [w for c, w in _short_values(words, _TAR_VALUED, old_style=True) if c in "IF"]
    return OptionCode(tuple(found), tuple(f"tar -I/-F runs {w.value!r}" for w in found))


# ssh, scp and sftp: their getopt letters that take a value (OpenSSH 9).
_SSH_VALUED = {
    "ssh": "bceilmopBDEFIJLOPQRSwW",
    "scp": "cDFiJlMoPSX",
    "sftp": "bcDilopsBFJPRSX",
}
# ssh_config keywords (any case) whose value is a command line ssh runs here (ProxyCommand,
# LocalCommand, KnownHostsCommand) or has the remote shell run (RemoteCommand, as 'ssh h
# CMD' is read); and those that load a shared library into ssh.
_SSH_COMMAND_KEYS = frozenset(
    {"proxycommand", "localcommand", "knownhostscommand", "remotecommand"}
)
_SSH_LIBRARY_KEYS = frozenset({"pkcs11provider", "securitykeyprovider"})
# A keyword, quoted or not, then '=' or blanks, as ssh's strdelim() reads a line.
_SSH_LINE_RE = re.compile(r'\s*"?([A-Za-z0-9]+)"?(?:\s*=|\s)(.*)', re.DOTALL)


def _ssh_setting(value: Word) -> tuple[str, Word] | None:
    """(keyword in lower case, value) of an ssh '-o' word ('ProxyCommand=CMD',
    'proxycommand CMD'); its value is the rest of the line, '=' and blanks skipped."""
    m = _SSH_LINE_RE.match(value.value)
    if m is None:
        return None
    rest = m.group(2)
    return m.group(1).lower(), Word(rest.lstrip(" \t="), value.dynamic)


def _ssh(name: str, words: list[Word]) -> OptionCode:
    shells: list[Word] = []
    hazards: list[str] = []
    files: list[Word] = []
    for letter, value in _short_values(words, _SSH_VALUED[name]):
        if letter == "o":
            setting = _ssh_setting(value)
            if setting is None:
                continue
            key, command = setting
            if key in _SSH_COMMAND_KEYS:
                shells.append(command)
            elif key in _SSH_LIBRARY_KEYS:
                hazards.append(f"{name} -o {key} loads a library ({command.value!r})")
        elif letter == "D" and name == "sftp":
            shells.append(value)  # the sftp server command line it starts here
        elif letter == "S" and name in ("scp", "sftp"):
            hazards.append(f"{name} -S runs the program {value.value!r} as its ssh")
        elif letter == "I" and name == "ssh":
            hazards.append(f"ssh -I loads the PKCS#11 library {value.value!r}")
        elif letter == "F":
            files.append(value)  # a config file: its ProxyCommand ... run
    return OptionCode(tuple(shells), tuple(hazards), tuple(files))


def _zip(words: list[Word]) -> OptionCode:
    """zip's unzip command ('-TT CMD', in a cluster '-qTT CMD', '--unzip-command=CMD'):
    zip runs it through system() to test the archive it wrote."""
    found = option_values(tuple(words[1:]), frozenset({"--unzip-command"}), "zip")
    for k, w in enumerate(words[1:], 1):
        cluster = short_cluster(w.value)
        if cluster is None or "TT" not in cluster:
            continue
        rest = cluster[cluster.index("TT") + 2 :]
        if rest:
            found.append(w.tail(len(w.value) - len(rest.lstrip("="))))
        elif k + 1 < len(words):
            found.append(words[k + 1])
    return OptionCode(tuple(found), tuple(f"zip -TT runs {w.value!r}" for w in found))


# strace's getopt letters that take a value (strace 6): '-o |CMD' and '-o !CMD' pipe the
# trace into a command run by /bin/sh -c.
_STRACE_VALUED = "abeEIoOpPsSuUX"


def _strace(words: list[Word]) -> OptionCode:
    outputs = [w for c, w in _short_values(words, _STRACE_VALUED) if c == "o"]
    outputs += option_values(tuple(words[1:]), frozenset({"--output"}), "strace")
    return OptionCode(tuple(w.tail(1) for w in outputs if w.value[:1] in ("|", "!")))


# GNU make's short options that take a value ('j', 'l', 'O' take an optional attached one).
_MAKE_VALUED = "CfIoWE"
_MAKE_OPTIONAL = "jlO"
_MAKE_SHELL_RE = re.compile(r"\$[({]shell[ \t]")
# make functions that read text as makefile code or reach outside make's variables.
_MAKE_CODE_RE = re.compile(r"\$[({](eval|guile|file|load)[ \t]")


def _make_shell_calls(text: str, dynamic: bool) -> list[Word]:
    """The command lines of '$(shell CMD)' / '${shell CMD}' in make text (parentheses
    balanced; unclosed: the rest). make expands CMD first: one holding '$' is only known
    at run time."""
    out: list[Word] = []
    for m in _MAKE_SHELL_RE.finditer(text):
        opener = text[m.start() + 1]
        closer = ")" if opener == "(" else "}"
        depth, k = 1, m.end()
        while k < len(text) and depth:
            depth += {opener: 1, closer: -1}.get(text[k], 0)
            k += 1
        body = text[m.end() : k - 1 if depth == 0 else k]
        out.append(Word(body, dynamic or "$" in body))
    return out


def _make_evals(words: list[Word]) -> list[Word]:
    """The makefile text of 'make -E TEXT', '-sETEXT', '--eval=TEXT' (GNU make 4.4 made
    -E an alias of --eval)."""
    out = option_values(tuple(words[1:]), frozenset({"--eval"}), "make")
    for k, w in enumerate(words[1:], 1):
        cluster = short_cluster(w.value) or ""
        for i, c in enumerate(cluster):
            if c not in _MAKE_VALUED and c not in _MAKE_OPTIONAL:
                continue
            if c == "E" and cluster[i + 1 :]:
                out.append(w.tail(i + 2))
            elif c == "E" and k + 1 < len(words):
                out.append(words[k + 1])
            break
    return out


def _make(words: list[Word]) -> OptionCode:
    """Command-line variables run shell when make reads them: 'x!=CMD' runs CMD at once,
    '$(shell CMD)' when the value is expanded (at once for ':='); '$(eval ...)' and friends
    read text as makefile code. '-E TEXT' is '--eval TEXT': makefile code (asks), its
    '$(shell CMD)' read too."""
    shells: list[Word] = []
    hazards: list[str] = []
    evals = _make_evals(words)
    for text in evals:
        hazards.append(f"make --eval reads {text.value!r} as makefile code")
        shells.extend(_make_shell_calls(text.value, text.dynamic))
    guesses: list[Word] = []
    for w in words[1:]:
        v = w.value
        if v.startswith("-") or "=" not in v or any(w is e for e in evals):
            continue
        name, _, value = v.partition("=")
        if name.rstrip().endswith("!"):
            shells.append(Word(value, w.dynamic or "$" in value))
        elif "$" not in value:
            # A recipe that names the variable runs its value ('$(CC) -c x.c' with
            # CC='rm -rf / #'): which recipes do is in the makefile, so a guess. A value
            # with '$' is make's to expand first (its '$(shell)' is read above).
            guesses.append(Word(value, w.dynamic))
        shells.extend(_make_shell_calls(value, w.dynamic))
        if _MAKE_CODE_RE.search(value):
            hazards.append(f"make variable {name.strip()!r} calls a make function that runs code")
    return OptionCode(tuple(shells), tuple(hazards), guesses=tuple(guesses))


def _package_set(name: str, words: list[Word]) -> OptionCode:
    """'npm pkg set scripts.X=CMD' ('scripts[X]=', '--json scripts={...}') and npm 7's
    'set-script X CMD': a script stored for a later 'npm run', read as shell now."""
    operands = [w for w in words[1:] if not w.value.startswith("-")]
    values = [w.value for w in operands]
    if "set-script" in values[:-2]:
        return OptionCode((operands[values.index("set-script") + 2],))
    at = next((k for k in range(len(values) - 1) if values[k : k + 2] == ["pkg", "set"]), None)
    if at is None:
        return _NONE
    as_json = any(long_option(w.value, ("--json",), name) for w in words[1:])
    shells: list[Word] = []
    for w in operands[at + 2 :]:
        key, eq, _ = w.value.partition("=")
        key = key.lower()
        if eq and key.startswith("scripts"):
            shells.extend(_script_values(key, w.tail(len(key) + 1), as_json))
    return OptionCode(tuple(shells))


def _script_values(key: str, value: Word, as_json: bool) -> list[Word]:
    """The command lines a 'pkg set' of ``key`` stores: its value, or with --json the
    strings in it (a JSON value not read is kept whole, as shell)."""
    if not as_json or value.dynamic:
        return [value] if key != "scripts" else []
    try:
        data = json.loads(value.value)
    except (ValueError, RecursionError):  # nested past json's stack: not read, kept whole
        return [value]
    if isinstance(data, str):
        return [Word(data)]
    if isinstance(data, dict):
        return [Word(v) for v in data.values() if isinstance(v, str)]
    return []


# apt configuration keys (any case, '::' list suffix dropped) whose value is a command line
# apt runs through sh -c (DPkg::Pre-Invoke, APT::Update::Post-Invoke-Success,
# DPkg::Pre-Install-Pkgs ...), and keys that point apt at programs, options or
# configuration it then runs or reads.
_APT_COMMAND_KEYS = ("*::pre-invoke*", "*::post-invoke*", "*::pre-install-pkgs")
_APT_CODE_KEYS = (
    "dir::bin::*", "dir::etc*", "dpkg::options*", "dpkg::tools*", "*::proxy-auto-detect",
    "dpkg::path", "apt::key::*",
)  # fmt: skip


def _apt(words: list[Word]) -> OptionCode:
    """'apt-get -o KEY=VALUE' ('-oKEY=V', '--option KEY=V'); '-c FILE' names a
    configuration file (its hooks are read when this command writes it)."""
    settings = [w for c, w in _short_values(words, "oc") if c == "o"]
    settings += option_values(tuple(words[1:]), frozenset({"--option"}), "apt")
    files = [w for c, w in _short_values(words, "oc") if c == "c"]
    files += option_values(tuple(words[1:]), frozenset({"--config-file"}), "apt")
    shells: list[Word] = []
    hazards: list[str] = []
    for w in settings:
        key, eq, _ = w.value.partition("=")
        key = key.strip().lower().rstrip(":")
        if not eq:
            continue
        value = w.tail(w.value.index("=") + 1)
        if any(fnmatchcase(key, p) for p in _APT_COMMAND_KEYS):
            shells.append(value)
        elif any(fnmatchcase(key, p) for p in _APT_CODE_KEYS) or (w.dynamic and "$" in key):
            hazards.append(f"apt -o {key} points apt at code it runs")
    return OptionCode(tuple(shells), tuple(hazards), tuple(files))


# groff and its front ends: the letters that take a value; '-U' (unsafe mode) lets the
# input's '.sy', '.pso', '.pi' and '.open' requests run shell commands and write files.
_GROFF_VALUED = "dDfFIKLmMnoPrTwW"


def _groff(name: str, words: list[Word]) -> OptionCode:
    for w in words[1:]:
        cluster = short_cluster(w.value) or ""
        for c in cluster:
            if c == "U":
                return OptionCode(hazards=(f"{name} -U lets its input run shell commands",))
            if c in _GROFF_VALUED:
                break
    return _NONE


def _run_parts(words: list[Word]) -> OptionCode:
    """run-parts runs every program in its directory, none of which is shown: asks, unless
    it only lists them (--test, --list)."""
    if any(long_option(w.value, ("--test", "--list"), "run-parts") for w in words[1:]):
        return _NONE
    return OptionCode(hazards=("run-parts runs every program in a directory",))


# Their options that load a library or make the driver find its programs elsewhere
# (attached, '=' or the next word): a plugin, a program prefix, a specs file (which names
# the programs run), a linker by path.
# clang's '--config FILE' reads options as '@FILE' does, and the config directories name
# where it finds the files it reads by default ('clang.cfg').
_COMPILER_CODE = (
    "-fplugin", "-fpass-plugin", "-specs", "--specs", "--prefix", "--ld-path", "--config",
    "--config-user-dir", "--config-system-dir",
)  # fmt: skip


def _comma_argv(value: Word) -> tuple[Word, ...]:
    """'-wrapper sh,-c,CMD' as the argv the driver runs: the value split on commas."""
    return tuple(Word(part, value.dynamic) for part in value.value.split(","))


def _compiler(name: str, words: list[Word]) -> OptionCode:
    """gcc's and clang's '-wrapper PROG,ARG,...' (every subprogram is run as 'PROG ARG ...
    cc1 ...'): an argv. '-fplugin=X.so', '-B PREFIX', '-specs=FILE', '-fuse-ld=PATH',
    '-Xclang -load', '-Wl,-plugin,X', '--config FILE': a library, program or options that
    cannot be read (asks). '@FILE' (any word, a value too: the driver expands response
    files before it reads an option) is read by the walker (:attr:`OptionCode.response`)."""
    argvs: list[tuple[Word, ...]] = []
    hazards: list[str] = []
    response: int | None = None
    for k, w in enumerate(words[1:], 1):
        v = w.value
        after = words[k + 1] if k + 1 < len(words) else None
        if v.startswith("@") and len(v) > 1 and response is None:
            response = k
        if v in ("-wrapper", "--wrapper") and after is not None:
            argvs.append(_comma_argv(after))
        elif (
            v.startswith("-B")
            or (v.startswith("-fuse-ld=") and "/" in v)
            or any(v == o or v.startswith(o + "=") for o in _COMPILER_CODE)
        ):
            hazards.append(f"{name} {v} runs a program or library it names")
        elif v == "-Xclang" and after is not None and after.value.startswith("-load"):
            hazards.append(f"{name} -Xclang {after.value} loads a library")
        elif (v.startswith("-Wl,") and "plugin" in v) or (
            v == "-Xlinker" and after is not None and "plugin" in after.value
        ):
            hazards.append(f"{name} {v} gives the linker a plugin")
    return OptionCode(hazards=tuple(hazards), argvs=tuple(argvs), response=response)


def response_file_words(text: str) -> list[list[str]]:
    """The words a compiler driver reads from a response file (libiberty's buildargv:
    blanks separate outside quotes, quotes are removed), as each GCC splits it: up to
    GCC 12 a backslash quotes the next character everywhere, from GCC 13 as the shell's
    does (not in single quotes; in double quotes only before '$', '`', '"', '\\' or a
    newline). Both readings, when they differ: which GCC runs is not known here."""
    readings: list[list[str]] = []
    for posix in (False, True):
        words = _buildargv(text, posix=posix)
        if words not in readings:
            readings.append(words)
    return readings


def _buildargv(text: str, *, posix: bool) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        arg: list[str] = []
        squote = dquote = bsquote = False
        while i < len(text):
            c = text[i]
            if c.isspace() and not (squote or dquote or bsquote):
                break
            if bsquote:
                bsquote = False
                if not posix or c != "\n":
                    arg.append(c)
            elif c == "\\" and (
                not posix or (not squote and (not dquote or text[i + 1 : i + 2] in '$`"\\\n'))
            ):
                bsquote = True
            elif squote:
                squote = c != "'"
                if squote:
                    arg.append(c)
            elif dquote:
                dquote = c != '"'
                if dquote:
                    arg.append(c)
            elif c == "'":
                squote = True
            elif c == '"':
                dquote = True
            else:
                arg.append(c)
            i += 1
        out.append("".join(arg))
    return out


# program -> its long options whose value is a program it runs with arguments of its own
# (execvp, no shell): the files sdiff and diff3 compare, install's file to strip, tar's
# and cpio's remote host ('--rsh-command=ssh' runs 'ssh HOST /etc/rmt').
_PROGRAM_OPTIONS: dict[str, frozenset[str]] = {
    "sdiff": frozenset({"--diff-program"}),
    "diff3": frozenset({"--diff-program"}),
    "install": frozenset({"--strip-program"}),
    "tar": frozenset({"--rsh-command", "--rmt-command"}),
    "cpio": frozenset({"--rsh-command", "--rmt-command"}),
    "mt": frozenset({"--rsh-command", "--rmt-command"}),
}

# go's build flags whose value is a program it runs (any subcommand; '-f', '--f', '=' or
# the next word): '-exec' runs 'PROG ARGS a.out ...' and '-toolexec' 'PROG ARGS asm ...'
# (both split into quoted fields), '-vettool' is one program.
_GO_SPLIT = frozenset({"exec", "toolexec"})
_GO_PROGRAM = frozenset({"vettool"})
# Variables 'go env -w' stores for every later go command: the programs cgo runs.
_GO_PROGRAM_ENV = frozenset({"CC", "CXX", "FC", "AR", "PKG_CONFIG"})


def _go_fields(value: Word) -> tuple[Word, ...]:
    """A go flag's value as the argv go runs (cmd/internal/quoted.Split: blanks separate,
    single or double quotes group, no escapes)."""
    out: list[Word] = []
    for m in re.finditer(r"""'([^']*)'?|"([^"]*)"?|(\S+)""", value.value):
        out.append(Word(next(g for g in m.groups() if g is not None), value.dynamic))
    return tuple(out) or (value,)


def _go(words: list[Word]) -> OptionCode:
    """'go test -exec PROG', 'go build -toolexec PROG', 'go vet -vettool=PROG': the program
    go runs with arguments of its own (an argv, as gcc's '-wrapper'). 'go env -w
    GOFLAGS=...' stores flags for every later go command (read as these are), and
    'go env -w CC=...' the compiler cgo runs (asks)."""
    argvs: list[tuple[Word, ...]] = []
    hazards: list[str] = []
    stored = "env" in [w.value for w in words[1:3]] and any(w.value == "-w" for w in words)
    for k, w in enumerate(words[1:], 1):
        v = w.value
        if stored and "=" in v and not v.startswith("-"):
            key, _, setting = v.partition("=")
            if key == "GOFLAGS":
                flags = [Word(f, w.dynamic) for f in setting.split()]
                found = _go([words[0], *flags])
                argvs += found.argvs
                hazards += found.hazards
            elif key in _GO_PROGRAM_ENV or (w.dynamic and "$" in key):
                hazards.append(f"go env -w {key} names a program later go commands run")
            continue
        if not v.startswith("-") or v in ("-", "--"):
            continue
        name, eq, attached = v.lstrip("-").partition("=")
        if name not in _GO_SPLIT | _GO_PROGRAM:
            continue
        value = Word(attached, w.dynamic) if eq else words[k + 1] if k + 1 < len(words) else None
        if value is None:
            continue
        argvs.append(_go_fields(value) if name in _GO_SPLIT else (value,))
    return OptionCode(hazards=tuple(hazards), argvs=tuple(argvs))


# The general rule's words: an option's name (after '-' or '--', '-'/'_' separating its
# parts) whose last part is one of these runs what it names ('--diff-program',
# '--diff_prog', '-pre-command', '--exec', '--cmd'); 'tool' only after another part
# ('--merge-tool', not valgrind's '--tool').
_RUNNER_WORDS = frozenset(
    {"program", "prog", "command", "cmd", "wrapper", "shell", "editor", "pager", "exec",
     "hook", "askpass"}
)  # fmt: skip
_RUNNER_TAILS = frozenset({"tool"})
# A last part that is the start of one of them, as getopt_long takes an abbreviation
# ('--diff-progr', '--rsh-comm'): four letters at least, and not the everyday words
# '--edit', '--page 2', 'base64 --wrap=0'.
_RUNNER_PARTIAL_MIN = 4
_NOT_PARTIALS = frozenset({"edit", "page", "wrap"})
# Written as one word with no separator ('-toolexec', '--vettool', '--rshcommand').
_RUNNER_SUFFIXES = ("exec", "command", "program", "cmd", "wrapper", "tool")
_NEGATIONS = ("no-", "no_", "without-", "without_", "disable-", "disable_")
# Programs whose long options a reader of the walker already knows: their own table here,
# the option tables (runtime/policy/wrappers.py), and the tools with a grammar of their own
# (runtime/policy/_shell_code.py, _tool_commands.py, _gdb.py).
_READ_ELSEWHERE = frozenset(
    {"git", "parallel", "hyperfine", "tmux", "nix", "gdb", "find"}
    | HAZARD_ARGS.keys()
    | SHELL_STRING_OPTIONS.keys()
)


def _runs_named(option: str) -> bool:
    """Whether an option name (no dashes, lower case) is named as one that runs what its
    value names (:data:`_RUNNER_WORDS`)."""
    parts = [p for p in re.split(r"[-_]+", option) if p]
    if not parts or option.startswith(_NEGATIONS):
        return False
    last = parts[-1]
    if last in _RUNNER_WORDS or (last in _RUNNER_TAILS and len(parts) > 1):
        return True
    if (
        len(last) >= _RUNNER_PARTIAL_MIN
        and last not in _NOT_PARTIALS
        and any(r.startswith(last) for r in _RUNNER_WORDS)
    ):
        return True
    return any(
        last.endswith(s) and len(last) > len(s) and not last.startswith("no")
        for s in _RUNNER_SUFFIXES
    )


def _named_runners(name: str, words: list[Word]) -> OptionCode:
    """For a program no table reads: each option named as one that runs a program or a
    command line (:func:`_runs_named`: '--diff-program=P', '--diff_prog P', '-pre-command
    P', '--exec=C', '--cmd C', '--rsh-comm P'), in any case, asks; what it runs, and how
    its value is given, is that program's own grammar. A single-dash word is read as a
    name when it is longer than one letter ('-exec': a cluster of letters that spells one
    is rare). Options read as shell for every program (:data:`COMMAND_OPTIONS`) and
    negations ('--no-pager') are not. A shorter abbreviation ('--diff-p') or a name no
    part of which says it runs something cannot be known without the program's table."""
    hazards: list[str] = []
    for w in words[1:]:
        v = w.value
        if v == "--":
            break
        if not v.startswith("-") or long_option(v, COMMAND_OPTIONS, name):
            continue
        option = v.lstrip("-").split("=", 1)[0].lower()
        if len(option) > 1 and _runs_named(option):
            hazards.append(f"{name} {v.split('=', 1)[0]} may run a program or command line")
    return OptionCode(hazards=tuple(hazards))


_TOOLS: dict[str, Callable[[str, list[Word]], OptionCode]] = {
    "tar": lambda _, words: _tar(words),
    "ssh": _ssh,
    "scp": _ssh,
    "sftp": _ssh,
    "zip": lambda _, words: _zip(words),
    "strace": lambda _, words: _strace(words),
    "make": lambda _, words: _make(words),
    "gmake": lambda _, words: _make(words),
    "npm": _package_set,
    "pnpm": _package_set,
    **dict.fromkeys(
        ("apt", "apt-get", "apt-cache", "apt-mark", "apt-config", "aptitude"),
        lambda _, words: _apt(words),
    ),
    **dict.fromkeys(("groff", "troff", "nroff"), _groff),
    "run-parts": lambda _, words: _run_parts(words),
    "go": lambda _, words: _go(words),
}


def tool_option_code(name: str, words: list[Word]) -> OptionCode:
    """What ``name``'s options among ``words`` (the program first) make it run: its own
    reader's findings and the programs its :data:`_PROGRAM_OPTIONS` name; a program with
    neither, nor another reader, gets the general rule (:func:`_named_runners`)."""
    reader = _TOOLS.get(name)
    if reader is None and COMPILER_DRIVER_RE.fullmatch(name):
        reader = _compiler
    programs = _PROGRAM_OPTIONS.get(name)
    if reader is None and programs is None:
        return _NONE if name in _READ_ELSEWHERE else _named_runners(name, words)
    found = _NONE if reader is None else reader(name, words)
    if programs is not None:
        values = option_values(tuple(words[1:]), programs, name)
        found = found._replace(argvs=found.argvs + tuple((v,) for v in values))
    return found


def _ed_operands(words: list[Word]) -> list[Word]:
    """ed's (and red's) operands: the words that are not options ('-p PROMPT' and
    '--prompt PROMPT' take the next word; getopt permutes, so an operand may come first;
    after '--' every word is one)."""
    out: list[Word] = []
    skip = ended = False
    for w in words[1:]:
        v = w.value
        if skip:  # the prompt of '-p PROMPT', '--prompt PROMPT'
            skip = False
        elif not ended and v == "--":
            ended = True
        elif not ended and v.startswith("-") and v != "-":
            prompt = long_option(v, ("--prompt",), "ed") is not None and "=" not in v
            skip = prompt or (short_cluster(v) or "").endswith("p")
        else:
            out.append(w)
    return out


def ed_commands(words: list[Word], stdin_text: str | None) -> list[Word]:
    """The command lines ed runs. A file operand '!CMD' reads what CMD prints; among its
    commands (a literal input), '!CMD', 'r !CMD', 'w !CMD', 'e !CMD' run CMD: the text
    after a line's first '!' is read as shell (a '!' in inserted text is read too, and
    '-r' is not trusted to forbid it: more found, never less)."""
    out = [w.tail(1) for w in _ed_operands(words) if w.value.startswith("!")]
    for line in (stdin_text or "").split("\n"):
        if "!" in line:
            out.append(Word(line[line.index("!") + 1 :]))
    return out


# An ed address: line numbers, '.', '$', ',', ';', offsets, marks ("'a"), '/re/', '?re?'.
_ED_ADDRESS = r"(?:[0-9.$,;+\-\s]|'[a-z]|/(?:[^/\\]|\\.)*/|\?(?:[^?\\]|\\.)*\?)*"
# 'g/re/', 'v/re/', 'G/re/', 'V/re/' before the command they run on each line they match
# (any character but a blank delimits the expression): stripped, the command is read.
_ED_GLOBAL_RE = re.compile(r"\s*" + _ED_ADDRESS + r"[gvGV]([^\s\\])(?:(?!\1)[^\\]|\\.)*\1")
# A command that writes: 'w', 'wq' or 'W' (append) and a file name, or none (the default
# file name); '!' after it is a command line, no file.
_ED_WRITE_RE = re.compile(r"\s*" + _ED_ADDRESS + r"(?:wq|w|W)[ \t]*(.*)")
# Commands that set the default file name ('f FILE', 'e FILE', 'E FILE' always; 'r FILE'
# when there is none yet). They take no address.
_ED_NAME_RE = re.compile(r"\s*([feEr])[ \t]*([^!\s].*)")


def _ed_command(line: str) -> str:
    """An ed command line without the global commands' 'g/re/' before it."""
    while (m := _ED_GLOBAL_RE.match(line)) is not None and m.end() > 0:
        line = line[m.end() :]
    return line


def ed_written_files(words: list[Word], stdin_text: str | None) -> list[Word]:
    """The files ed's commands (a literal input) write: 'w FILE', '1,5W FILE', 'wq FILE',
    'g/re/w FILE' (and v, G, V), and with no file name the default one: the operand, or
    a name 'f FILE', 'e FILE', 'E FILE' (or 'r FILE' when there was none) set before
    (':set' in ed's words). Every line is read as a command, a line of inserted text too,
    and every name set before a 'w' may be the one it writes (more found, never less)."""
    out: list[Word] = []
    names = [w for w in _ed_operands(words)[:1] if not w.value.startswith("!")]
    for line in (stdin_text or "").split("\n"):
        command = _ed_command(line)
        written = _ED_WRITE_RE.fullmatch(command)
        if written is not None:
            name = written.group(1).rstrip()
            if not name:
                out.extend(w for w in names if w not in out)
            elif not name.startswith("!"):
                out.append(Word(name))
                if not names:
                    names.append(Word(name))
            continue
        named = _ED_NAME_RE.fullmatch(command)
        if named is not None and (named.group(1) != "r" or not names):
            names.append(Word(named.group(2).rstrip()))
    return out


# env -S: the escapes it reads, outside quotes and inside double quotes.
_ENV_ESCAPES = {"f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ENV_BLANKS = " \t\n\v\f\r"


def env_split_string(word: Word) -> Word:
    """An 'env -S' string as the command line env makes of it (coreutils' split): blanks
    separate outside quotes, '\\_' is a separator there (a space in double quotes), '\\t',
    '\\n' ... are those characters, '\\c' ends the string, a word starting with '#' is a
    comment, '${NAME}' is a variable's value (only known at run time). The words are
    quoted for the shell, so that the walker reads what env runs. A string env refuses is
    kept as it was."""
    if word.dynamic:
        return word
    try:
        args, expands = _env_split(word.value)
    except ValueError:
        return word
    return Word(shlex.join(args), expands)


def _add(cur: list[str] | None, c: str) -> list[str]:
    """The word being built, with ``c`` added (a quote starts a word, even an empty one)."""
    if cur is None:
        cur = []
    cur.append(c)
    return cur


def _env_split(text: str) -> tuple[list[str], bool]:
    args: list[str] = []
    cur: list[str] | None = None
    quote = ""
    expands = False
    i = 0
    while i < len(text):
        c = text[i]
        i += 1
        if quote == "'" and c != "'" and not (c == "\\" and text[i : i + 1] in ("\\", "'")):
            cur = _add(cur, c)
            continue
        if c == quote:
            quote = ""
            continue
        if not quote and c in "'\"":
            quote = c
            cur = _add(cur, "")
            continue
        if not quote and c in _ENV_BLANKS:
            if cur is not None:
                args.append("".join(cur))
            cur = None
            continue
        if not quote and c == "#" and cur is None:
            break
        if c == "\\":
            if i >= len(text):
                raise ValueError("trailing backslash")
            e = text[i]
            i += 1
            if e == "_" and not quote:
                if cur is not None:
                    args.append("".join(cur))
                cur = None
                continue
            if e == "c" and not quote:
                break
            if e in _ENV_ESCAPES:
                c = _ENV_ESCAPES[e]
            elif e == "_":
                c = " "
            elif e in "\"#$'\\":
                c = e
            else:
                raise ValueError(f"invalid escape \\{e}")
        elif c == "$" and quote != "'" and text[i : i + 1] == "{":
            expands = True
        cur = _add(cur, c)
    if quote:
        raise ValueError("unterminated quote")
    if cur is not None:
        args.append("".join(cur))
    return args, expands
