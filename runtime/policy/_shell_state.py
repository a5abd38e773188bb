"""The shell walker's state and the bookkeeping every part of it shares.

The walker is one object split by concern: :mod:`._shell_parse` (parsing, the syntax tree,
redirects), :mod:`._shell_words` (word expansion, ``cd`` tracking), :mod:`._shell_wrappers`
(wrapper see-through: what a program runs). They call one another recursively (a word holds
a substitution, a wrapper runs a shell string); the abstract methods here are those calls,
so each part type-checks on its own. :mod:`runtime.policy.shell` puts the parts together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from runtime.policy._shell_model import (
    MAX_COMMANDS,
    MAX_DEPTH,
    Hazard,
    HazardKind,
    SimpleCommand,
)
from runtime.policy._tool_options import response_file_words
from runtime.policy._writes import program_text_writes
from runtime.policy.argv import Word, is_dynamic_name, program_name
from runtime.policy.embedded import (
    package_scripts,
    program_text_runs,
    script_key,
    written_content,
)

__all__ = ["WalkerState"]

# Programs whose program file ('-f FILE') is judged by its text (embedded.program_text_runs).
_TEXT_PROGRAMS = frozenset({"awk", "gawk", "mawk", "nawk", "sed"})


class _Response(NamedTuple):
    """A response file a compiler driver reads ('gcc @FILE'): its command's words, where
    the '@FILE' stands, and where and how deep that command ran."""

    argv: tuple[Word, ...]
    at: int
    depth: int
    feeds: tuple[str, ...]
    cwd: Word | None
    dirs: tuple[Word, ...]


@dataclass
class WalkerState(ABC):
    commands: list[SimpleCommand] = field(default_factory=list)
    hazards: list[Hazard] = field(default_factory=list)
    overflow: bool = False
    literal_heredocs: set[str] = field(default_factory=set)
    speculating: int = 0
    guessing: int = 0  # inside a guessed reading (see SimpleCommand.guess)
    readings: int = 0  # other readings of wrapper options walked (see other_readings)
    readings_exhausted: bool = False
    aliases: set[str] = field(default_factory=set)
    # Names this command defines as functions or disables as builtins ('enable -n read'):
    # such a name may run code other than the builtin's.
    redefined: set[str] = field(default_factory=set)
    # Builtins whose prefix IFS was not judged (_shell_wrappers._IFS_SCOPED), with feeds.
    ifs_scoped: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    # Inside a compound command that a pipe feeds ('curl x | (bash)'), or a value a program
    # runs with its output as input (git's pager): every command there may read that input.
    fed: int = 0
    cwd: Word | None = None  # see SimpleCommand.cwd
    directory: Word | None = None  # where 'cd' went, relative to the start or absolute
    dirs: list[Word] = field(default_factory=list)  # see SimpleCommand.dirs
    dir_stack: list[Word | None] = field(default_factory=list)  # pushd's saved directories
    cdpath: bool = False  # CDPATH is set in this command: a relative 'cd' may go anywhere
    # Scripts this command writes (by base name): their contents when literal, else None.
    written: dict[str, list[str | None]] = field(default_factory=dict)
    # The programs that wrote each of them ('curl' in 'curl -o i.sh URL; sh i.sh').
    writers: dict[str, set[str]] = field(default_factory=dict)
    # Values this command gives the variables naming a shell's start-up directory (HOME,
    # ZDOTDIR: see runtime.policy._env_options.STARTUP_DIR_ENV), by name.
    startup_dirs: dict[str, list[Word]] = field(default_factory=dict)
    # Scripts this command runs: (base name, shell or not, depth, feeds, what runs it).
    runs: list[tuple[str, bool, int, tuple[str, ...], str]] = field(default_factory=list)
    # awk/sed program files this command reads ('-f FILE'): (base name, the program, feeds,
    # its cwd and dirs), for the files their text writes when this command writes them.
    program_reads: list[tuple[str, str, tuple[str, ...], Word | None, tuple[Word, ...]]] = field(
        default_factory=list
    )
    # Package managers run: (the package.json scripts they run, None for any; depth,
    # feeds, program).
    package_runs: list[tuple[frozenset[str] | None, int, tuple[str, ...], str]] = field(
        default_factory=list
    )
    # Response files compiler drivers read ('gcc @FILE'), read at the end (note_response).
    responses: list[_Response] = field(default_factory=list)
    # The commands read with a response file's words spliced in (each read once).
    responses_read: set[tuple[str, ...]] = field(default_factory=set)

    # -- the parts' calls into one another -------------------------------------------------

    @abstractmethod
    def parse(self, text: str, depth: int, feeds: tuple[str, ...] = ()) -> None:
        """Walk the shell code ``text`` (:mod:`._shell_parse`)."""

    @abstractmethod
    def node(self, n: Any, text: str, depth: int, feeds: tuple[str, ...]) -> None:
        """Walk one syntax-tree node (:mod:`._shell_parse`)."""

    @abstractmethod
    def word(self, n: Any, text: str, depth: int) -> tuple[Word, tuple[str, ...]]:
        """One word node as a :class:`Word` (:mod:`._shell_words`)."""

    @abstractmethod
    def change_directory(self, target: Word) -> None:
        """Follow ``cd TARGET`` (:mod:`._shell_words`)."""

    @abstractmethod
    def directory_builtin(self, name: str, words: list[Word]) -> None:
        """Follow ``cd``/``pushd``/``popd`` (:mod:`._shell_words`)."""

    @abstractmethod
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
        """One simple command, wrappers seen through (:mod:`._shell_wrappers`)."""

    @abstractmethod
    def shell_string(self, word: Word, depth: int, feeds: tuple[str, ...]) -> None:
        """A string run as shell code (:mod:`._shell_wrappers`)."""

    @abstractmethod
    def run_argv(
        self, argv: list[Word], depth: int, feeds: tuple[str, ...], wrappers: tuple[str, ...]
    ) -> None:
        """A program and arguments another program runs (:mod:`._shell_wrappers`)."""

    @abstractmethod
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
        """The commands a tool's own grammar runs (:mod:`._shell_code`)."""

    @abstractmethod
    def stored_code(self, value: str, depth: int, feeds: tuple[str, ...]) -> None:
        """Substitutions stored in a literal value, read as a guess (:mod:`._shell_code`)."""

    @abstractmethod
    def env_values(self, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """What NAME=VALUE words' values stand for (:mod:`._shell_code`)."""

    @abstractmethod
    def environment(self, env: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """NAME=VALUE words judged as 'NAME=VALUE cmd' is (:mod:`._shell_code`)."""

    @abstractmethod
    def assigned_names(self, env: list[Word], feeds: tuple[str, ...]) -> None:
        """The names NAME=VALUE words set, for the rules on names (:mod:`._shell_code`)."""

    @abstractmethod
    def startup(self, name: str, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """A shell's start-up files from a directory this command names (:mod:`._shell_code`)."""

    @abstractmethod
    def guess_shells(self, words: list[Word], depth: int, feeds: tuple[str, ...]) -> None:
        """'sh -c CMD' among an unknown program's arguments (:mod:`._shell_code`)."""

    @abstractmethod
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
        """Code an interpreter or a tool is given (:mod:`._shell_code`)."""

    @abstractmethod
    def option_code(self, name: str, words: list[Word], feeds: tuple[str, ...], depth: int) -> None:
        """Command lines in a tool's option values (:mod:`._shell_code`)."""

    # -- bookkeeping -------------------------------------------------------------------------

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

    def record(self, program: str, words: list[Word], **kw: Any) -> None:
        self.commands.append(
            SimpleCommand(
                program,
                tuple(words[1:]),
                speculative=self.speculating > 0,
                guess=self.guessing > 0,
                cwd=self.cwd,
                dirs=tuple(self.dirs),
                **kw,
            )
        )

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

    def note_program_file(self, path: str, by: str, depth: int, feeds: tuple[str, ...]) -> None:
        """An awk or sed program read from ``path`` ('-f FILE'): run as a script is
        (:meth:`note_run`), and the files its text writes judged as writes when this
        command writes it with known text (:meth:`finish`)."""
        self.note_run(path, False, depth, feeds, by)
        self.program_reads.append((script_key(path), by, feeds, self.cwd, tuple(self.dirs)))

    def program_writes(
        self,
        by: str,
        text: str,
        feeds: tuple[str, ...],
        cwd: Word | None,
        dirs: tuple[Word, ...],
    ) -> None:
        """The files awk or sed program ``text`` (from its input or a file this command
        writes) writes, judged as the same program given inline is: a file named in it is a
        write of ``by`` from where it runs, one named at run time asks."""
        files, named_late = program_text_writes(by, text)
        if files:
            self.commands.append(
                SimpleCommand(
                    by, feeds=feeds, speculative=True, cwd=cwd, dirs=dirs, writes=tuple(files)
                )
            )
        if named_late:
            self.hazard("dynamic", f"{by} program writes a file named at run time", feeds)

    def package_json(self) -> None:
        """A package.json this command wrote, then a package manager ran: the "scripts" it
        runs (:func:`package_script_names`) are shell command lines, read as a guess (a
        script's own commands, a pre/post name, may or may not run), so a deny rule that
        matches one asks. Written with content known only at run time, or not a JSON
        object: asks. The last text written is the one read."""
        contents = self.written.get("package.json")
        if contents is None:
            return
        for names, depth, feeds, by in self.package_runs:
            self.commands.append(
                SimpleCommand(
                    by,
                    feeds=feeds + tuple(sorted(self.writers.get("package.json", ()))),
                    speculative=True,
                )
            )
            scripts = None if contents[-1] is None else package_scripts(contents[-1])
            if scripts is None:
                self.hazard(
                    "interpreter",
                    f"{by} runs the scripts of a package.json this command writes with content"
                    " only known when it runs",
                    feeds,
                )
                continue
            self.speculating += 1
            self.guessing += 1
            try:
                for name, script in scripts.items():
                    if names is None or name in names:
                        self.parse(script, depth + 1, feeds)
            finally:
                self.guessing -= 1
                self.speculating -= 1

    def note_response(self, words: list[Word], at: int, depth: int, feeds: tuple[str, ...]) -> None:
        """``words[at]`` is a compiler driver's '@FILE': read once the whole command is
        walked (:meth:`response_file`), when what it writes is known."""
        response = _Response(tuple(words), at, depth, feeds, self.cwd, tuple(self.dirs))
        self.responses.append(response)

    def response_file(self, response: _Response) -> None:
        """A compiler driver's '@FILE': the command is read again with the file's words in
        its place (:func:`response_file_words`), once for each text this command writes
        there. A file this command does not write, or writes with content only known when
        it runs, cannot be read: asks."""
        argv, at, depth, feeds, cwd, dirs = response
        name, word = argv[0].value, argv[at].value
        contents = self.written.get(script_key(word[1:]))
        if contents is None or None in contents:
            whence = (
                "does not write"
                if contents is None
                else "writes with content only known when it runs"
            )
            self.hazard(
                "interpreter",
                f"{name} reads its options from {word!r}, which this command {whence}",
                feeds,
            )
            return
        if depth + 1 > MAX_DEPTH:
            self.hazard("unparseable", f"{name} response files nested too deeply", feeds)
            return
        saved = self.cwd, self.dirs
        self.cwd, self.dirs = cwd, list(dirs)
        try:
            for text in contents:
                for words in response_file_words(text or ""):
                    spliced = [*argv[:at], *(Word(w) for w in words), *argv[at + 1 :]]
                    seen = tuple(w.value for w in spliced)
                    if seen not in self.responses_read:
                        self.responses_read.add(seen)
                        self.run_argv(spliced, depth + 1, feeds, ())
        finally:
            self.cwd, self.dirs = saved[0], saved[1]

    def finish(self) -> None:
        """Checks that need the whole command: aliases used, scripts written then run,
        response files read (a script read may run a compiler on one, and a response file
        name a script: both are read until neither is left)."""
        self.package_json()
        done: set[str] = set()
        k = 0
        while self.responses or k < len(self.runs):
            if self.responses:
                self.response_file(self.responses.pop(0))
                continue
            key, shell, depth, feeds, by = self.runs[k]
            k += 1
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
            known = [c for c in contents if c is not None]
            if shell and len(known) == len(contents):
                # What runs is the text this command wrote: read it like 'sh -c TEXT'.
                self.parse("\n".join(known), depth + 1, feeds)
            elif by in _TEXT_PROGRAMS and len(known) == len(contents):
                # An awk or sed program this command wrote ('-f prog.awk'): judged as the
                # same program given inline is.
                if program_text_runs(by, "\n".join(known)):
                    self.hazard("interpreter", f"{by} program {key!r} runs commands", feeds)
            else:
                self.hazard(
                    "interpreter",
                    f"{by} runs {key!r}, which this command writes with content only known"
                    " when it runs",
                    feeds,
                )
        seen: set[tuple[str, str]] = set()
        for key, by, feeds, cwd, dirs in self.program_reads:
            contents = self.written.get(key)
            if contents is None or (key, by) in seen or None in contents:
                continue  # not written here, read already, or asked about above
            seen.add((key, by))
            self.program_writes(
                by, "\n".join(c for c in contents if c is not None), feeds, cwd, dirs
            )
        for name, feeds in self.ifs_scoped:
            if name in self.redefined:
                # 'read(){ ...; }; IFS=: read': the function's whole body runs with that IFS,
                # so the assignment is judged as any IFS is.
                self.commands.append(SimpleCommand(name, (), ("IFS",), feeds=feeds))
        for cmd in self.commands:
            if cmd.program in self.aliases:
                # dash expands aliases in 'sh -c' strings: 'alias r=rm<newline>r -rf /'.
                # The alias's value was read as shell; which words follow it is not known.
                self.hazard(
                    "dynamic",
                    f"command name {cmd.program!r} is given another meaning in this command"
                    " (alias, hash -p)",
                    cmd.feeds,
                )
                break
