"""Tables of programs that run other programs, and programs that run code given as data.

Data, not logic: ``runtime.policy.shell`` walks these tables to see through wrappers. Option
sets name the options that take a separate value, so the value is not mistaken for the
wrapped program (``timeout -s KILL 5 rm`` runs ``rm``, not ``KILL``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "CODE_FLAGS",
    "CODE_VALUED",
    "COMMAND_ENV",
    "GIT_COMMAND_KEYS",
    "HAZARD_ARGS",
    "LOADER_GLOBS",
    "SHELLS",
    "SHELL_STRING_OPTIONS",
    "SUBCOMMAND_WRAPPERS",
    "WRAPPERS",
    "Wrapper",
]


class Wrapper(NamedTuple):
    short_with_arg: str = ""  # option letters that take a value ("u" for sudo -u USER)
    long_with_arg: frozenset[str] = frozenset()  # long options that take a separate value
    positionals: int = 0  # positional words before the wrapped program (timeout DURATION)
    assignments: bool = False  # NAME=VALUE words before the program (env)
    stdin_args: bool = False  # appends arguments read from stdin (xargs)
    shell_arg: frozenset[str] = frozenset()  # options whose value is a shell string (su -c)
    joins: bool = False  # runs its arguments joined through 'sh -c' (watch)
    dash_option: bool = False  # a lone '-' is an option, not the program (env -, su -)
    joins_with: str = ""  # an option letter that makes it join as 'joins' does (entr -s)


_L = frozenset

_WATCHEXEC_VALUED = _L(
    {
        "--exts", "--watch", "--ignore", "--filter", "--debounce", "--signal", "--shell",
        "--env", "--workdir", "--on-busy-update", "--delay-run", "--stop-signal",
        "--stop-timeout", "--project-origin", "--filter-file", "--ignore-file",
        "--emit-events-to", "--color", "--poll", "--wrap-process",
    }
)  # fmt: skip

WRAPPERS: dict[str, Wrapper] = {
    "env": Wrapper(
        "uCS",
        _L({"--unset", "--chdir", "--split-string"}),
        assignments=True,
        shell_arg=_L({"-S", "--split-string"}),
        dash_option=True,
    ),
    # sudo takes NAME=VALUE before the command, as env does ('sudo LD_PRELOAD=x.so ls').
    "sudo": Wrapper(
        "CDghprtTuU",
        _L(
            {
                "--user",
                "--group",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--chdir",
                "--close-from",
                "--other-user",
            }
        ),
        assignments=True,
    ),
    "doas": Wrapper("uC"),
    "nice": Wrapper("n", _L({"--adjustment"})),
    "ionice": Wrapper("cnp", _L({"--class", "--classdata", "--pid"})),
    "nohup": Wrapper(),
    "setsid": Wrapper(),
    "timeout": Wrapper("sk", _L({"--signal", "--kill-after"}), positionals=1),
    "stdbuf": Wrapper("ioe", _L({"--input", "--output", "--error"})),
    "time": Wrapper("fo", _L({"--format", "--output"})),
    "command": Wrapper(),
    "builtin": Wrapper(),
    "exec": Wrapper("a"),
    # Only options with a *required* value: -e/-i/-l and --eof/--replace/--max-lines take
    # an optional value that must be attached ('-i{}', '--replace=R'); reading the next
    # word as their value made 'xargs -i rm -rf {}' run the program '-rf'.
    "xargs": Wrapper(
        "adEILnPs",
        _L(
            {
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
        stdin_args=True,
    ),
    "chroot": Wrapper("", _L({"--userspec", "--groups"}), positionals=1),
    "flock": Wrapper(
        "wEc",
        _L({"--timeout", "--conflict-exit-code", "--command"}),
        positionals=1,
        shell_arg=_L({"-c", "--command"}),
    ),
    "taskset": Wrapper("", positionals=1),
    "chrt": Wrapper("T", positionals=1),
    "unshare": Wrapper("SG", _L({"--setuid", "--setgid", "--root", "--wd"})),
    # -r[dir] and -w[dir] take an optional attached value only.
    "nsenter": Wrapper("tSG", _L({"--target", "--setuid", "--setgid"})),
    "setpriv": Wrapper("", _L({"--reuid", "--regid", "--groups", "--inh-caps", "--bounding-set"})),
    "su": Wrapper(
        "cgGs",
        _L({"--command", "--group", "--shell"}),
        shell_arg=_L({"-c", "--command"}),
        dash_option=True,
    ),
    "runuser": Wrapper(
        "cgGsu",
        _L({"--command", "--group", "--shell", "--user"}),
        shell_arg=_L({"-c", "--command"}),
        dash_option=True,
    ),
    "watch": Wrapper("dn", _L({"--interval", "--differences"}), joins=True),
    "strace": Wrapper("eoOpPsSuEXb"),
    "ltrace": Wrapper("aADeFlnopsuwx"),  # -S (trace syscalls) takes no value
    "valgrind": Wrapper(),
    "catchsegv": Wrapper(),
    "busybox": Wrapper(),
    "toybox": Wrapper(),
    "npx": Wrapper("pc", _L({"--package", "--call"}), shell_arg=_L({"-c", "--call"})),
    "bunx": Wrapper("p", _L({"--package"})),
    "pnpx": Wrapper(),
    "uvx": Wrapper("p", _L({"--from", "--with", "--python"})),
    "faketime": Wrapper("", positionals=1),
    "firejail": Wrapper(),
    "proot": Wrapper("rbw"),
    "systemd-run": Wrapper("pEu", _L({"--property", "--setenv", "--unit"})),
    # util-linux, coreutils and friends installed on Debian that run their arguments.
    "setarch": Wrapper("", positionals=1),  # setarch ARCH [options] PROGRAM
    "linux32": Wrapper(),
    "linux64": Wrapper(),
    "x86_64": Wrapper(),
    "i386": Wrapper(),
    "i686": Wrapper(),
    "uname26": Wrapper(),
    "prlimit": Wrapper("po", _L({"--pid", "--output"})),  # limits are '--nofile=N', '-n1'
    # sg GROUP -c CMD, or sg GROUP CMD: the command is a string run by /bin/sh -c.
    "sg": Wrapper("c", positionals=1, shell_arg=_L({"-c"}), joins=True, dash_option=True),
    "fakeroot": Wrapper("lsib", _L({"--lib", "--faked"})),
    "dbus-run-session": Wrapper("", _L({"--config-file", "--dbus-daemon"})),
    # runcon CONTEXT PROGRAM, or runcon -t TYPE ... PROGRAM: one positional is read; when
    # options were given instead, the program is checked as another reading.
    "runcon": Wrapper("turl", _L({"--type", "--user", "--role", "--range"}), positionals=1),
    "chronic": Wrapper(),
    "unbuffer": Wrapper(),
    "nocache": Wrapper(),
    "trickle": Wrapper("udwtlsn"),
    "torsocks": Wrapper("uPa", _L({"--user", "--pass", "--address", "--port"})),
    "proxychains": Wrapper("f"),
    "proxychains4": Wrapper("f"),
    "numactl": Wrapper(
        "CiNmlp",
        _L({"--cpunodebind", "--interleave", "--membind", "--preferred", "--physcpubind"}),
    ),
    "cpulimit": Wrapper("lp", _L({"--limit", "--pid"})),
    # ssh HOST CMD...: the remote shell runs the words joined, as 'sh -c' would. Run here or
    # there, 'ssh host "rm -rf ~"' is what the rules are about.
    "ssh": Wrapper("BbcDEeFIiJLlmOopQRSWw", positionals=1, joins=True),
    "sshpass": Wrapper("fdpP"),
    "mosh": Wrapper("p", _L({"--port", "--ssh", "--server", "--client", "--predict"}), 1),
    "screen": Wrapper("SceEhpstTX", _L({"-Logfile"})),
    # watchexec runs its command line through the shell when files change.
    "watchexec": Wrapper("ewifdspE", _WATCHEXEC_VALUED, joins=True),
    # entr runs its arguments when files change; with -s they are one 'sh -c' string.
    "entr": Wrapper(joins_with="s"),
    "xvfb-run": Wrapper(
        "nsfpwe",
        _L(
            {
                "--server-num",
                "--server-args",
                "--auth-file",
                "--xauth-protocol",
                "--wait",
                "--error-file",
            }
        ),
    ),
}

# Programs with options whose value is a shell command line, and the subcommands (by name
# or alias) the options belong to (none: any): 'nix-shell --run CMD', 'vagrant ssh -c CMD',
# 'man -P PAGER', 'split --filter=CMD' (run by $SHELL -c), dpkg's hooks (run by sh -c),
# 'script -c CMD'.
SHELL_STRING_OPTIONS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "nix-shell": (_L(), _L({"--run", "--command"})),
    "vagrant": (_L({"ssh"}), _L({"-c", "--command"})),
    "man": (_L(), _L({"-P", "--pager", "-H", "--html"})),
    "ncat": (_L(), _L({"-c", "--sh-exec"})),
    "npm": (_L({"exec", "x"}), _L({"-c", "--call"})),
    "split": (_L(), _L({"--filter"})),
    "dpkg": (_L(), _L({"--pre-invoke", "--post-invoke", "--status-logger"})),
    # 'script [options] [FILE]': FILE is the typescript it writes, not a program; '-c CMD'
    # is run by $SHELL -c.
    "script": (_L(), _L({"-c", "--command"})),
}

# 'uv run X', 'poetry run X': the word after the subcommand is the program.
SUBCOMMAND_WRAPPERS: dict[str, frozenset[str]] = {
    "npm": _L({"exec", "x"}),
    "pnpm": _L({"exec", "dlx"}),
    "yarn": _L({"exec", "dlx"}),
    "uv": _L({"run"}),
    "poetry": _L({"run"}),
    "pipenv": _L({"run"}),
    "pdm": _L({"run"}),
    "hatch": _L({"run"}),
    "bundle": _L({"exec"}),
    "conda": _L({"run"}),
    "mamba": _L({"run"}),
    "micromamba": _L({"run"}),
}

# The dynamic loader runs any binary given as its argument: 'ld-linux-x86-64.so.2 /bin/rm'.
LOADER_GLOBS = ("ld-linux*", "ld.so*", "ld-*.so*", "ld64.so*", "ld-musl-*")

SHELLS = frozenset(
    {
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "ash",
        "yash",
        "posh",
        "fish",
        "csh",
        "tcsh",
        "rbash",
        "pdksh",
        "oksh",
        "loksh",
    }
)

# Interpreters and the options by which they take code as an argument. Short options match
# inside clusters ('perl -ne', 'python -Bc'). gdb has no short options: runtime/policy/_gdb.py.
CODE_FLAGS: dict[str, frozenset[str]] = {
    "python*": _L({"-c"}),
    "pypy*": _L({"-c"}),
    "perl*": _L({"-e", "-E"}),
    "ruby*": _L({"-e"}),
    "node": _L({"-e", "-p", "--eval", "--print"}),
    "nodejs": _L({"-e", "-p", "--eval", "--print"}),
    "bun": _L({"-e", "--eval", "-p", "--print"}),
    "deno": _L({"eval"}),
    "php*": _L({"-r", "-B", "-E", "-R", "-F"}),
    "lua*": _L({"-e"}),
    "luajit": _L({"-e"}),
    "Rscript": _L({"-e"}),
    "R": _L({"-e"}),
    "osascript": _L({"-e"}),
    "pwsh": _L({"-c", "-command", "-encodedcommand", "-ec", "-e"}),
    "powershell": _L({"-c", "-command", "-encodedcommand", "-ec", "-e"}),
    "tclsh*": _L(),
    "wish*": _L(),
    "expect": _L({"-c"}),
    "jshell": _L(),
    "irb": _L(),
    "julia": _L({"-e", "--eval", "-E", "--print"}),
    "scala": _L({"-e"}),
    "groovy": _L({"-e"}),
    "guile": _L({"-c"}),
    # Text languages with a shell escape: m4's syscmd()/esyscmd() (its input and file
    # operands are the program), dc's '!', gnuplot's system() and '`CMD`', octave's
    # system(). GNU m4 is also installed as gm4.
    "m4": _L(),
    "gm4*": _L(),
    "dc": _L({"-e", "--expression"}),
    "gnuplot*": _L({"-e"}),
    "octave*": _L({"--eval"}),
}

# Arguments of ordinary tools that make them run commands.
HAZARD_ARGS: dict[str, tuple[str, ...]] = {
    "tar": (
        "--checkpoint-action*",
        "--to-command*",
        "--use-compress-program*",
        "--info-script*",
        "--new-volume-script*",
        "-I",
        "-F",
    ),
    # 'git -c KEY=VALUE' is judged by its key (runtime/policy/_git_config.py).
    "git": (
        "--upload-pack*",
        "--receive-pack*",
        "--exec*",
        "core.sshCommand*",
        "*ProxyCommand*",
    ),
    "rsync": ("-e", "--rsh*", "--rsync-path*"),
    "ssh": ("*ProxyCommand*", "*LocalCommand*", "*PermitLocalCommand*"),
    "scp": ("-S", "*ProxyCommand*"),
    "zip": ("-T*", "--unzip-command*", "-TT*"),
    **dict.fromkeys(
        ("vim", "vi", "nvim", "ex", "view", "vimdiff", "rvim", "rview", "gvim", "evim", "nex"),
        ("-c", "-[!-]*c", "+*", "--cmd"),  # '-sc CMD': -c ends a cluster
    ),
    "emacs": ("--eval*", "-eval", "--execute*", "-execute"),
    # psql's and mysql's '\!' run a shell command ('\o |CMD' too); sqlite3's arguments and
    # the clients' input: runtime/policy/_sql_clients.py.
    "psql": ("*\\!*", "*\\[ogw]*|*"),
    "mysql": ("*\\!*", "*system *"),
    "mariadb": ("*\\!*", "*system *"),
    "less": ("+*",),
    # The shell recipes run by, and its flags, set with any assignment operator.
    "make": ("--eval*", "SHELL=*", "SHELL[:+?!]*=*", ".SHELLFLAGS*=*"),
    "openssl": ("-engine",),
    # ripgrep runs its preprocessor on every file it searches ('rg --pre rm .').
    "rg": ("--pre", "--pre=*"),
    # Programs they run, named by path (not a command line that can be read).
    "sort": ("--compress-program*",),
    "wget": ("--use-askpass*",),
    # socat's SYSTEM: and EXEC: addresses run commands (address keywords ignore case).
    "socat": ("*[Ss][Yy][Ss][Tt][Ee][Mm]:*", "*[Ee][Xx][Ee][Cc]:*"),
    **dict.fromkeys(("nc", "ncat", "netcat", "nc.traditional"), ("-e", "--exec*", "--lua-exec*")),
}

# Options of the interpreters in CODE_FLAGS that take a *separate* value: 'python3 -W ignore
# -c CODE' has its code flag after one; reading 'ignore' as the script hid the '-c'.
CODE_VALUED: dict[str, frozenset[str]] = {
    "python*": _L({"-W", "-X", "--check-hash-based-pycs"}),
    "pypy*": _L({"-W", "-X"}),
    # Not '-x': its directory is attached or absent ('perl -x x.pl' runs x.pl).
    "perl*": _L({"-I", "-M", "-m"}),
    "ruby*": _L({"-I", "-r", "-C", "-E", "-F", "--encoding"}),
    "node": _L(
        {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions"}
    ),
    "nodejs": _L({"-r", "--require", "--import", "--loader", "-C", "--conditions"}),
    "bun": _L({"-r", "--preload", "--cwd", "--config", "-c"}),
    "php*": _L({"-d", "-c", "-z", "-t", "-f"}),
    "lua*": _L({"-l"}),
    "luajit": _L({"-l", "-j", "-O"}),
    "julia": _L({"-L", "--load", "-J", "--sysimage", "--project", "-t", "--threads", "-p"}),
    "m4": _L({"-D", "-U", "-I", "-F", "-R", "-l", "-L", "-o", "-d", "-t", "--debugfile"}),
    "gm4*": _L({"-D", "-U", "-I", "-F", "-R", "-l", "-L", "-o", "-d", "-t", "--debugfile"}),
    "dc": _L({"-f", "--file"}),
}

# Environment variables whose value a program runs as a shell command (git's editor, pager
# and ssh; man's pager). 'GIT_EDITOR="rm -rf /" git commit' runs rm: their values are read
# as shell, like 'git -c core.editor=...'.
COMMAND_ENV = frozenset(
    {
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER",
        "GIT_SSH_COMMAND",
        "GIT_SSH",
        "GIT_PROXY_COMMAND",
        "GIT_ASKPASS",
        "GIT_EXTERNAL_DIFF",
        "SSH_ASKPASS",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "SYSTEMD_PAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "PROMPT_COMMAND",  # run by an interactive bash before each prompt
        # Python's webbrowser, xdg-open and others run it ('%s' the URL); split --filter,
        # script, vim's ':sh' and less's '!' run $SHELL.
        "BROWSER",
        "SHELL",
        # rsync's and cvs's remote shell, bash's 'fc' editor, cargo's compiler and its
        # wrapper: each a command line (or program) run as such.
        "RSYNC_RSH",
        "CVS_RSH",
        "FCEDIT",
        "RUSTC",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTDOC",
    }
)

# git config keys (lower case, fnmatch) whose value git later runs through the shell:
# 'git config alias.x "!rm -rf /"; git x'. The value is read as shell ('!' dropped).
GIT_COMMAND_KEYS = (
    "alias.*",
    "core.pager",
    "core.editor",
    "core.sshcommand",
    "core.fsmonitor",
    "core.askpass",
    "core.gitproxy",
    "sequence.editor",
    "diff.external",
    "diff.*.textconv",
    "diff.*.command",
    "difftool.*.cmd",
    "mergetool.*.cmd",
    "filter.*.clean",
    "filter.*.smudge",
    "filter.*.process",
    "merge.*.driver",
    "credential.helper",
    "credential.*.helper",
    "gpg.program",
    "gpg.*.program",
    "pager.*",
    "uploadpack.packobjectshook",
    "web.browser",
    "browser.*.cmd",
    "man.*.cmd",
    # interpret-trailers runs a trailer's command through the shell ('cmd', and the older
    # 'command' with $ARG replaced).
    "trailer.*.cmd",
    "trailer.*.command",
)
