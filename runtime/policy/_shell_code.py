"""Code given as data, for the shell walker: interpreters fed code, tools whose arguments or
options hold command lines (git, tar, tmux, nix-shell, hyperfine, ``find -exec`` ...), and
the guessed reading of a shell named among an unknown program's arguments. See
:mod:`runtime.policy.shell`.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from runtime.policy._env_options import (
    SOURCED_ENV,
    STARTUP_DIR_ENV,
    option_env_program,
    option_env_words,
    startup_files,
)
from runtime.policy._gdb import gdb_code
from runtime.policy._git_config import (
    classify_key,
    code_options,
    global_config,
    subcommand_config,
)
from runtime.policy._long_options import long_option
from runtime.policy._python_modules import python_run
from runtime.policy._script_options import (
    VIM_NAMES,
    lesskey_sources,
    perl_debugger_files,
    vim_scripts,
)
from runtime.policy._shell_model import SimpleCommand
from runtime.policy._shell_state import WalkerState
from runtime.policy._sql_clients import SQL_CLIENTS, sql_client_code
from runtime.policy._sweeps import find_exec_operands
from runtime.policy._tool_commands import (
    argv_after_option,
    guessed_shells,
    hyperfine_commands,
    option_commands,
    parallel_commands,
    tmux_commands,
)
from runtime.policy._tool_options import (
    COMMAND_OPTIONS,
    ed_commands,
    ed_written_files,
    tool_option_code,
)
from runtime.policy._writes import awk_outputs, runtime_script, sqlite_text_writes
from runtime.policy.argv import Word, literal_text, short_cluster
from runtime.policy.embedded import (
    MAKEFILE_NAMES,
    PACKAGE_SCRIPT_RUNNERS,
    awk_programs,
    awk_runs_commands,
    capsh_shell_args,
    command_env_values,
    daemon_argv,
    git_commands,
    git_config_setting,
    git_shell_options,
    interpreter_value_options,
    is_stream_path,
    make_files,
    make_reads_input,
    package_script_names,
    preload_values,
    program_text_runs,
    sed_runs_commands,
    sed_script_files,
)
from runtime.policy.wrappers import CODE_FLAGS, HAZARD_ARGS

__all__ = ["CodeMixin"]


def _hazard_arg(value: str, pattern: str, program: str) -> bool:
    """Whether the word ``value`` is the :data:`HAZARD_ARGS` ``pattern`` by fnmatch, or a
    long option pattern ('--rsh*', '--eval') by any prefix of its name. Both: a trailing '*'
    also names longer options ('git --exec*' is '--exec-path=DIR' too, where git finds its
    helper programs)."""
    if fnmatchcase(value, pattern):
        return True
    if pattern.startswith("--") and value.startswith("--"):
        name = pattern.rstrip("*")
        if not set("*?[").intersection(name):
            return long_option(value, (name,), program) is not None
    return False


# Words that carry a command line after a prefix (git's and ssh's settings).
_COMMAND_VALUED = (
    "core.pager=",
    "core.sshCommand=",
    "core.editor=",
    "ProxyCommand=",
    "LocalCommand=",
)
# vi-family programs whose input is ex commands in ex mode ('ex', 'vim -e', 'vim -Es').
_VI_FAMILY = frozenset({"vim", "vi", "nvim", "view", "rvim", "gvim"})


class CodeMixin(WalkerState):
    """Code carried in a command's words (a part of the walker)."""

    def embedded_commands(
        self,
        name: str,
        words: list[Word],
        depth: int,
        feeds: tuple[str, ...],
        *,
        stdin: Word | None,
        stdin_code: bool = False,
        wrappers: tuple[str, ...],
    ) -> bool:
        """Walk the commands a tool's own grammar runs; True when ``name`` has one (its
        arguments are then not guessed at, see :meth:`guess_shells`)."""
        inner = (*wrappers, name)
        if name in PACKAGE_SCRIPT_RUNNERS:
            # Its package.json's "scripts": one this command writes is read (finish).
            self.package_runs.append((package_script_names(name, words), depth, feeds, name))
        if name == "find":
            self.find_exec(words, depth, feeds, wrappers)
        elif name == "git":
            shells, argvs = git_commands(words)
            # 'git config KEY VALUE': judged by its key, as 'git -c KEY=VALUE' is.
            setting = git_config_setting(words)
            kind = None if setting is None else classify_key(setting[0])
            if setting is not None and kind == "command":
                alias = setting[0].startswith("alias.")
                self.git_command_value(setting[1], depth, feeds, alias=alias)
            for value in shells:
                self.shell_string(value, depth, feeds)
            for argv in argvs:  # 'git bisect run PROG ARGS'
                self.run_argv(argv, depth, feeds, inner)
            if setting is not None and kind == "code":
                self.hazard(
                    "interpreter", f"git config {setting[0]} points git at code it runs", feeds
                )
            self.git_global_config(words, depth, feeds)
        elif name == "hyperfine":
            for value in hyperfine_commands(words):
                self.shell_string(value, depth, feeds)
        elif name == "tmux":
            lines, env = tmux_commands(words)
            for value in lines:
                self.shell_string(value, depth, feeds)
            self.environment(env, depth, feeds)
        elif name == "parallel":
            for value in parallel_commands(words):
                self.shell_string(value, depth, feeds)
        elif name == "capsh":
            bash_args = capsh_shell_args(words)  # 'capsh -- ARGS' is 'bash ARGS'
            if bash_args is not None:
                self.run_argv([Word("bash"), *bash_args], depth, feeds, inner)
        elif name == "start-stop-daemon":
            daemon = daemon_argv(words)
            if daemon is not None:
                self.run_argv(daemon, depth, feeds, inner)
        elif name in ("make", "gmake"):
            if make_reads_input(words):
                self.hazard(
                    "interpreter", f"{name} reads its makefile (shell recipes) from input", feeds
                )
            # A makefile this command writes is a script it then runs (its recipes are
            # shell, through make's own expansion: asked, as 'python3 a.py' of one is).
            for f in make_files(words) or [Word(n) for n in MAKEFILE_NAMES]:
                if f.dynamic:
                    self.hazard("interpreter", f"{name} reads a makefile named at run time", feeds)
                elif f.value != "-" and not is_stream_path(f.value):
                    self.note_run(f.value, False, depth, feeds, name)
        elif name in SQL_CLIENTS:
            reason = sql_client_code(
                name, words, stdin_text=literal_text(stdin), stdin_code=stdin_code
            )
            if reason is not None:
                self.hazard("interpreter", reason, feeds)
            text = literal_text(stdin)
            if name in ("sqlite3", "sqlite") and text is not None:
                # '.output F', 'VACUUM INTO 'F'' on a literal input: written as in its
                # arguments (any other input asks above).
                files = sqlite_text_writes(text)
                if files:
                    self.commands.append(
                        SimpleCommand(
                            name,
                            feeds=feeds,
                            speculative=True,
                            cwd=self.cwd,
                            dirs=tuple(self.dirs),
                            writes=tuple(files),
                        )
                    )
        else:
            strings = option_commands(name, words)
            for value in strings:  # 'nix-shell --run CMD', 'vagrant ssh -c CMD'
                self.shell_string(value, depth, feeds)
            program = argv_after_option(name, words)  # 'nix develop -c PROG ARGS'
            if program is not None:
                self.run_argv(program, depth, feeds, inner)
            return bool(strings) or program is not None
        return True

    def git_global_config(self, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """'git -c KEY=VALUE' and 'git clone -c KEY=VALUE': a command key's value is read
        as shell ('core.pager=CMD'), a code key asks (:mod:`runtime.policy._git_config`),
        any other key is harmless. An option that points git at code ('clone
        --template=DIR') asks as its key does."""
        for key, value in global_config(words) + subcommand_config(words):
            kind = "code" if key.dynamic else classify_key(key.value)
            if kind == "command" and value is not None:
                alias = key.value.lower().startswith("alias.")
                self.git_command_value(value, depth, feeds, alias=alias)
            elif kind is not None:
                self.hazard("interpreter", f"git -c {key.value} changes what git runs", feeds)
        for option in code_options(words):
            self.hazard("interpreter", f"git {option} points git at code it runs", feeds)

    def git_command_value(
        self, value: Word, depth: int, feeds: tuple[str, ...], *, alias: bool = False
    ) -> None:
        """A git command key's value as git runs it, with git's output on its input:
        'core.pager=sh' runs what git prints. The arguments git appends are its own (the
        editor's file, ssh's host): not read. An alias is '!' and a command line, or
        git's own arguments ('alias.l = -c core.pager=sh log')."""
        v = value.value
        if alias and not v.startswith("!"):
            v = "git " + v
        text = v.removeprefix("!")
        self.fed += 1
        try:
            self.shell_string(Word(text, value.dynamic), depth, (*feeds, "git"))
        finally:
            self.fed -= 1

    def environment(self, env: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """NAME=VALUE words a tool puts in the environment of commands it runs ('tmux
        new -e', 'tmux setenv'): judged as 'NAME=VALUE cmd' is, by the rules on assigned
        names (LD_PRELOAD, PATH, BASH_ENV) and with the value of a variable that a
        program runs as a command (GIT_PAGER, EDITOR) read as shell. A name only known
        at run time may be any of them."""
        self.env_values(env, depth, feeds)
        self.assigned_names(env, feeds)

    def assigned_names(self, env: list[Word], feeds: tuple[str, ...]) -> None:
        """The names NAME=VALUE words set, for the rules on assigned names (a command of
        no program that sets them); a name only known at run time is a hazard."""
        names: list[str] = []
        for w in env:
            name = w.value.split("=", 1)[0]
            if w.dynamic and ("$" in name or "`" in name or not name):
                self.hazard("dynamic", "an environment variable's name is only known at run time")
                continue
            names.append(name)
        if names:
            self.commands.append(
                SimpleCommand("", (), tuple(names), feeds=feeds, speculative=self.speculating > 0)
            )

    def env_values(self, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """NAME=VALUE words (assignments, 'env', 'export', 'tmux -e') read as what their
        value stands for (:mod:`runtime.policy._env_options`): a command line a program runs
        (GIT_PAGER) as shell, a program's options (NODE_OPTIONS) as on its command line, a
        file a shell sources (BASH_ENV) as '. FILE'."""
        for command in command_env_values(words):
            self.shell_string(command, depth, feeds)
        for w in words:
            name, eq, value = w.value.partition("=")
            name = name.rstrip("+")
            if not eq:
                continue
            if name in STARTUP_DIR_ENV:
                self.startup_dirs.setdefault(name, []).append(Word(value, w.dynamic))
            program = option_env_program(name)
            if program is not None:
                options = option_env_words(Word(value, w.dynamic))
                if any(o.dynamic for o in options):
                    self.hazard("dynamic", f"{name} holds options only known at run time", feeds)
                self.interpreter(program, [Word(program), *options], feeds, False, depth)
            elif name in SOURCED_ENV and value and not w.dynamic:
                self.note_run(value, True, depth, feeds, "sh")
            elif name == "MAKEFILES" and not w.dynamic:
                # make reads these makefiles before its own: one this command writes is
                # a script make runs, as 'make -f FILE' of it is.
                for f in value.split():
                    self.note_run(f, False, depth, feeds, "make")
            if not w.dynamic and ("$(" in value or "`" in value):
                self.stored_code(value, depth, feeds)

    def stored_code(self, value: str, depth: int, feeds: tuple[str, ...]) -> None:
        """A literal value that holds command substitutions ('x=a[\\$\\(rm\\ -rf\\ /\\)]',
        'read x <<< ...', 'printf -v x ...'): inert where it is stored, but bash runs them
        wherever it reads the value as code again. An arithmetic context reads a
        variable's value as an expression and expands an array subscript in it ('echo
        $((x))', '((x))', 'let', '[[ $x -eq 1 ]]', '${a[x]}'), and so do eval, '${x@P}'
        and PS1/PROMPT_COMMAND. Whether the value reaches one is not followed: its
        substitutions are read as a guess, so a deny rule that matches them asks."""
        self.speculating += 1
        self.guessing += 1
        try:
            # ': VALUE': the value as one command's arguments, its substitutions live.
            self.parse(": " + value, depth + 1, feeds)
        finally:
            self.guessing -= 1
            self.speculating -= 1

    def startup(self, name: str, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """A shell that reads start-up files from a directory this command named (HOME=DIR,
        ZDOTDIR=DIR) runs them as 'BASH_ENV=FILE' would: it asks, and a file the same
        command writes there is read as '. FILE' (:meth:`note_run`)."""
        files = startup_files(name, words)
        dirs = self.startup_dirs.get("HOME", [])
        if name == "zsh" and "ZDOTDIR" in self.startup_dirs:
            dirs = self.startup_dirs["ZDOTDIR"]
        if not files or not dirs:
            return
        self.hazard(
            "interpreter",
            f"{name} reads its start-up files ({', '.join(files)}) from a directory this"
            " command names",
            feeds,
        )
        for d in dirs:
            if not d.dynamic:
                for f in files:
                    self.note_run(f"{d.value.rstrip('/')}/{f}", True, depth, feeds, name)

    def preloads(self, name: str, words: list[Word], feeds: tuple[str, ...], depth: int) -> None:
        """What an interpreter's preload options name ('node -r X', '--import X'), judged
        as a script it runs: inline code ('data:' URLs) and a stream are code the command
        line gives it; a file the same command writes is read (:meth:`note_run`)."""
        for w in preload_values(name, words):
            v = w.value
            if w.dynamic:
                continue
            if v.lower().startswith(("data:", "javascript:")):
                self.hazard("interpreter", f"{name} loads code given as an argument ({v!r})", feeds)
            elif is_stream_path(v):
                self.hazard("interpreter", f"{name} loads code from its input ({v!r})", feeds)
            else:
                self.note_run(v, False, depth, feeds, name)

    def guess_shells(self, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """Read 'sh -c CMD' among the arguments of a program no table knows as a command
        it may run (:func:`runtime.policy._tool_commands.guessed_shells`). The commands
        found are guesses: deny rules that match them ask (``SimpleCommand.guess``), an
        allowlist does not ask for them."""
        for k in guessed_shells(words):
            self.speculating += 1
            self.guessing += 1
            try:
                self.run_argv(words[k:], depth, feeds, ())
            finally:
                self.guessing -= 1
                self.speculating -= 1

    def program_files(
        self,
        name: str,
        files: list[Word],
        *,
        stdin: Word | None,
        stdin_code: bool,
        depth: int,
        feeds: tuple[str, ...],
    ) -> None:
        """The files awk or sed reads its program from ('-f FILE'). Its input ('-f -',
        '/dev/stdin') is read as the program: a literal here-document is judged as an
        inline program is, any other input asks. A file named at run time asks, and one
        this command writes is read as a script written then run is (:meth:`note_run`)."""
        for f in files:
            if f.dynamic:
                self.hazard(
                    "interpreter", f"{name} reads its program from a file named at run time", feeds
                )
            elif f.value == "-" or is_stream_path(f.value):
                text = literal_text(stdin)
                if text is not None:
                    if program_text_runs(name, text):
                        self.hazard(
                            "interpreter", f"{name} program on its input runs commands", feeds
                        )
                    self.program_writes(name, text, feeds, self.cwd, tuple(self.dirs))
                elif stdin_code:
                    self.hazard("interpreter", f"{name} reads its program from its input", feeds)
            else:
                self.note_program_file(f.value, name, depth, feeds)

    def interpreter(
        self,
        name: str,
        words: list[Word],
        feeds: tuple[str, ...],
        stdin_code: bool,
        depth: int = 0,
        *,
        stdin: Word | None = None,
    ) -> None:
        for glob, flags in CODE_FLAGS.items():
            if not fnmatchcase(name, glob):
                continue
            self.preloads(name, words, feeds, depth)
            positional = False
            valued = interpreter_value_options(name)
            skip = False
            for w in words[1:]:
                v = w.value
                if skip:  # the value of the option before ('-W ignore', '-r fs')
                    skip = False
                    continue
                if (
                    v in flags
                    or long_option(v, flags, name) is not None  # '--eval=CODE', '--ev CODE'
                    or (
                        (cluster := short_cluster(v)) is not None
                        and any(len(f) == 2 and f[1] in cluster for f in flags)
                    )
                ):
                    self.hazard("interpreter", f"{name} {v} runs code given as an argument", feeds)
                    return
                if v in valued:
                    skip = True
                    continue
                if not v.startswith("-") or v == "-":
                    # A stream path is the input: 'python3 /dev/stdin <<< CODE'.
                    positional = v != "-" and (w.dynamic or not is_stream_path(v))
                    if positional and not w.dynamic:
                        self.note_run(v, False, depth, feeds, name)
                    break
            if not positional and stdin_code:
                self.hazard("interpreter", f"{name} reads code from its input", feeds)
            self.script_modes(name, words, feeds, stdin_code, depth)
            return
        if name in ("awk", "gawk", "mawk", "nawk", "sed") and runtime_script(
            name, tuple(words[1:])
        ):
            # 'S="1e rm -rf /"; sed "$S" f': code only known at run time, as 'sh -c "$S"'.
            self.hazard("dynamic", f"{name} program is only known at run time", feeds)
        if name == "gdb":
            reason = gdb_code(words, stdin_code)
            if reason is not None:
                self.hazard("interpreter", reason, feeds)
            else:
                # The program it loads: one this command writes is run as a script is.
                program = next((w for w in words[1:] if not w.value.startswith("-")), None)
                if program is not None and not program.dynamic:
                    self.note_run(program.value, False, depth, feeds, name)
        elif name in ("awk", "gawk", "mawk", "nawk"):
            if awk_runs_commands(words):
                self.hazard("interpreter", f"{name} program runs commands", feeds)
            if awk_outputs(name, tuple(words[1:]))[1]:
                # 'print > $1': the files it writes are named by its input.
                self.hazard("dynamic", f"{name} program writes a file named at run time", feeds)
            self.program_files(
                name,
                awk_programs(words)[1],
                stdin=stdin,
                stdin_code=stdin_code,
                depth=depth,
                feeds=feeds,
            )
        elif name == "sed":
            if sed_runs_commands(words):
                self.hazard("interpreter", "sed script executes commands", feeds)
            self.program_files(
                name,
                sed_script_files(words),
                stdin=stdin,
                stdin_code=stdin_code,
                depth=depth,
                feeds=feeds,
            )
        elif stdin_code and (
            name in ("ex", "nex")
            or (
                name in _VI_FAMILY
                and any((c := short_cluster(w.value)) and ("e" in c or "E" in c) for w in words)
            )
        ):
            self.hazard("interpreter", f"{name} reads ex commands from its input", feeds)
        elif name in ("ed", "red"):
            self.ed(words, feeds, depth, stdin=stdin, stdin_code=stdin_code)
        self.script_modes(name, words, feeds, stdin_code, depth)
        self.option_code(name, words, feeds, depth)

    def ed(
        self,
        words: list[Word],
        feeds: tuple[str, ...],
        depth: int,
        *,
        stdin: Word | None,
        stdin_code: bool,
    ) -> None:
        """ed (and red) reads its commands from its input, and '!CMD' among them runs CMD
        through the shell (as ex's do): a literal input has its '!' command lines read as
        shell (:func:`runtime.policy._tool_options.ed_commands`) and the files its 'w'
        commands write (:func:`~runtime.policy._tool_options.ed_written_files`) judged as
        writes, any other input asks."""
        text = literal_text(stdin)
        for value in ed_commands(words, text):
            self.shell_string(value, depth, feeds)
        for written in ed_written_files(words, text):
            # 'w FILE' among its commands: judged by the path rules as 'ed FILE' is (a
            # reading of this ed, as find's '-delete' is an 'rm -r').
            self.commands.append(
                SimpleCommand(
                    "ed",
                    (written,),
                    feeds=feeds,
                    speculative=True,
                    cwd=self.cwd,
                    dirs=tuple(self.dirs),
                )
            )
        if text is None and stdin_code:
            self.hazard("interpreter", "ed reads commands from its input", feeds)

    def script_modes(
        self, name: str, words: list[Word], feeds: tuple[str, ...], stdin_code: bool, depth: int
    ) -> None:
        """Files a program runs as code at start-up, and modes that run text or the input
        as code: python's '-i' and its code-running modules
        (:mod:`runtime.policy._python_modules`), 'vim -S FILE', 'less --lesskey-src FILE',
        'perl -d' with '.perldb' (:mod:`runtime.policy._script_options`). Code given as
        text asks (it cannot be read), the input read as code asks when it is fed one,
        and a named file is a script the command runs: one it writes asks
        (:meth:`note_run`)."""
        files: list[Word] = []
        if fnmatchcase(name, "python*") or fnmatchcase(name, "pypy*"):
            run = python_run(words)
            if run.code is not None:
                self.hazard("interpreter", run.code, feeds)
            if run.reads_input and stdin_code:
                self.hazard("interpreter", f"{name} reads statements from its input", feeds)
            files += run.files
        elif fnmatchcase(name, "perl*"):
            files += [Word(f) for f in perl_debugger_files(words)]
        elif name in VIM_NAMES:
            files += vim_scripts(name, words)
        elif name == "less":
            sources, texts = lesskey_sources(words)
            if texts:
                self.hazard("interpreter", "less reads key bindings and variables as text", feeds)
            files += sources
        for f in files:
            if not f.dynamic:
                self.note_run(f.value, False, depth, feeds, name)

    def option_code(self, name: str, words: list[Word], feeds: tuple[str, ...], depth: int) -> None:
        """Command lines in option values ('--rsh=CMD', '-o ProxyCommand=CMD') and
        arguments that make the tool run commands (:data:`HAZARD_ARGS`). Wrappers get it
        for their own options ('ssh -o ProxyCommand=CMD host')."""
        self.tool_options(name, words, feeds, depth)
        for k, w in enumerate(words[1:], 1):
            for prefix in _COMMAND_VALUED:
                if w.value.startswith(prefix):
                    self.shell_string(w.tail(len(prefix)), depth, feeds)
            opt = long_option(w.value, COMMAND_OPTIONS, name)
            if opt is None:
                continue
            value = (
                Word(w.value.split("=", 1)[1], w.dynamic)
                if "=" in w.value
                else words[k + 1]
                if k + 1 < len(words)
                else None
            )
            action = COMMAND_OPTIONS[opt]
            if value is not None and value.value.startswith(action):
                self.shell_string(Word(value.value[len(action) :], value.dynamic), depth, feeds)
        patterns = HAZARD_ARGS.get(name)
        # An option whose command line is read as shell is judged by what that runs:
        # 'git rebase --exec CMD' as 'git rebase -x CMD' (the pattern '--exec*' is there for
        # 'git --exec-path=DIR' and options no table reads, as 'git archive --exec=CMD').
        read = {k for k, _ in git_shell_options(words)} if name == "git" else set()
        if patterns:
            for k, w in enumerate(words[1:], 1):
                if k in read:
                    continue
                if any(_hazard_arg(w.value, p, name) for p in patterns):
                    self.hazard("interpreter", f"{name} {w.value} can run commands", feeds)
                    return

    def tool_options(
        self, name: str, words: list[Word], feeds: tuple[str, ...], depth: int
    ) -> None:
        """What a tool's options run (:mod:`runtime.policy._tool_options`): command lines
        read as shell ('tar -cI CMD', 'ssh -o proxycommand CMD', 'make x!=CMD'), programs
        and libraries that cannot be read as hazards, and files read as its configuration
        as a script it runs (one this command writes asks)."""
        found = tool_option_code(name, words)
        for value in found.shell:
            self.shell_string(value, depth, feeds)
        for value in found.guesses:
            self.speculating += 1
            self.guessing += 1
            try:
                self.shell_string(value, depth, feeds)
            finally:
                self.guessing -= 1
                self.speculating -= 1
        for reason in found.hazards:
            self.hazard("interpreter", reason, feeds)
        for argv in found.argvs:
            if argv[0].dynamic:
                self.hazard("interpreter", f"{name} runs a program named at run time", feeds)
            else:
                # The tool's own arguments follow ('cc1 ...', 'HOST /etc/rmt', 'A B'):
                # known at run time only, so a rule needing them may match (asks).
                self.run_argv([*argv, Word("$@", dynamic=True)], depth, feeds, (name,))
        for f in found.files:
            if f.dynamic:
                self.hazard("interpreter", f"{name} reads a file named at run time", feeds)
            else:
                self.note_run(f.value, False, depth, feeds, name)
        if found.response is not None:
            if words[found.response].dynamic:
                self.hazard(
                    "interpreter", f"{name} reads options from a file named at run time", feeds
                )
            else:
                self.note_response(words, found.response, depth, feeds)

    def find_exec(
        self, words: list[Word], depth: int, feeds: tuple[str, ...], wrappers: tuple[str, ...]
    ) -> None:
        i = 1
        while i < len(words):
            if words[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
                # '{}' alone names the entries found: below the start paths when the tests
                # before narrow by name ('-name node_modules -exec rm -rf {} +').
                found = find_exec_operands(words, i)
                j = i + 1
                sub: list[Word] = []
                while j < len(words) and words[j].value not in (";", "+"):
                    w = words[j]
                    if w.value == "{}" and found is not None and sub:
                        sub.extend(found)
                    elif "{}" in w.value:
                        sub.append(Word(w.value, dynamic=True, operand=True))
                    else:
                        sub.append(w)
                    j += 1
                if sub:
                    self.run_argv(sub, depth, feeds, (*wrappers, "find"))
                i = j
            i += 1
