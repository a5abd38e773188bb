"""Wrapper see-through for the shell walker: from a simple command's words to every program
it would run. Wrappers (``env``, ``sudo``, ``timeout``, ``xargs``, the dynamic loader ...)
are unwrapped by their option tables (and every other reading of them), shells and ``eval``
have their code read as shell; what other tools carry in their words (interpreters' code,
``find -exec``, ``git`` aliases, tmux's command lines) is :mod:`._shell_code`'s. See
:mod:`runtime.policy.shell`.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from runtime.policy._builtin_assigns import DECLARERS, builtin_assignments, declared_names
from runtime.policy._shell_model import MAX_READINGS, SimpleCommand
from runtime.policy._shell_state import WalkerState
from runtime.policy._sweeps import find_delete_roots
from runtime.policy._tool_commands import option_commands
from runtime.policy._tool_options import env_split_string
from runtime.policy._writes import CONTENT_WRITERS, content_writes
from runtime.policy.argv import (
    Word,
    is_dynamic_name,
    join_words,
    literal_text,
    program_name,
    shell_options,
    short_cluster,
    skip_options,
    unwrap,
)
from runtime.policy.embedded import (
    env_chdir,
    is_stream_path,
    option_env,
    script_key,
    written_by_args,
    xargs_replace,
)
from runtime.policy.wrappers import (
    LOADER_GLOBS,
    SHELLS,
    SUBCOMMAND_WRAPPERS,
    WRAPPERS,
    Wrapper,
)

__all__ = ["WrappersMixin"]

# Builtins that only assign variables from their input: an IFS given as their prefix
# assignment (``while IFS= read -r line``) is scoped to them and steers only how they split
# what they read, never which code runs; they are regular builtins, so it does not persist.
_IFS_SCOPED = frozenset({"read", "mapfile", "readarray"})


class WrappersMixin(WalkerState):
    """What a simple command runs (a part of the walker)."""

    def simple(
        self,
        words: list[Word],
        assigns: tuple[str, ...],
        redirects: tuple[Word, ...],
        *,
        feeds: tuple[str, ...],
        stdin_code: bool,
        stdin: Word | None,
        depth: int,
        wrappers: tuple[str, ...],
    ) -> None:
        def rec(program: str, argv: list[Word]) -> None:
            self.record(
                program,
                argv,
                assigns=assigns,
                redirects=redirects,
                feeds=feeds,
                wrappers=wrappers,
            )

        if self.full():
            return
        if "CDPATH" in assigns:
            self.cdpath = True  # a relative 'cd' may now go anywhere
        if not words:
            if assigns or redirects:
                # '> FILE', 'X=1': judged from every directory a 'cd' may have reached, as
                # a program's redirects are ('cd .git && > config').
                self.record(
                    "",
                    [Word("")],
                    assigns=assigns,
                    redirects=redirects,
                    feeds=feeds,
                    wrappers=wrappers,
                )
            return
        head = words[0]
        if is_dynamic_name(head):
            if not self.speculating:
                self.hazard(
                    "dynamic", f"command name {head.value!r} is only known at run time", feeds
                )
                rec("", words)
            return
        name = program_name(head.value)
        if "/" in head.value:
            self.note_run(head.value, True, depth, feeds, head.value)
        spec = WRAPPERS.get(name)
        if spec is None and any(fnmatchcase(name, g) for g in LOADER_GLOBS):
            spec = Wrapper("", frozenset({"--library-path", "--preload", "--argv0", "--audit"}))
        if spec is not None:
            rest, extra_assigns, values = unwrap(words, spec)
            start = len(words) - len(rest)
            rec(name, words[:start])
            env = option_env(name, words[1:start])  # 'systemd-run -E NAME=VALUE'
            extra_assigns += tuple(w.value.split("=", 1)[0] for w in env)
            self.env_values([*(words[1:start] if spec.assignments else []), *env], depth, feeds)
            if name == "env":
                chdir = env_chdir(words[1:start])
                if chdir is not None:
                    self.change_directory(chdir)
            self.other_readings(
                words, start, values, assigns=assigns, redirects=redirects, feeds=feeds, depth=depth
            )
            self.option_code(name, words[:start], feeds, depth)  # 'ssh -o ProxyCommand=CMD'

            for s in shell_options(words, spec):
                # 'env -S STRING' is split by env's rules ('\_' separates), not the shell's.
                self.shell_string(env_split_string(s) if name == "env" else s, depth, feeds)
            if rest and (spec.joins or _has_letter(words[1:start], spec.joins_with)):
                self.shell_string(
                    Word(" ".join(w.value for w in rest), any(w.dynamic for w in rest)),
                    depth,
                    feeds,
                )
                return
            if spec.stdin_args and rest:
                replace = xargs_replace(words[1:start]) if name == "xargs" else None
                if replace:
                    # 'xargs -I % sh -c "rm -rf %"': every word holding the replace
                    # string gets a line of the input.
                    rest = [Word(w.value, True) if replace in w.value else w for w in rest]
                rest = [*rest, Word("{}", dynamic=True)]
            if rest:
                self.simple(
                    rest,
                    assigns + extra_assigns,
                    redirects,
                    feeds=feeds,
                    stdin_code=stdin_code,
                    stdin=stdin,
                    depth=depth,
                    wrappers=(*wrappers, name),
                )
            return
        sub = SUBCOMMAND_WRAPPERS.get(name)
        if sub is not None and len(words) > 1 and words[1].value in sub:
            rest = skip_options(words[2:])
            rec(name, words[:2])
            for value in option_commands(name, words):  # 'npm exec -c CMD'
                self.shell_string(value, depth, feeds)
            if rest:
                self.simple(
                    rest,
                    assigns,
                    redirects,
                    feeds=feeds,
                    stdin_code=stdin_code,
                    stdin=stdin,
                    depth=depth,
                    wrappers=(*wrappers, name),
                )
            return
        # 'npm --node-options=V' is 'NODE_OPTIONS=V npm' (embedded.option_env).
        env = option_env(name, words[1:])
        if env:
            assigns += tuple(w.value.split("=", 1)[0] for w in env)
            self.env_values(env, depth, feeds)
        assigned = builtin_assignments(name, words, literal_text(stdin), "IFS" in assigns)
        if "IFS" in assigns and name in _IFS_SCOPED and not wrappers:
            # 'while IFS= read -r line': judged as read without it (its fields above are
            # still not known here); unless this command redefines read (see finish).
            self.ifs_scoped.append((name, feeds))
            assigns = tuple(a for a in assigns if a != "IFS")
        if assigned is not None:  # 'printf -v NAME V', 'read NAME': as 'NAME=V'
            if assigned.unknown_name:
                self.hazard("dynamic", f"{name} assigns a variable named at run time", feeds)
            for code in assigned.code:
                # 'mapfile -C CODE': run as 'CODE INDEX LINE', the line read at run time
                # ('mapfile -C "rm -rf" < list' removes every line it reads).
                self.shell_string(Word(code.value + ' "$index" "$line"', True), depth, feeds)
            if assigned.words:
                self.environment(assigned.words, depth, feeds)
        embedded = self.embedded_commands(
            name,
            words,
            depth,
            feeds,
            stdin=stdin,
            stdin_code=stdin_code,
            wrappers=wrappers,
        )
        for path in written_by_args(name, words[1:]):
            self.written.setdefault(script_key(path), []).append(None)
            self.writers.setdefault(script_key(path), set()).add(name)
        if name in CONTENT_WRITERS:  # the walk runs per command: a name test first
            self.content_written(name, words, stdin)
        if name in SHELLS:
            self.startup(name, words, depth, feeds)
            self.shell(
                name,
                words,
                depth=depth,
                feeds=feeds,
                stdin_code=stdin_code,
                stdin=stdin,
            )
        elif name in ("cd", "pushd", "popd", "chdir"):
            self.directory_builtin(name, words)
        elif name in ("eval",):
            self.hazard("dynamic", "eval runs a string built at run time", feeds)
            self.shell_string(join_words(words[1:]), depth, feeds)
        elif name in (".", "source"):
            if len(words) > 1:
                self.sourced(name, words[1], depth, feeds)
        elif name == "alias":
            for w in words[1:]:
                if "=" in w.value:
                    self.aliases.add(w.value.split("=", 1)[0])
                    self.shell_string(Word(w.value.split("=", 1)[1], w.dynamic), depth, feeds)
        elif name in ("export", "declare", "typeset", "readonly", "local"):
            if any(w.value.startswith("CDPATH") or w.dynamic for w in words[1:]):
                self.cdpath = True
            self.env_values(words[1:], depth, feeds)
            # A run-time value leaves the name known ('export PATH=$PATH:bin' is PATH,
            # 'export GOPATH=$HOME/go' no PATH): judged by the rules on assigned names, as
            # 'NAME=VALUE cmd' is.
            self.assigned_names([w for w in words[1:] if w.dynamic], feeds)
        elif name == "enable":
            # 'enable -n read': 'read' is then found as a function or on PATH.
            self.redefined.update(w.value for w in words[1:] if not w.value.startswith("-"))
            if any("f" in (short_cluster(w.value) or "") for w in words[1:]):
                # 'enable -f lib.so NAME' loads a builtin from a shared object: its code.
                self.hazard("interpreter", "enable -f loads a builtin from a shared object", feeds)
        elif name == "hash":
            self.hashed_names(words, feeds)
        elif name == "trap":
            # 'trap [-lpP] [--] ACTION SIGNAL...': the first word after the options.
            rest = words[1:]
            while rest and rest[0].value.startswith("-") and rest[0].value != "-":
                done = rest[0].value == "--"
                rest = rest[1:]
                if done:
                    break
            if rest:
                self.shell_string(rest[0], depth, feeds)
        elif name == "compgen":
            for code in _compgen_commands(words):  # 'compgen -C CMD' runs CMD
                self.shell_string(code, depth, feeds)
        else:
            self.interpreter(name, words, feeds, stdin_code, depth, stdin=stdin)
            if not embedded:
                self.guess_shells(words, depth, feeds)
        rec(name, words)
        if name in DECLARERS:
            # The names literal words set ('export AWS_KEY=1', 'declare -x AWS_KEY',
            # 'readonly AWS_KEY=1'): an 'assigns' rule matches them as it does 'AWS_KEY=1
            # cmd'. After the builtin's own record, so that export-loader-env (a rule on
            # the builtin) names the decision it makes.
            self.assigned_names(declared_names(name, words[1:]), feeds)
        if name == "find":
            # After find's own record, so that a rule on find names the decision.
            roots = find_delete_roots(words)
            if roots:
                # 'find . -delete' empties '.' as 'rm -r .' would: the rm rules judge it (a
                # reading, so speculative: an allowlist does not ask for 'rm').
                self.commands.append(
                    SimpleCommand(
                        "rm",
                        (Word("-r"), *roots),
                        assigns,
                        redirects,
                        feeds,
                        (*wrappers, "find"),
                        speculative=True,
                        cwd=self.cwd,
                        dirs=tuple(self.dirs),
                    )
                )

    def run_argv(
        self, argv: list[Word], depth: int, feeds: tuple[str, ...], wrappers: tuple[str, ...]
    ) -> None:
        """Check a program and arguments another program runs (no shell in between)."""
        self.simple(
            argv,
            (),
            (),
            feeds=feeds,
            stdin_code=False,
            stdin=None,
            depth=depth,
            wrappers=wrappers,
        )

    def other_readings(
        self,
        words: list[Word],
        start: int,
        values: tuple[int, ...],
        *,
        assigns: tuple[str, ...],
        redirects: tuple[Word, ...],
        feeds: tuple[str, ...],
        depth: int,
    ) -> None:
        """Check the commands a wrapper would run if its option table were wrong.

        The tables say which options take a separate value; a wrong entry either swallows
        the program as a value ('xargs -i rm -rf {}' read 'rm' as -i's value) or leaves a
        value as the program ('ltrace -o FILE rm': 'FILE' would run). Both readings are
        checked: from every word read as a value, and from the word after the program when
        an option stands right before it. They are speculative: deny and ask rules apply,
        an allowlist does not (the word may never run), and run-time names are no hazard.
        """
        starts = [k for k in values if k != start and not words[k].value.startswith("-")]
        before = words[start - 1].value if start >= 2 else ""
        if (
            start < len(words)
            and start - 1 not in values
            and before.startswith("-")
            and before not in ("-", "--")
            and "=" not in before
        ):
            starts.append(start + 1)
        for k in starts:
            if k >= len(words):
                continue
            if self.readings >= MAX_READINGS:
                # Every reading is a walk of the rest of the words: a crafted chain of
                # wrappers would make them grow without bound. Past the budget the words
                # are not read every way, so they are not understood: say so.
                if not self.readings_exhausted:
                    self.readings_exhausted = True
                    self.hazard("unparseable", f"more than {MAX_READINGS} readings of wrappers")
                return
            self.readings += 1
            self.speculating += 1
            try:
                self.simple(
                    words[k:],
                    assigns,
                    redirects,
                    feeds=feeds,
                    stdin_code=False,
                    stdin=None,
                    depth=depth,
                    wrappers=(),
                )
            finally:
                self.speculating -= 1

    def sourced(self, name: str, word: Word, depth: int, feeds: tuple[str, ...]) -> None:
        """A file ``name`` reads as shell code in the running shell ('. FILE', 'bash
        --rcfile FILE'): a run-time name or a stream is code the command gives it; a file
        the same command writes is read (:meth:`note_run`)."""
        if word.dynamic:
            self.hazard("interpreter", f"{name} runs code from a substitution", feeds)
        elif is_stream_path(word.value):
            self.hazard("interpreter", f"{name} reads code from its input", feeds)
        else:
            self.note_run(word.value, True, depth, feeds, name)

    def hashed_names(self, words: list[Word], feeds: tuple[str, ...]) -> None:
        """'hash -p FILE NAME...': each NAME now runs FILE ('hash -p /bin/rm ls; ls -rf /'
        runs rm), as an alias would: a later command by that name asks (see finish). bash
        reads '-p FILE', '-pFILE' and '-rp FILE'; the names follow the options."""
        target: Word | None = None
        names: list[Word] = []
        i = 1
        while i < len(words):
            w = words[i]
            cluster = short_cluster(w.value) if not names else None
            if w.value == "--" and not names:
                names = list(words[i + 1 :])
                break
            if cluster is not None and "p" in cluster:
                at = cluster.index("p")
                if at == len(cluster) - 1:
                    target = words[i + 1] if i + 1 < len(words) else None
                    i += 2
                    continue
                target = w.tail(at + 2)
            elif cluster is None:
                names.append(w)
            i += 1
        if target is None:
            return
        for n in names:
            if n.dynamic:
                self.hazard(
                    "dynamic", "hash -p gives a program to a name only known at run time", feeds
                )
            else:
                self.aliases.add(n.value)

    def content_written(self, name: str, words: list[Word], stdin: Word | None) -> None:
        """Files a program fills with content it reads (:func:`content_writes`), as '>
        FILE' is a command's output: a script the command then runs is read from that
        content. Its input ('/dev/stdin'): a literal here-document's text, else only known
        at run time; a process substitution: known at run time; a file this command wrote:
        that file's content (and writers: 'curl -o x; cp x y; sh y' is fed by curl). A
        file already in the workspace is not followed: running it is as 'bash FILE' is."""
        for into, source in content_writes(SimpleCommand(name, tuple(words[1:]))):
            if into.dynamic:
                continue
            writers = {name}
            content: str | None
            if source is None or (not source.dynamic and is_stream_path(source.value)):
                content = literal_text(stdin)
            elif source.dynamic:  # '<(...)', '"$f"'
                content = None
            else:
                earlier = self.written.get(script_key(source.value))
                if earlier is None:
                    continue
                known = [c for c in earlier if c is not None]
                content = "\n".join(known) if len(known) == len(earlier) else None
                writers |= self.writers.get(script_key(source.value), set())
            self.written.setdefault(script_key(into.value), []).append(content)
            self.writers.setdefault(script_key(into.value), set()).update(writers)

    def shell_string(self, word: Word, depth: int, feeds: tuple[str, ...]) -> None:
        if word.dynamic:
            self.hazard("dynamic", "shell code is built at run time", feeds)
        self.parse(word.value, depth + 1, feeds)

    def shell(
        self,
        name: str,
        words: list[Word],
        *,
        depth: int,
        feeds: tuple[str, ...],
        stdin_code: bool,
        stdin: Word | None,
    ) -> None:
        code_mode = stdin_mode = False
        i = 1
        while i < len(words):
            v = words[i].value
            if v in {"--", "-"}:
                stdin_mode = stdin_mode or v == "-"
                i += 1
                break
            if v in ("--rcfile", "--init-file") and i + 1 < len(words):
                # An interactive bash sources FILE before its commands, as '. FILE' does
                # (bash reads its long options whole: no '--rcfile=FILE', no prefixes).
                self.sourced(name, words[i + 1], depth, feeds)
            if v in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 2
                continue
            cluster = (
                short_cluster(v)
                if v.startswith("-")
                else (v[1:] if v.startswith("+") and len(v) > 1 else None)
            )
            if cluster is None and not v.startswith("--"):
                break
            if cluster is not None and "c" in cluster and v.startswith("-"):
                code_mode = True
            if cluster is not None and "s" in cluster:
                stdin_mode = True
            i += 1
        positional = words[i] if i < len(words) else None
        if code_mode:
            if positional is not None:
                self.shell_string(positional, depth, feeds)
            return
        if positional is not None and not positional.dynamic and is_stream_path(positional.value):
            stdin_mode = True  # 'sh /dev/stdin <<< CODE' reads its input like 'sh -s'
        if positional is not None and not stdin_mode:
            if positional.dynamic:
                self.hazard("interpreter", f"{name} runs a script from a substitution", feeds)
            else:
                self.note_run(positional.value, True, depth, feeds, name)
            return
        if stdin is not None:
            # A here-document or here-string: its text is the script ('bash <<EOF'). An
            # unquoted one that expands is built at run time ('echo $X' runs X's '; rm').
            self.shell_string(stdin, depth, feeds)
        elif stdin_code:
            self.hazard("interpreter", f"{name} reads code from its input", feeds)


def _compgen_commands(words: list[Word]) -> list[Word]:
    """The command lines 'compgen -C CMD' (or '-CCMD', '-aC CMD') runs to make its words."""
    out: list[Word] = []
    i = 1
    while i < len(words):
        v = words[i].value
        if v == "--":
            break
        cluster = short_cluster(v)
        if cluster is not None and "C" in cluster:
            at = cluster.index("C")
            if at < len(cluster) - 1:
                out.append(words[i].tail(at + 2))
            elif i + 1 < len(words):
                out.append(words[i + 1])
                i += 1
        i += 1
    return out


def _has_letter(options: list[Word], letter: str) -> bool:
    """Whether a short option cluster among ``options`` holds ``letter`` ('' never)."""
    return bool(letter) and any(letter in (short_cluster(w.value) or "") for w in options)
