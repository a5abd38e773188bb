"""Code carried inside ordinary commands: where awk, sed, git and environment variables
hold a program, and what a command writes into a file that the same command then runs.

Pure functions on :class:`Word` lists; :mod:`runtime.policy.shell` drives them. What an
attacker controls is every word. Each function finds code or reports that it cannot, and
the walker maps "cannot" to a hazard (ask or deny), never to allow.
"""

from __future__ import annotations

import json
import posixpath
import re
from fnmatch import fnmatchcase

from runtime.policy._long_options import long_option, long_option_value
from runtime.policy.argv import Word, short_cluster
from runtime.policy.wrappers import CODE_VALUED, COMMAND_ENV

__all__ = [
    "MAKEFILE_NAMES",
    "PACKAGE_SCRIPT_RUNNERS",
    "awk_programs",
    "awk_runs_commands",
    "capsh_shell_args",
    "command_env_values",
    "daemon_argv",
    "env_chdir",
    "git_commands",
    "git_config_setting",
    "git_shell_options",
    "interpreter_value_options",
    "is_stream_path",
    "make_files",
    "make_reads_input",
    "option_env",
    "package_script_names",
    "package_scripts",
    "preload_values",
    "program_text_runs",
    "script_key",
    "sed_runs_commands",
    "sed_script_files",
    "written_by_args",
    "written_content",
    "xargs_replace",
]

# A path naming a stream the program is fed on: reading a script from it is reading the
# command's input ('sh /dev/stdin <<< CODE', 'curl .. | bash /dev/fd/0').
_STREAM_RE = re.compile(r"^/+(dev/+(stdin|fd/+\d+)|proc/+(self|thread-self|\d+)/+fd/+\d+)/*$")

# sed's 'e' command (run the pattern space or the rest of the line as a command), wherever
# a command may start: line start, after ';', '{', '}', blanks, or an address ('1e',
# '$!e', '/re/e', '1~2e', '\%x%e'). Not preceded by a letter, '-', '\' or '.', so that
# option words ('-e') and words inside text ('the', 'foo.e') are not read as commands.
_SED_E_RE = re.compile(r"(?<![A-Za-z_\-\\.])e(\s|$|;|\})")
# The 's' command's 'e' flag: 's/x/cmd/e'.
_SED_S_E_RE = re.compile(r"s(.).*\1.*\1[gpiImM0-9w]*e")

_AWK_VALUED = frozenset(
    {"-v", "-F", "--assign", "--field-separator", "-i", "--include", "-l", "--load", "-E"}
)
_AWK_FILE = frozenset({"-f", "--file", "-E", "--exec"})
_AWK_SOURCE = frozenset({"-e", "--source"})
_AWK_RUNS = re.compile(r"system|\||getline|@load")
_SED_LONG_VALUED = ("--expression", "--file", "--line-length")
_AWK_LONG = frozenset(o for o in _AWK_VALUED | _AWK_FILE | _AWK_SOURCE if o.startswith("--"))

_GIT_CONFIG_VALUED = frozenset(
    {"-f", "--file", "--blob", "--type", "--default", "--comment", "--value", "--fixed-value"}
)
_GIT_CONFIG_SUBCOMMANDS = frozenset({"set", "add"})

# printf escapes that stand for one known character ('\\\\' kept apart as NUL until the
# check for any other backslash is done).
_PRINTF_PLAIN = {"\\n": "\n", "\\t": "\t", "\\\\": "\x00"}
_PRINTF_PLAIN_RE = re.compile(r"\\[nt\\]")


def is_stream_path(value: str) -> bool:
    """'/dev/stdin', '/dev/fd/0', '/proc/self/fd/0': a script read from a stream."""
    return bool(_STREAM_RE.match(value))


def sed_runs_commands(words: list[Word]) -> bool:
    """Whether a sed command line may run commands ('e' command or 's///e')."""
    return program_text_runs("sed", " ".join(w.value for w in words[1:]))


def sed_script_files(words: list[Word]) -> list[Word]:
    """The files a sed command line reads its script from: '-f FILE', '-fFILE', '-nf
    FILE', '--file=FILE' and its prefixes. GNU sed reads options among its operands, up to
    '--'. In a cluster, 'e', 'f' and 'l' take the rest or the next word; 'i' takes an
    attached suffix ('-if' is a suffix 'f', no file)."""
    out: list[Word] = []
    i = 1
    while i < len(words):
        w = words[i]
        v = w.value
        if v == "--":
            break
        if v.startswith("--"):
            opt = long_option(v, _SED_LONG_VALUED, "sed")
            if opt is not None and "=" not in v:
                if opt == "--file" and i + 1 < len(words):
                    out.append(words[i + 1])
                i += 2
                continue
            if opt == "--file":
                out.append(w.tail(v.index("=") + 1))
        elif (cluster := short_cluster(v)) is not None:
            for k, letter in enumerate(cluster):
                if letter == "i":
                    break
                if letter in "efl":
                    if k == len(cluster) - 1:
                        if letter == "f" and i + 1 < len(words):
                            out.append(words[i + 1])
                        i += 1
                    elif letter == "f":
                        out.append(w.tail(k + 2))
                    break
        i += 1
    return out


def program_text_runs(program: str, text: str) -> bool:
    """Whether awk or sed program ``text`` (read from a file or the input) may run
    commands."""
    if program == "sed":
        return bool(_SED_E_RE.search(text) or _SED_S_E_RE.search(text))
    return _AWK_RUNS.search(text) is not None


def awk_programs(words: list[Word]) -> tuple[list[str], list[Word]]:
    """(program texts, the files the program is read from) of an awk command line.

    The program is the first operand after the options and their values: '-v x=1 PROG',
    '-F : PROG'; '-e'/'--source' give program text; '-f FILE' means no operand program.
    """
    texts: list[str] = []
    files: list[Word] = []
    i = 1
    while i < len(words):
        v = words[i].value
        if v == "--":
            if not texts and not files and i + 1 < len(words):
                texts.append(words[i + 1].value)
            break
        opt = long_option(v, _AWK_LONG, "gawk") or v.split("=", 1)[0]
        if opt in _AWK_SOURCE:
            if "=" in v:
                texts.append(v.split("=", 1)[1])
            elif i + 1 < len(words):
                texts.append(words[i + 1].value)
            i += 1 if "=" in v else 2
            continue
        if opt in _AWK_FILE:
            if "=" in v:
                files.append(words[i].tail(v.index("=") + 1))
            elif i + 1 < len(words):
                files.append(words[i + 1])
        if opt in _AWK_VALUED or opt in _AWK_FILE:
            i += 1 if "=" in v else 2
            continue
        if v.startswith("-") and len(v) > 1:
            if v[:2] in ("-e",) and len(v) > 2:
                texts.append(v[2:])
            elif v[:2] == "-f":
                files.append(words[i].tail(2))
            i += 1
            continue
        if not texts and not files:
            texts.append(v)
        break
    return texts, files


def awk_runs_commands(words: list[Word]) -> bool:
    texts, _ = awk_programs(words)
    return any(program_text_runs("awk", t) for t in texts)


def interpreter_value_options(name: str) -> frozenset[str]:
    """Options of interpreter ``name`` that take a separate value ('python3 -W ignore')."""
    for glob, opts in CODE_VALUED.items():
        if fnmatchcase(name, glob):
            return opts
    return frozenset()


#: Interpreters' options that load a module or file before the program ('node -r X').
_PRELOAD_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "node": (
        frozenset({"-r"}),
        frozenset({"--require", "--import", "--loader", "--experimental-loader"}),
    ),
}
_PRELOAD_OPTIONS["nodejs"] = _PRELOAD_OPTIONS["node"]


def preload_values(name: str, words: list[Word]) -> list[Word]:
    """The modules or files ``name``'s preload options among ``words`` (the program
    first) name, before its script: '-r X', '--require X', '--import=X'."""
    spec = _PRELOAD_OPTIONS.get(name)
    if spec is None:
        return []
    shorts, longs = spec
    out: list[Word] = []
    for k, w in enumerate(words[1:], 1):
        v = w.value
        if not v.startswith("-") or v == "-":
            break  # the script: what follows is its own arguments
        # node reads its long options whole (no abbreviations): the exact name.
        opt, eq, attached = v.partition("=")
        if opt in longs and eq:
            out.append(Word(attached, w.dynamic))
        elif (v in shorts or v in longs) and k + 1 < len(words):
            out.append(words[k + 1])
    return out


def command_env_values(words: list[Word]) -> list[Word]:
    """Values of NAME=VALUE words whose NAME a program runs as a shell command."""
    out: list[Word] = []
    for w in words:
        name, eq, value = w.value.partition("=")
        if eq and name.rstrip("+") in COMMAND_ENV:
            out.append(Word(value, w.dynamic))
    return out


# Wrapper options whose value is NAME=VALUE for the program it runs: judged as
# 'NAME=VALUE program' ('systemd-run -E LD_PRELOAD=x.so ls').
_ENV_OPTIONS: dict[str, frozenset[str]] = {
    "systemd-run": frozenset({"-E", "--setenv"}),
    "run0": frozenset({"--setenv"}),
}


# Programs' options whose value becomes a variable of the programs they run: npm (and npx,
# which is 'npm exec') hands its node-options setting to its scripts as NODE_OPTIONS. npm's
# option parser (nopt) reads them anywhere before '--', by any unique prefix.
_VARIABLE_OPTIONS: dict[str, dict[str, str]] = {
    "npm": {"--node-options": "NODE_OPTIONS"},
    "npx": {"--node-options": "NODE_OPTIONS"},
}


def option_env(name: str, words: list[Word]) -> list[Word]:
    """The NAME=VALUE words :data:`_ENV_OPTIONS` gives ``name`` among ``words`` (its
    options): '-E N=V', '-EN=V', '--setenv N=V', '--setenv=N=V'; and those
    :data:`_VARIABLE_OPTIONS` stand for ('npm --node-options V' is 'NODE_OPTIONS=V')."""
    variables = _VARIABLE_OPTIONS.get(name)
    if variables:
        return _variable_options(name, words, variables)
    opts = _ENV_OPTIONS.get(name)
    if not opts:
        return []
    out: list[Word] = []
    for k, w in enumerate(words):
        v = w.value
        if (v in opts or (long_option(v, opts, name) and "=" not in v)) and k + 1 < len(words):
            out.append(words[k + 1])
            continue
        attached = long_option_value(v, opts, name)  # '--setenv=N=V', '--set=N=V'
        if attached is not None:
            out.append(Word(attached, w.dynamic))
            continue
        for opt in opts:
            if not opt.startswith("--") and v.startswith(opt) and len(v) > len(opt):
                out.append(Word(v[len(opt) :], w.dynamic))
    return [w for w in out if "=" in w.value or w.dynamic]


def _variable_options(name: str, words: list[Word], variables: dict[str, str]) -> list[Word]:
    out: list[Word] = []
    for k, w in enumerate(words):
        if w.value == "--":
            break
        opt = long_option(w.value, variables, name)
        if opt is None:
            continue
        if "=" in w.value:
            out.append(Word(f"{variables[opt]}={w.value.split('=', 1)[1]}", w.dynamic))
        elif k + 1 < len(words):
            value = words[k + 1]
            out.append(Word(f"{variables[opt]}={value.value}", value.dynamic))
    return out


def git_config_setting(words: list[Word]) -> tuple[str, Word] | None:
    """(key in lower case, value) that 'git config [options] [set|add] KEY VALUE' sets."""
    values = [w.value for w in words]
    try:
        i = values.index("config") + 1
    except ValueError:
        return None
    seen_sub = False
    while i < len(words):
        v = values[i]
        if v in _GIT_CONFIG_VALUED or (
            "=" not in v and long_option(v, _GIT_CONFIG_VALUED, "git") is not None
        ):
            i += 2
            continue
        if v.startswith("-"):
            i += 1
            continue
        if v in _GIT_CONFIG_SUBCOMMANDS and not seen_sub:
            seen_sub = True
            i += 1
            continue
        break
    if i + 1 >= len(words):
        return None
    return values[i].lower(), words[i + 1]


def script_key(path: str) -> str:
    """What a script path is compared by: its base name ('./a.sh', 'x/../a.sh' -> 'a.sh').
    Base names, not whole paths: a 'cd' between the write and the run moves the directory,
    and a false match only makes the walker look harder."""
    return posixpath.basename(posixpath.normpath(path))


def written_content(program: str, args: list[Word], stdin_text: str | None) -> str | None:
    """What ``program args`` writes to its standard output, when it is literal in the
    command itself (echo, printf without escapes or formats, cat/tee of a here-document);
    None when it is not known before the command runs."""
    if any(w.dynamic for w in args):
        return None
    if program == "echo":
        words = [w.value for w in args]
        while words and words[0] in ("-n", "-e", "-E"):
            words.pop(0)
        text = " ".join(words)
        # dash's echo always reads backslash escapes ('\0155' is 'm'): not literal.
        return None if "\\" in text else text
    if program == "printf":
        if len(args) != 1 or "%" in args[0].value:
            return None
        # Only the plain escapes: any other backslash (octal '\\155') may spell anything.
        text = _PRINTF_PLAIN_RE.sub(lambda m: _PRINTF_PLAIN[m.group(0)], args[0].value)
        return None if "\\" in text.replace("\x00", "") else text.replace("\x00", "\\")
    if program in ("cat", "tee") and stdin_text is not None:
        return stdin_text
    return None


def written_by_args(program: str, args: list[Word]) -> list[str]:
    """Files a download writes its body to, named in its arguments ('curl -o F',
    'wget -O F'): their content is only known once the command runs."""
    out: list[str] = []
    values = [w.value for w in args if not w.dynamic]
    if program in ("curl", "wget", "aria2c", "http", "xh"):
        flags = {"curl": ("-o", "--output"), "wget": ("-O", "--output-document")}.get(
            program, ("-o", "--output")
        )
        longs = [f for f in flags if f.startswith("--")]
        for k, v in enumerate(values):
            if long_option(v, longs, program) is not None:  # '--output F', '--out=F'
                if "=" in v:
                    out.append(v.split("=", 1)[1])
                elif k + 1 < len(values):
                    out.append(values[k + 1])
                continue
            for f in flags:
                if f.startswith("--"):
                    continue
                # '-o F', or a cluster ending in the letter: 'wget -qO F'.
                joined = len(f) == 2 and len(v) > 2 and v[0] == "-" != v[1] and v[-1] == f[1]
                if (v == f or joined) and k + 1 < len(values):
                    out.append(values[k + 1])
                elif v.startswith(f + "=") or (len(f) == 2 and v.startswith(f) and len(v) > 2):
                    out.append(v.split("=", 1)[1] if "=" in v else v[2:])
        remote_name = any(
            long_option(v, ("--remote-name",), program)
            or (v[:1] == "-" and v[1:2] != "-" and "O" in v)
            for v in values
        )
        if program == "curl" and remote_name:
            out.extend(v.rsplit("/", 1)[-1] for v in values if "://" in v)
    return out


def xargs_replace(options: list[Word]) -> str | None:
    """The replace string of xargs options ('-I R', '-IR', '-i', '-iR', '--replace[=R]')."""
    found: str | None = None
    i = 0
    while i < len(options):
        v = options[i].value
        if v == "-I" and i + 1 < len(options):
            found = options[i + 1].value
            i += 2
            continue
        if v.startswith("-I") and len(v) > 2:
            found = v[2:]
        elif v.startswith("-i"):
            found = v[2:] or "{}"
        elif long_option(v, ("--replace",), "xargs"):
            found = v.partition("=")[2] or "{}"
        i += 1
    return found


def env_chdir(options: list[Word]) -> Word | None:
    """The directory of 'env -C DIR' / '--chdir=DIR' among env's options, if any."""
    found: Word | None = None
    for k, w in enumerate(options):
        v = w.value
        chdir = long_option(v, ("--chdir",), "env")
        if (v == "-C" or (chdir and "=" not in v)) and k + 1 < len(options):
            found = options[k + 1]
        elif chdir:
            found = w.tail(v.index("=") + 1)
        elif v.startswith("-") and not v.startswith("--") and "C" in v:
            if v[v.index("C") + 1 :]:
                found = w.tail(v.index("C") + 1)
            elif k + 1 < len(options):
                found = options[k + 1]
    return found


def capsh_shell_args(words: list[Word]) -> list[Word] | None:
    """'capsh [options] -- ARGS' runs /bin/bash ARGS: the ARGS, or None without '--'."""
    values = [w.value for w in words]
    if "--" not in values:
        return None
    return words[values.index("--") + 1 :]


def daemon_argv(words: list[Word]) -> list[Word] | None:
    """The program and arguments 'start-stop-daemon --exec P [--startas Q] -- ARGS' runs."""
    program: Word | None = None
    values = [w.value for w in words]
    cut = values.index("--") if "--" in values else len(values)
    for k in range(1, cut):
        v = values[k]
        for opt, short in (("--startas", "-a"), ("--exec", "-x")):
            # --startas names what runs when both are given; --exec is what is checked.
            if program is not None and opt != "--startas":
                continue
            spelled = long_option(v, (opt,), "start-stop-daemon")
            if (v == short or (spelled and "=" not in v)) and k + 1 < cut:
                program = words[k + 1]
            elif spelled:
                program = words[k].tail(v.index("=") + 1)
    if program is None:
        return None
    return [program, *words[cut + 1 :]]


_GIT_SHELL_OPTS = {
    # The upload-pack of a local or ssh clone runs through the shell: 'git clone -u CMD r'.
    "clone": ("-u", "--upload-pack"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"),
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "mergetool": ("-x", "--extcmd"),
    # 'git grep -O[PAGER]' opens the matching files in PAGER, run through the shell.
    "grep": ("-O", "--open-files-in-pager"),
    # git daemon runs its access hook through the shell for every request.
    "daemon": ("--access-hook",),
    # send-email (Getopt::Long: any unique prefix) runs these through the shell.
    "send-email": ("--sendmail-cmd", "--to-cmd", "--cc-cmd", "--header-cmd"),
    # instaweb (a shell script) runs its HTTP daemon's command line.
    "instaweb": ("-d", "--httpd"),
}
# Options whose value is optional and therefore only ever attached: 'git grep -O x' opens
# the files in the default pager and searches for 'x'.
_GIT_OPTIONAL_VALUE = frozenset({"-O", "--open-files-in-pager"})
# filter-branch's shell options: its filters and '--setup', run before them.
_FILTER_RE = re.compile(r"^--(setup|(tree|index|msg|env|commit|parent|tag-name)-filter)$")
# Per subcommand, its other short options that take a value: in a cluster the first valued
# letter takes the rest of it ('git rebase -ix CMD' is '-i -x CMD'; '-sX' is '-s X').
_GIT_SHORT_VALUED = {
    "rebase": "sXCS",
    "clone": "obcj",
    "difftool": "t",
    "mergetool": "tO",
    "grep": "efABCm",
}


def git_shell_options(words: list[Word]) -> list[tuple[int, Word]]:
    """The options of a git command line whose value git runs through the shell ('git
    rebase -x CMD', '--exec=CMD', '-ixCMD', 'git clone -u CMD', 'git filter-branch
    --tree-filter CMD', 'git grep -OCMD', 'git send-email --to-cmd=CMD', 'git daemon
    --access-hook=CMD'): (index of the option's word, the command line). git's
    parse-options reads long options by any unique prefix and short ones in clusters,
    their value attached or the next word; filter-branch, a shell script, reads its
    options whole."""
    values = [w.value for w in words]
    sub_at = next(
        (k for k, v in enumerate(values[1:], 1) if v in _GIT_SHELL_OPTS or v == "filter-branch"),
        None,
    )
    if sub_at is None:
        return []
    sub = values[sub_at]
    opts = _GIT_SHELL_OPTS.get(sub, ())
    longs = [o for o in opts if o.startswith("--")]
    shorts = "".join(o[1] for o in opts if len(o) == 2)
    out: list[tuple[int, Word]] = []
    for k in range(sub_at + 1, len(words)):
        v = values[k]
        if v == "--":
            break
        following = words[k + 1] if k + 1 < len(words) else None
        opt, eq, _ = v.partition("=")
        opt = long_option(v, longs, "git") or opt
        if opt in longs or (sub == "filter-branch" and _FILTER_RE.match(opt)):
            if eq:
                out.append((k, words[k].tail(v.index("=") + 1)))
            elif following is not None and opt not in _GIT_OPTIONAL_VALUE:
                out.append((k, following))
            continue
        cluster = short_cluster(v)
        for j, letter in enumerate(cluster or ""):
            if letter in shorts:
                if (cluster or "")[j + 1 :]:
                    out.append((k, words[k].tail(j + 2)))  # '-' and the letters up to it
                elif following is not None and f"-{letter}" not in _GIT_OPTIONAL_VALUE:
                    out.append((k, following))
                break
            if letter in _GIT_SHORT_VALUED.get(sub, ""):
                break
    return out


def git_commands(words: list[Word]) -> tuple[list[Word], list[list[Word]]]:
    """Commands a git command line runs: (shell strings, program argvs).

    'git rebase -x CMD', 'git difftool -x CMD', 'git filter-branch --tree-filter CMD'
    (:func:`git_shell_options`) and 'git submodule foreach CMD...' run shell strings;
    'git bisect run PROG ARGS' runs PROG.
    """
    values = [w.value for w in words]
    shells: list[Word] = [value for _, value in git_shell_options(words)]
    argvs: list[list[Word]] = []
    if "submodule" in values and "foreach" in values:
        rest = [w for w in words[values.index("foreach") + 1 :] if w.value != "--recursive"]
        if rest:
            shells.append(Word(" ".join(w.value for w in rest), any(w.dynamic for w in rest)))
    if "bisect" in values and "run" in values[values.index("bisect") :]:
        k = values.index("run", values.index("bisect"))
        if k + 1 < len(words):
            argvs.append(words[k + 1 :])
    return shells, argvs


#: The makefiles GNU make reads when no '-f' names one, in its order.
MAKEFILE_NAMES = ("GNUmakefile", "makefile", "Makefile")
#: Package managers that run package.json's "scripts" (lifecycle scripts on install, the
#: named one on run/test/start).
PACKAGE_SCRIPT_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun"})


def make_files(words: list[Word]) -> list[Word]:
    """The makefiles named by 'make -f FILE', '-fFILE', '--file=FILE', '--makefile FILE'
    (and their prefixes); none: make reads :data:`MAKEFILE_NAMES`."""
    out: list[Word] = []
    for k, w in enumerate(words[1:], 1):
        v = w.value
        spelled = long_option(v, ("--file", "--makefile"), "make")
        if (v == "-f" or (spelled and "=" not in v)) and k + 1 < len(words):
            out.append(words[k + 1])
        elif spelled:
            out.append(w.tail(v.index("=") + 1))
        elif v.startswith("-f") and len(v) > 2:
            out.append(w.tail(2))
    return out


def make_reads_input(words: list[Word]) -> bool:
    """'make -f -' or 'make -f /dev/stdin': the makefile (recipes are shell) is the input."""
    return any(f.value == "-" or is_stream_path(f.value) for f in make_files(words))


def package_scripts(text: str) -> dict[str, str] | None:
    """A package.json's "scripts" (name -> a shell command line a package manager runs);
    None when the text is not a JSON object."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # nested past json's stack: not a package.json read
        return None
    if not isinstance(data, dict):
        return None
    scripts = data.get("scripts")
    if not isinstance(scripts, dict):
        return {}
    return {k: v for k, v in scripts.items() if isinstance(v, str)}


# What install runs of the package's own scripts (npm's lifecycle for the root package).
_INSTALL_SCRIPTS = frozenset(
    {"preinstall", "install", "postinstall", "prepublish", "preprepare", "prepare", "postprepare"}
)
_INSTALL_COMMANDS = frozenset(
    {"install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal",
     "isntall", "add", "ci", "clean-install", "ic", "install-clean", "isntall-clean",
     "install-ci-test", "cit", "install-test", "it", "rebuild", "rb", "update", "up",
     "upgrade", "link", "ln"}
)  # fmt: skip
_RUN_COMMANDS = frozenset({"run", "run-script", "rum", "urn"})
_TEST_LIKE = {"test": "test", "t": "test", "tst": "test", "start": "start", "stop": "stop"}
# Subcommands that run none of the package's scripts.
_NO_SCRIPTS = frozenset(
    {"exec", "x", "dlx", "help", "view", "info", "show", "ls", "list", "outdated", "audit",
     "config", "get", "set", "whoami", "search", "why", "explain", "login", "logout",
     "cache", "doctor", "ping", "root", "prefix", "bin", "docs", "repo", "bugs", "fund",
     "version", "--version", "-v", "--help", "-h"}
)  # fmt: skip


def package_script_names(name: str, words: list[Word]) -> frozenset[str] | None:
    """Which of package.json's scripts ``words`` (npm, pnpm, yarn, bun) runs: an install
    its lifecycle scripts, 'run X' (and yarn's, pnpm's, bun's 'X') preX, X, postX, 'test'
    and 'start' theirs; None when that is not known here (every script may run)."""
    args = [w for w in words[1:] if not w.value.startswith("-") or w.value in _NO_SCRIPTS]
    if not args:
        # 'yarn' alone installs; 'npm', 'pnpm', 'bun' alone print their help.
        return _INSTALL_SCRIPTS if name == "yarn" else frozenset()
    head = args[0]
    if head.dynamic:
        return None
    sub = head.value
    if sub in _NO_SCRIPTS:
        return frozenset()
    if sub in _INSTALL_COMMANDS:
        return _INSTALL_SCRIPTS
    if sub in _RUN_COMMANDS:
        if len(args) < 2:
            return frozenset()  # lists the scripts
        target = args[1]
        if target.dynamic:
            return None
        sub = target.value
    elif sub in _TEST_LIKE:
        sub = _TEST_LIKE[sub]
    elif name == "npm":
        return None  # a subcommand this table does not know
    return frozenset({"pre" + sub, sub, "post" + sub})
