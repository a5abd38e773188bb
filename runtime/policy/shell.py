"""Shell command analysis: a bashlex parse turned into the simple commands that would run.

What an attacker controls is the whole command string. The analysis is conservative:

- every simple command is found, wherever it sits (lists, pipelines, ``$()``, backticks,
  process substitution, function bodies, loops, here-docs fed to a shell, ``sh -c`` strings,
  ``eval`` strings, alias values);
- wrappers are seen through (``env``, ``sudo``, ``timeout``, ``xargs``, ``find -exec``,
  ``busybox``, the dynamic loader, ``uv run`` ...) and the program is reduced to its base name
  (``/proc/self/root/usr/bin/rm`` -> ``rm``; bashlex has already removed quotes and ``\\``);
- anything decided only at run time is reported as a hazard, never guessed: a command name
  with ``$``, backticks, globs or braces, ``eval``, interpreters fed code, input the parser
  cannot read. The policy maps hazards to ask or deny, never to allow.

The result depends only on the string, so it is cached.
"""

from __future__ import annotations

import functools
import posixpath
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

import bashlex
import bashlex.errors
import bashlex.subst

from runtime.policy.argv import (
    Word,
    is_dynamic_name,
    join_words,
    program_name,
    shell_options,
    short_cluster,
    skip_options,
    unquote,
    unwrap,
)
from runtime.policy.embedded import (
    awk_runs_commands,
    capsh_shell_args,
    command_env_values,
    daemon_argv,
    env_chdir,
    git_commands,
    git_config_commands,
    hyperfine_commands,
    interpreter_value_options,
    is_stream_path,
    make_reads_input,
    script_key,
    sed_runs_commands,
    written_by_args,
    written_content,
    xargs_replace,
)
from runtime.policy.wrappers import (
    CODE_FLAGS,
    HAZARD_ARGS,
    LOADER_GLOBS,
    SHELLS,
    SUBCOMMAND_WRAPPERS,
    WRAPPERS,
    Wrapper,
)

__all__ = [
    "Analysis",
    "Hazard",
    "HazardKind",
    "SimpleCommand",
    "Word",
    "analyse",
]

HazardKind = Literal["dynamic", "interpreter", "unparseable", "fork_bomb"]


def _guard_bashlex() -> None:
    """Make bashlex refuse an unclosed ``${`` instead of looping forever.

    Why: bashlex 0.18's word expansion (``subst._expandwordinternal``) moves its index to
    what ``_paramexpand`` returns, and for ``${`` without a closing ``}`` that is 0 (its
    ``str.find`` gives -1, plus one): the loop starts the word over, for ever, growing its
    output. A five-character command (``a'${'``) froze the broker, holding the GIL, in the
    middle of a policy decision. A returned index that does not move forward becomes the
    ``ParsingError`` bashlex raises for other bad substitutions; ``_Walker.parse`` turns
    that into an ``unparseable`` hazard (ask or deny, never allow). Hazard: this replaces a
    private function of bashlex for the whole process; a bashlex without it (or that fixed
    it) is left as it is, and ``tests/policy/test_shell_hang.py`` fails if the hang is back.
    """
    subst = getattr(bashlex, "subst", None)
    original = getattr(subst, "_paramexpand", None)
    if original is None or getattr(original, "_runtime_guard", False):
        return

    def paramexpand(parserobj: Any, string: str, sindex: int) -> Any:
        node, end = original(parserobj, string, sindex)
        if end <= sindex:
            raise bashlex.errors.ParsingError("bad substitution: no closing '}'", string, sindex)
        return node, end

    paramexpand._runtime_guard = True  # type: ignore[attr-defined]
    subst._paramexpand = paramexpand  # type: ignore[union-attr]


_guard_bashlex()

MAX_COMMAND_CHARS = 65_536
MAX_DEPTH = 8
MAX_COMMANDS = 512
MAX_READINGS = 16

_BRACE_RE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_TIME_RE = re.compile(r"(^|[;&|(\n]\s*)time(?:\s+-p)?\s+(?![\s-])")
# 'time' followed by another option is not bash's keyword (and dash has none): it is
# /usr/bin/time, a wrapper ('time -f %e rm -rf /' runs rm). Quoting it makes it a word.
_TIME_PROGRAM_RE = re.compile(r"(^|[;&|(\n]\s*)time(?=\s+-)")
_ARITH_RE = re.compile(r"\$\(\([^()$`]*\)\)")
_QUOTED_HEREDOC_RE = re.compile(r"<<(-?)\s*(?:(['\"])(\w+)\2|\\(\w+))")
_DBRACKET_OPEN_RE = re.compile(r"(?<![^\s;&|(!])\[\[(?=\s)")
_DBRACKET_CLOSE_RE = re.compile(r"(?<=\s)\]\](?=$|[\s;&|)])")
_OUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
# bash opens a socket for /dev/tcp and /dev/udp whichever way the redirect points: an input
# redirect from one ('cat < /dev/tcp/host/80') is listed with the output targets, so that
# the rules on redirect targets (commands.deny.dev-tcp) see it.
_SOCKET_PATH_RE = re.compile(r"^/+dev/+(tcp|udp)/")
_IN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<"})
# Options whose value is a command line run by the tool (tar, rsync, git, ssh).
_COMMAND_VALUED = (
    "--checkpoint-action=exec=",
    "--to-command=",
    "--use-compress-program=",
    "--rsh=",
    "--info-script=",
    "--new-volume-script=",
    "core.pager=",
    "core.sshCommand=",
    "core.editor=",
    "ProxyCommand=",
    "LocalCommand=",
)


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    program: str  # base name of the program after wrappers ('' for assignments only)
    args: tuple[Word, ...] = ()
    assigns: tuple[str, ...] = ()  # variable names set for it (VAR=x cmd, env VAR=x)
    redirects: tuple[Word, ...] = ()  # output redirection targets
    feeds: tuple[str, ...] = ()  # programs whose output reaches its input or code
    wrappers: tuple[str, ...] = ()  # wrappers seen through, outermost first
    # One of the other readings of a wrapper's options (see _Walker.simple): deny and ask
    # rules apply to it, an allowlist does not (it may name a word that never runs).
    speculative: bool = False
    # The directory relative paths are taken from when an earlier 'cd' (or 'env -C') left
    # the starting directory for somewhere outside it ('cd / && rm -rf etc'); None when no
    # such 'cd' ran. A dynamic Word: the directory is only known at run time.
    cwd: Word | None = None


@dataclass(frozen=True, slots=True)
class Hazard:
    kind: HazardKind
    detail: str
    feeds: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Analysis:
    commands: tuple[SimpleCommand, ...]
    hazards: tuple[Hazard, ...]


@dataclass
class _Walker:
    commands: list[SimpleCommand] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    overflow: bool = False
    literal_heredocs: set[str] = field(default_factory=set)
    speculating: int = 0
    readings: int = 0  # other readings of wrapper options walked (see other_readings)
    readings_exhausted: bool = False
    aliases: set[str] = field(default_factory=set)
    cwd: Word | None = None  # see SimpleCommand.cwd
    directory: Word | None = None  # where 'cd' went, relative to the start or absolute
    # Scripts this command writes (by base name): their contents when literal, else None.
    written: dict[str, list[str | None]] = field(default_factory=dict)
    # The programs that wrote each of them ('curl' in 'curl -o i.sh URL; sh i.sh').
    writers: dict[str, set[str]] = field(default_factory=dict)
    # Scripts this command runs: (base name, shell or not, depth, feeds, what runs it).
    runs: list[tuple[str, bool, int, tuple[str, ...], str]] = field(default_factory=list)

    # -- parsing ---------------------------------------------------------------------------

    def parse(self, text: str, depth: int, feeds: tuple[str, ...] = ()) -> None:
        if depth > MAX_DEPTH:
            self.hazard("unparseable", "commands nested too deeply")
            return
        if "\x00" in text:
            self.hazard("unparseable", "NUL byte in command")
            return
        if len(text) > MAX_COMMAND_CHARS:
            self.hazard("unparseable", f"command longer than {MAX_COMMAND_CHARS} characters")
            return
        if not text.strip():
            return
        try:
            trees = bashlex.parse(text)
        except Exception as exc:  # bashlex raises many types; all mean "cannot read it"
            # bashlex lacks the 'time' keyword and '[[ ]]'. Dropping 'time' and reading
            # '[[ ]]' as '[ ]' removes no command from the text, so the retry sees at least
            # every command that would run.
            retry = _DBRACKET_CLOSE_RE.sub(
                "]",
                _DBRACKET_OPEN_RE.sub(
                    "[", _TIME_PROGRAM_RE.sub(r"\1\\time", _TIME_RE.sub(r"\1", text))
                ),
            )
            # Arithmetic without substitutions inside holds no command: a parameter stands in.
            retry = _ARITH_RE.sub("$_ARITH", retry)
            # bashlex rejects quoted here-doc delimiters (<<'EOF'); their bodies are literal,
            # which is remembered so that the body is not read for substitutions.
            for m in _QUOTED_HEREDOC_RE.finditer(retry):
                self.literal_heredocs.add(m.group(3) or m.group(4))
            retry = _QUOTED_HEREDOC_RE.sub(
                lambda m: "<<" + m.group(1) + (m.group(3) or m.group(4)), retry
            )
            try:
                if retry == text:
                    raise
                trees = bashlex.parse(retry)
                text = retry
            except Exception:
                self.hazard("unparseable", f"shell parser cannot read it ({type(exc).__name__})")
                return
        for tree in trees:
            self.node(tree, text, depth, feeds)

    def hazard(self, kind: HazardKind, detail: str, feeds: tuple[str, ...] = ()) -> None:
        self.hazards.append(Hazard(kind, detail, feeds))

    def full(self) -> bool:
        """True once the command count is past the cap (reported once, as unparseable)."""
        if len(self.commands) <= MAX_COMMANDS:
            return False
        if not self.overflow:
            self.overflow = True
            self.hazard("unparseable", f"more than {MAX_COMMANDS} commands")
        return True

    def node(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        if self.full():
            return
        kind = n.kind
        if kind == "command":
            self.command(n, text, depth, feeds, piped=False)
        elif kind == "pipeline":
            self.pipeline(n, text, depth, feeds)
        elif kind == "function":
            self.function(n, text, depth, feeds)
        elif kind in ("word", "assignment"):
            self.word(n, text, depth)
        else:
            for child in self.children(n):
                self.node(child, text, depth, feeds)

    @staticmethod
    def children(n: Any) -> list[Any]:
        out: list[Any] = []
        for attr in ("parts", "list"):
            out.extend(getattr(n, attr, None) or [])
        for attr in ("command", "output"):
            child = getattr(n, attr, None)
            if child is not None and hasattr(child, "kind"):
                out.append(child)
        return out

    def pipeline(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        upstream: tuple[str, ...] = feeds
        first = True
        for part in n.parts:
            if part.kind in ("pipe", "reservedword"):
                continue
            if self.full():
                return
            before = len(self.commands)
            if part.kind == "command":
                self.command(part, text, depth, upstream, piped=not first)
            else:
                self.node(part, text, depth, upstream)
            upstream = upstream + tuple(c.program for c in self.commands[before:] if c.program)
            first = False

    def function(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        name = n.parts[0].word if n.parts and n.parts[0].kind == "word" else ""
        before = len(self.commands)
        for child in n.parts[1:]:
            self.node(child, text, depth, feeds)
        if name and any(c.program == name for c in self.commands[before:]):
            self.hazard("fork_bomb", f"function {name!r} calls itself (fork-bomb shape)")

    def word(self, n: Any, text: str, depth: int) -> tuple[Word, tuple[str, ...]]:
        """The word, and the programs of the substitutions inside it (walked as commands)."""
        dynamic = False
        inner: list[str] = []
        for part in getattr(n, "parts", None) or []:
            if part.kind in ("commandsubstitution", "processsubstitution"):
                dynamic = True
                before = len(self.commands)
                self.node(part.command, text, depth, ())
                inner.extend(c.program for c in self.commands[before:] if c.program)
            elif part.kind == "parameter":
                dynamic = True
        raw = text[n.pos[0] : n.pos[1]] if hasattr(n, "pos") else n.word
        if "$" in raw or "`" in raw or _BRACE_RE.search(raw):
            dynamic = True
        value = n.word
        if not dynamic and n.kind == "word":
            # bashlex's own quote removal is wrong for mixed quoting ('a'"'"'b'); redo it.
            try:
                value = unquote(raw)
            except ValueError:
                dynamic = True
        return Word(value, dynamic), tuple(inner)

    def command(
        self, n: Any, text: str, depth: int, upstream: tuple[str, ...], *, piped: bool
    ) -> None:
        words: list[Word] = []
        assigns: list[str] = []
        redirects: list[Word] = []
        subst_feeds: list[str] = []
        stdin_text: str | None = None
        stdin_redirected = False
        literal_body = False  # only a quoted here-document's body is never expanded
        for part in n.parts:
            if part.kind == "word":
                w, inner = self.word(part, text, depth)
                words.append(w)
                subst_feeds.extend(inner)
            elif part.kind == "assignment":
                assigns.append(part.word.split("=", 1)[0].rstrip("+"))
                w, _ = self.word(part, text, depth)
                for value in command_env_values([w]):
                    self.shell_string(value, depth, upstream)
            elif part.kind == "redirect":
                rtype = part.type
                target = part.output if hasattr(part.output, "kind") else None
                if rtype in _IN_REDIRECTS:
                    stdin_redirected = True
                    heredoc = getattr(part, "heredoc", None)
                    if heredoc is not None:
                        stdin_text = heredoc.value.rsplit("\n", 1)[0]
                        delimiter = target.word if target is not None else ""
                        literal_body = delimiter in self.literal_heredocs
                        if delimiter not in self.literal_heredocs and (
                            "$(" in stdin_text or "`" in stdin_text
                        ):
                            # An unquoted here-doc expands substitutions in its body: read
                            # the body as shell so the commands inside are seen.
                            self.hazard("dynamic", "here-document body runs substitutions")
                            self.parse(stdin_text, depth + 1)
                    elif rtype == "<<<" and target is not None:
                        stdin_text = target.word
                if target is not None:
                    w, inner = self.word(target, text, depth)
                    subst_feeds.extend(inner)
                    if rtype in _OUT_REDIRECTS or _SOCKET_PATH_RE.match(w.value):
                        redirects.append(w)
        heredoc_literal = literal_body
        for w in redirects:
            if not w.dynamic:
                self.note_write(w.value, words, stdin_text, heredoc_literal)
        self.simple(
            words,
            tuple(assigns),
            tuple(redirects),
            feeds=upstream + tuple(subst_feeds),
            stdin_code=piped or stdin_redirected,
            stdin_text=stdin_text,
            depth=depth,
            wrappers=(),
        )

    # -- one simple command ----------------------------------------------------------------

    def record(self, program: str, words: list[Word], **kw: Any) -> None:
        self.commands.append(
            SimpleCommand(
                program,
                tuple(words[1:]),
                speculative=self.speculating > 0,
                cwd=self.cwd,
                **kw,
            )
        )

    def change_directory(self, target: Word) -> None:
        """Follow 'cd TARGET' lexically, for the relative paths of later commands.

        The directory is tracked from the start ('cd build; cd ..' is back at the start);
        later commands see it (SimpleCommand.cwd) only while it may lie outside the
        starting directory (absolute, '~', above the start, run-time values, 'cd -'):
        inside it, relative paths keep meaning what the rules already judge ('cd build &&
        rm -rf *' stays as it was). Scope is the whole command string, subshells included:
        over-approximation only makes more paths look like they leave.
        """
        if self.speculating:
            return
        v = target.value
        base = self.directory
        if target.dynamic or v == "-" or (base is not None and base.dynamic):
            self.directory = Word(v, dynamic=True)
        elif v.startswith(("/", "~")) or base is None:
            self.directory = Word(_lexical(v))
        else:
            self.directory = Word(_lexical(base.value + "/" + v))
        d = self.directory
        outside = d.dynamic or d.value.startswith(("/", "~")) or _climbs(d.value)
        self.cwd = d if outside else None

    def note_write(
        self, path: str, words: list[Word], stdin_text: str | None, literal: bool
    ) -> None:
        """Remember that this command writes ``path`` (a redirect target), with the text
        written when the command line holds it literally."""
        content: str | None = None
        if words and not is_dynamic_name(words[0]):
            content = written_content(program_name(words[0].value), words[1:], stdin_text)
        if content is not None and not literal and ("$" in content or "`" in content):
            content = None  # a here-document expands these when it is written
        self.written.setdefault(script_key(path), []).append(content)
        if words and not is_dynamic_name(words[0]):
            self.writers.setdefault(script_key(path), set()).add(program_name(words[0].value))

    def note_run(self, path: str, shell: bool, depth: int, feeds: tuple[str, ...], by: str) -> None:
        self.runs.append((script_key(path), shell, depth, feeds, by))

    def finish(self) -> None:
        """Checks that need the whole command: aliases used, scripts written then run."""
        done: set[str] = set()
        for key, shell, depth, feeds, by in self.runs:
            contents = self.written.get(key)
            if contents is None or key in done:
                continue
            done.add(key)  # one reading per script: 'sh a.sh' x 200 is read once
            # The runner is fed by what wrote the file: 'curl -o i.sh URL; sh i.sh' is
            # 'curl URL | sh' for the rules on feeds (commands.deny.pipe-to-shell).
            self.commands.append(
                SimpleCommand(
                    by if "/" not in by else "sh",
                    feeds=feeds + tuple(sorted(self.writers.get(key, ()))),
                    speculative=True,
                )
            )
            if shell and all(c is not None for c in contents):
                # What runs is the text this command wrote: read it like 'sh -c TEXT'.
                self.parse("\n".join(c for c in contents if c is not None), depth + 1, feeds)
            else:
                self.hazard(
                    "interpreter",
                    f"{by} runs {key!r}, which this command writes with content only known"
                    " when it runs",
                    feeds,
                )
        for cmd in self.commands:
            if cmd.program in self.aliases:
                # dash expands aliases in 'sh -c' strings: 'alias r=rm<newline>r -rf /'.
                # The alias's value was read as shell; which words follow it is not known.
                self.hazard(
                    "dynamic",
                    f"command name {cmd.program!r} is an alias defined in this command",
                    cmd.feeds,
                )
                break

    def simple(
        self,
        words: list[Word],
        assigns: tuple[str, ...],
        redirects: tuple[Word, ...],
        *,
        feeds: tuple[str, ...],
        stdin_code: bool,
        stdin_text: str | None,
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
        if not words:
            if assigns or redirects:
                self.commands.append(
                    SimpleCommand(
                        "",
                        (),
                        assigns,
                        redirects,
                        feeds,
                        wrappers,
                        speculative=self.speculating > 0,
                    )
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
            if spec.assignments:
                for value in command_env_values(words[1:start]):
                    self.shell_string(value, depth, feeds)
            if name == "env":
                chdir = env_chdir(words[1:start])
                if chdir is not None:
                    self.change_directory(chdir)
            self.other_readings(
                words, start, values, assigns=assigns, redirects=redirects, feeds=feeds, depth=depth
            )
            for s in shell_options(words, spec):
                self.shell_string(s, depth, feeds)
            if spec.joins and rest:
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
                    stdin_text=stdin_text,
                    depth=depth,
                    wrappers=(*wrappers, name),
                )
            return
        sub = SUBCOMMAND_WRAPPERS.get(name)
        if sub is not None and len(words) > 1 and words[1].value in sub:
            rest = skip_options(words[2:])
            rec(name, words[:2])
            if rest:
                self.simple(
                    rest,
                    assigns,
                    redirects,
                    feeds=feeds,
                    stdin_code=stdin_code,
                    stdin_text=stdin_text,
                    depth=depth,
                    wrappers=(*wrappers, name),
                )
            return
        if name == "find":
            self.find_exec(words, depth, feeds, wrappers)
        elif name == "git":
            shells, argvs = git_commands(words)
            for value in [*git_config_commands(words), *shells]:
                self.shell_string(value, depth, feeds)
            for argv in argvs:  # 'git bisect run PROG ARGS'
                self.run_argv(argv, depth, feeds, (*wrappers, name))
        elif name == "hyperfine":
            for value in hyperfine_commands(words):
                self.shell_string(value, depth, feeds)
        elif name == "capsh":
            bash_args = capsh_shell_args(words)  # 'capsh -- ARGS' is 'bash ARGS'
            if bash_args is not None:
                self.run_argv([Word("bash"), *bash_args], depth, feeds, (*wrappers, name))
        elif name == "start-stop-daemon":
            daemon = daemon_argv(words)
            if daemon is not None:
                self.run_argv(daemon, depth, feeds, (*wrappers, name))
        elif name in ("make", "gmake") and make_reads_input(words):
            self.hazard(
                "interpreter", f"{name} reads its makefile (shell recipes) from input", feeds
            )
        for path in written_by_args(name, words[1:]):
            self.written.setdefault(script_key(path), []).append(None)
            self.writers.setdefault(script_key(path), set()).add(name)
        if name in SHELLS:
            self.shell(
                name,
                words,
                depth=depth,
                feeds=feeds,
                stdin_code=stdin_code,
                stdin_text=stdin_text,
            )
        elif name in ("cd", "pushd"):
            operands = [w for w in words[1:] if not w.value.startswith("-") or w.value == "-"]
            if "--" in (w.value for w in words[1:]):
                operands = words[[w.value for w in words].index("--") + 1 :]
            self.change_directory(operands[0] if operands else Word("~"))
        elif name in ("eval",):
            self.hazard("dynamic", "eval runs a string built at run time", feeds)
            self.shell_string(join_words(words[1:]), depth, feeds)
        elif name in (".", "source"):
            if len(words) > 1 and words[1].dynamic:
                self.hazard("interpreter", f"{name} runs code from a substitution", feeds)
            elif len(words) > 1 and is_stream_path(words[1].value):
                self.hazard("interpreter", f"{name} reads code from its input", feeds)
            elif len(words) > 1:
                self.note_run(words[1].value, True, depth, feeds, name)
        elif name == "alias":
            for w in words[1:]:
                if "=" in w.value:
                    self.aliases.add(w.value.split("=", 1)[0])
                    self.shell_string(Word(w.value.split("=", 1)[1], w.dynamic), depth, feeds)
        elif name in ("export", "declare", "typeset", "readonly", "local"):
            for value in command_env_values(words[1:]):
                self.shell_string(value, depth, feeds)
        elif name == "trap" and len(words) > 1:
            self.shell_string(words[1], depth, feeds)
        else:
            self.interpreter(name, words, feeds, stdin_code, depth)
        rec(name, words)

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
            stdin_text=None,
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
                    stdin_text=None,
                    depth=depth,
                    wrappers=(),
                )
            finally:
                self.speculating -= 1

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
        stdin_text: str | None,
    ) -> None:
        code_mode = stdin_mode = False
        i = 1
        while i < len(words):
            v = words[i].value
            if v in {"--", "-"}:
                stdin_mode = stdin_mode or v == "-"
                i += 1
                break
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
        if stdin_text is not None:
            self.parse(stdin_text, depth + 1, feeds)
        elif stdin_code:
            self.hazard("interpreter", f"{name} reads code from its input", feeds)

    def interpreter(
        self,
        name: str,
        words: list[Word],
        feeds: tuple[str, ...],
        stdin_code: bool,
        depth: int = 0,
    ) -> None:
        for glob, flags in CODE_FLAGS.items():
            if not fnmatchcase(name, glob):
                continue
            positional = False
            valued = interpreter_value_options(name)
            skip = False
            for w in words[1:]:
                v = w.value
                if skip:  # the value of the option before ('-W ignore', '-r fs')
                    skip = False
                    continue
                if v in flags or (
                    (cluster := short_cluster(v)) is not None
                    and any(len(f) == 2 and f[1] in cluster for f in flags)
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
            return
        if name in ("awk", "gawk", "mawk", "nawk") and awk_runs_commands(words):
            self.hazard("interpreter", f"{name} program runs commands", feeds)
        elif name == "sed" and sed_runs_commands(words):
            self.hazard("interpreter", "sed script executes commands", feeds)
        for w in words[1:]:
            for prefix in _COMMAND_VALUED:
                if w.value.startswith(prefix):
                    self.shell_string(Word(w.value[len(prefix) :], w.dynamic), depth, feeds)
        patterns = HAZARD_ARGS.get(name)
        if patterns:
            for w in words[1:]:
                if any(fnmatchcase(w.value, p) for p in patterns):
                    self.hazard("interpreter", f"{name} {w.value} can run commands", feeds)
                    return

    def find_exec(
        self, words: list[Word], depth: int, feeds: tuple[str, ...], wrappers: tuple[str, ...]
    ) -> None:
        i = 1
        while i < len(words):
            if words[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
                j = i + 1
                sub: list[Word] = []
                while j < len(words) and words[j].value not in (";", "+"):
                    w = words[j]
                    sub.append(Word(w.value, dynamic=True, operand=True) if "{}" in w.value else w)
                    j += 1
                if sub:
                    self.simple(
                        sub,
                        (),
                        (),
                        feeds=feeds,
                        stdin_code=False,
                        stdin_text=None,
                        depth=depth,
                        wrappers=(*wrappers, "find"),
                    )
                i = j
            i += 1


def _lexical(path: str) -> str:
    """Lexical normal form of a 'cd' target: 'a/../..' -> '..', '/x/..' -> '/', '~/x/..'
    -> '~'; a climb out of '~' is taken to reach '/' (assume the worst)."""
    if path.startswith("~"):
        head, _, tail = path.partition("/")
        rest = posixpath.normpath("x/" + tail) if tail else "x"
        if rest == "." or rest.startswith(".."):
            return "/"
        return head + rest[1:]
    return posixpath.normpath(path) if path else "."


def _climbs(path: str) -> bool:
    """Whether a relative path climbs above its start ('..', 'a/../..')."""
    depth = 0
    for seg in path.split("/"):
        if seg in ("", "."):
            continue
        depth += -1 if seg == ".." else 1
        if depth < 0:
            return True
    return False


#: Commands longer than this are analysed every time: caching attacker-sized strings would
#: let a caller pin 4096 x 64 KiB of memory.
CACHED_COMMAND_CHARS = 4096


def analyse(command: str) -> Analysis:
    """Every simple command ``command`` would run, and every hazard found. Cached for
    commands up to :data:`CACHED_COMMAND_CHARS`."""
    if len(command) <= CACHED_COMMAND_CHARS:
        return _analyse_cached(command)
    return _analyse(command)


def _analyse(command: str) -> Analysis:
    walker = _Walker()
    walker.parse(command, 0)
    walker.finish()
    return Analysis(tuple(walker.commands), tuple(walker.hazards))


_analyse_cached = functools.lru_cache(maxsize=2048)(_analyse)
