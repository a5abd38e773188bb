"""Command rules: the policy's verdict on a shell string, from its :mod:`shell` analysis.

Rules match simple commands on parsed tokens. A rule is three-valued: it matches, it does not,
or it *may* (an argument it looks at is only known at run time, ``rm -rf $x``). A deny or ask
rule that may match asks; an allow rule that may match does not allow.
"""

from __future__ import annotations

import fnmatch
import functools
import re
import tomllib
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from runtime.models import Action
from runtime.policy._long_options import long_option
from runtime.policy._modes import granted_modes
from runtime.policy._moves import move_findings, rebased, workspace_relative
from runtime.policy._shell_model import CACHED_COMMAND_CHARS
from runtime.policy._sweeps import fixes_a_character, sweeps
from runtime.policy._workspace_globs import SANDBOX_ROOT
from runtime.policy._writes import write_findings, writes_through_arguments, written_operands
from runtime.policy.argv import Word, proc_alias, program_name
from runtime.policy.globs import GlobSet
from runtime.policy.paths import PathRules
from runtime.policy.schema import CommandRule, CommandsSection
from runtime.policy.shell import SimpleCommand, analyse

__all__ = [
    "CommandFinding",
    "CommandRules",
    "builtin_rules",
    "fixes_a_character",
    "normalise_target",
    "path_form",
]

Tri = Literal["yes", "no", "maybe"]
_BUILTIN = Path(__file__).with_name("builtin_commands.toml")
#: Words the readings of arguments as a program's start (:meth:`_Compiled.match`) may visit
#: in one command string, all rules together. Each reading looks at the words after its
#: argument: one per argument was quadratic ('echo rm rm rm ...' of 20,000 words held the
#: broker for minutes). An ordinary command makes few readings of a few words; past the
#: budget a rule with readings left may apply (ask).
MAX_READING_WORDS = 16_384
_CUT_SHORT = "too many of its arguments may name a program to read each as one"


@dataclass(frozen=True, slots=True)
class CommandFinding:
    action: Action
    rule: str
    reason: str


@functools.cache
def builtin_rules() -> tuple[tuple[CommandRule, ...], tuple[CommandRule, ...]]:
    """(deny rules, blocking-service rules) shipped with the runtime."""
    data = tomllib.loads(_BUILTIN.read_text(encoding="utf-8"))
    deny = tuple(CommandRule.model_validate(r) for r in data["deny"])
    services = tuple(CommandRule.model_validate(r) for r in data["services"])
    return deny, services


def normalise_target(value: str) -> str:
    """Lexical normal form of a command argument seen as a path: '//x/./' -> '/x',
    '/a/../..' -> '/', '~/..' -> '/', './*' -> '*', '/proc/self/root/' -> '/'."""
    value = proc_alias(value)
    if value.startswith("/"):
        segs: list[str] = []
        for s in value.split("/"):
            if s in ("", "."):
                continue
            if s == "..":
                if segs:
                    segs.pop()
                continue
            segs.append(s)
        return "/" + "/".join(segs)
    if value.startswith("~"):
        head, _, tail = value.partition("/")
        segs = []
        for s in tail.split("/"):
            if s in ("", "."):
                continue
            if s == "..":
                if not segs:
                    return "/"  # climbing out of a home directory: assume the worst
                segs.pop()
                continue
            segs.append(s)
        return head + ("/" + "/".join(segs) if segs else "")
    segs = []
    for s in value.split("/"):
        if s in ("", "."):
            continue
        if s == ".." and segs and segs[-1] != "..":
            segs.pop()
            continue
        segs.append(s)
    return "/".join(segs) or "."


# Names a glob in an operand is also tried on (see path_form): a glob that matches all of
# them is judged as '*' or '.*'.
_EVERY_NAME = ("a", "Z", "0", "_", "x-y", "foo.txt", "README", "node_modules")
_EVERY_DOT_NAME = (".env", ".git", ".config", ".github")
_GLOB_CHARS = frozenset("*?[")
_EXTGLOB_RE = re.compile(r"[?*+@!]\(")


def path_form(value: str) -> str:
    """:func:`normalise_target`, with trailing segments that sweep every name read as '*'
    (every dot-name: '.*'); see :func:`runtime.policy._sweeps.sweeps`. Memoised for short values:
    every rule that looks at arguments asks for each operand's form."""
    if len(value) <= _MEMO_CHARS:
        return _path_form_memo(value)
    return _path_form(value)


#: Longer arguments are not memoised: caching attacker-sized strings would pin memory.
_MEMO_CHARS = 256


def _segment_form(seg: str) -> str:
    """'*' for a glob segment that sweeps every name, '.*' every dot-name, '' otherwise."""
    if seg in ("*", ".*"):
        return seg
    if not _GLOB_CHARS.intersection(seg) and not _EXTGLOB_RE.search(seg):
        return ""
    if sweeps(seg) or all(fnmatchcase(n, seg) for n in _EVERY_NAME):
        return "*"
    if (seg.startswith(".") and sweeps(seg[1:])) or all(
        fnmatchcase(n, seg) for n in _EVERY_DOT_NAME
    ):
        return ".*"
    return ""


def _path_form(value: str) -> str:
    norm = normalise_target(value)
    if not _GLOB_CHARS.intersection(norm) and not _EXTGLOB_RE.search(norm):
        return norm
    # Trailing segments that all sweep reach every entry at some depth below the first of
    # them: 'rm -rf */*' empties every directory here as 'rm -rf *' does (it spares only
    # the top-level files), '/*/*' is '/*'. Judged as the first sweep ('.*' if any of
    # them only sweeps dot-names).
    segs = norm.split("/")
    k = len(segs)
    forms: list[str] = []
    while k > 0 and (form := _segment_form(segs[k - 1])):
        forms.append(form)
        k -= 1
    if not forms:
        return norm
    last = "*" if all(f == "*" for f in forms) else ".*"
    return "/".join(segs[:k]) + "/" + last if k else last


_path_form_memo = functools.lru_cache(maxsize=4096)(_path_form)


#: Programs whose first operand names one of their own subcommands ('git rm', 'cargo rm'),
#: with their global options that take a separate value ('git -C DIR rm'): the subcommand
#: is the first word that is neither an option nor such a value.
_SUBCOMMAND_TOOLS: dict[str, frozenset[str]] = {
    "apt": frozenset({"-o", "-c", "-t"}),
    "apt-get": frozenset({"-o", "-c", "-t"}),
    "brew": frozenset(),
    "cargo": frozenset({"-C", "-Z", "--config", "--color"}),
    "conda": frozenset(),
    "dnf": frozenset({"-c", "--config", "--releasever", "--installroot"}),
    "gh": frozenset({"-R", "--repo"}),
    "git": frozenset(
        {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--attr-source"}
    ),
    "go": frozenset({"-C"}),
    "hg": frozenset({"-R", "--repository", "--cwd", "--config"}),
    "npm": frozenset({"--prefix", "-w", "--workspace"}),
    "pip": frozenset({"--python"}),
    "pip3": frozenset({"--python"}),
    "pnpm": frozenset({"-C", "--dir", "--filter", "-F"}),
    "poetry": frozenset({"-C", "--directory", "-P", "--project"}),
    "rustup": frozenset(),
    "svn": frozenset({"--username", "--password", "--config-dir", "--config-option"}),
    "uv": frozenset({"--directory", "--project", "--python", "--cache-dir", "--config-file"}),
    "yarn": frozenset({"--cwd"}),
    "yum": frozenset({"-c", "--config", "--releasever", "--installroot"}),
}


def _subcommand_index(cmd: SimpleCommand) -> int:
    """Where the subcommand of a :data:`_SUBCOMMAND_TOOLS` program sits in ``cmd.args``;
    -1 for any other program."""
    valued = _SUBCOMMAND_TOOLS.get(cmd.program)
    if valued is None:
        return -1
    k = 0
    while k < len(cmd.args):
        v = cmd.args[k].value
        if not v.startswith("-"):
            return k
        k += 2 if v in valued else 1
    return -1


def _flag_present(flag: str, value: str, program: str) -> bool:
    if flag.startswith("--"):
        # GNU getopt accepts any unambiguous prefix: '--rec' is '--recursive'.
        return long_option(value, (flag,), program) is not None
    if len(flag) == 2 and flag[0] == "-":
        return len(value) >= 2 and value[0] == "-" and value[1] != "-" and flag[1] in value[1:]
    return value == flag


def _all(results: list[Tri]) -> Tri:
    if "no" in results:
        return "no"
    return "maybe" if "maybe" in results else "yes"


class _Compiled:
    def __init__(self, rule: CommandRule, action: Action, root: str = "") -> None:
        self.id = rule.id
        # The workspace as the sandbox shows it ('/workspace'): '/workspace/*' is '*'.
        self.root = root.rstrip("/")
        self.action: Action = action
        self.reason = rule.reason or f"matches command rule {rule.id!r}"
        # Rules are matched on base names; '/bin/rm' in a rule means 'rm'.
        self.program = tuple(program_name(p) if "/" in p else p for p in rule.program)
        self.any_program = self.program == ("*",)
        # fnmatchcase over the program globs as one regex: every rule asks of every command
        # (and of every argument that may name a program), so this is the matcher's loop.
        self.program_rx = re.compile("|".join(fnmatch.translate(p) for p in self.program))
        self.flags = [tuple(g) for g in rule.flags]
        self.args = GlobSet(rule.args)
        self.args_regex = [re.compile(r) for r in rule.args_regex]
        self.args_seq = [tuple(s) for s in rule.args_seq]
        self.seq_heads = tuple({_glob_head(g) for s in rule.args_seq for g in s})
        self.unless = GlobSet(rule.unless_args)
        self.piped_from = tuple(rule.piped_from)
        self.redirect_to = GlobSet(rule.redirect_to)
        self.writes_to = GlobSet(rule.writes_to)
        # CommandRule.literal_only: a run-time word may match only where its literal start
        # heads for a glob of the rule ('/dev/tcp/$h/80'; '"$out"' does not).
        self.literal_only = rule.literal_only
        self.heads = tuple(_glob_head(g) for g in (*rule.redirect_to, *rule.writes_to))
        self.assigns = tuple(rule.assigns)
        # One regex for the globs, as program_rx: 'export A B C ...' sets one name a word,
        # and loader-env has some 70 globs.
        # None without globs: an empty alternation would match every name.
        self.assigns_rx = (
            re.compile("|".join(fnmatch.translate(p) for p in self.assigns))
            if self.assigns
            else None
        )
        self.modes_regex = [re.compile(r) for r in rule.modes_regex]
        # Rules that look at arguments are also tried on a program named among another
        # program's arguments (see match): a program-only rule ('vite', 'at') would refuse
        # every 'npm install vite'. What a program writes is read from its arguments too
        # ('ifne cp x /dev/sda'), whichever program the rule names.
        self.argument_reading = action != "allow" and (
            (
                not self.any_program
                and bool(self.flags or self.args or self.args_regex or self.modes_regex)
            )
            or bool(rule.writes_to)
        )
        # An any-program rule whose only condition on the name or arguments is writes_to:
        # a reading of a program that writes nothing through its own arguments (not
        # writes_through_arguments) writes only the command's walker-found files, a subset
        # of what the command's own reading judged, with every other condition (redirects,
        # feeds, assigns) the same; that reading said "no" (match reads only then), so this
        # one does too, and match skips it. Without the skip the device-write rule read
        # every literal argument of every command.
        self.skips_non_writers = self.any_program and not (
            self.flags
            or rule.args
            or self.args_regex
            or self.args_seq
            or self.modes_regex
            or rule.unless_args
        )

    def match(
        self,
        cmd: SimpleCommand,
        named: tuple[tuple[int, str], ...] = (),
        budget: _ReadingBudget | None = None,
    ) -> Tri:
        """``named``: :func:`_named_programs` of ``cmd`` (computed once per command);
        ``budget``: what its readings may still visit (one per command string)."""
        tri = self.match_program(cmd)
        if tri != "no" or not self.argument_reading or not named:
            return tri
        budget = budget if budget is not None else _ReadingBudget()
        # A program the wrapper tables do not know may run its arguments ('ifne rm -rf /',
        # 'parallel rm -rf ::: /', 'eatmydata', 'pkexec', 'lckdo LOCK', 'docker exec C'):
        # every argument naming the rule's program is read as that program's start. The
        # reading is a guess, so a hit is "may match" (ask), never a deny of its own.
        for k, name in named:
            if self.program_rx.match(name) is None:
                continue
            if self.skips_non_writers and not writes_through_arguments(name):
                continue  # the command's own reading's "no" (see skips_non_writers)
            args = cmd.args[k + 1 :]
            if not budget.spend(len(args) + 1):
                budget.cut.add(self.id)
                return "maybe"
            inner = replace(cmd, program=name, args=args, speculative=True)
            if self.match_program(inner) != "no":
                return "maybe"
        return "no"

    def match_program(self, cmd: SimpleCommand) -> Tri:
        if not self.any_program and self.program_rx.match(cmd.program) is None:
            return "no"
        if self.any_program and not cmd.program and not (self.redirect_to or self.assigns):
            return "no"
        args = list(cmd.args)
        if "--" in (w.value for w in args):
            cut = [w.value for w in args].index("--")
            options, operands = args[:cut], args[:cut] + args[cut + 1 :]
        else:
            options, operands = args, args
        dynamic = any(w.dynamic for w in args)
        if cmd.cwd is not None:
            # After 'cd /' the operand 'etc' is '/etc': path rules judge where it points,
            # as well as what it says (so no rule matches less than without the 'cd').
            moved = [rebased(w, cmd.cwd) for w in operands]
            operands = operands + [w for w in moved if w not in operands]
            dynamic = dynamic or any(w.dynamic for w in moved)
        if self.root:
            # The sandbox shows the workspace at its root path: 'rm -rf /workspace/*' is
            # 'rm -rf *' (judged as both).
            inside = [_in_workspace(w, self.root) for w in operands]
            operands = operands + [w for w in inside if w is not None and w not in operands]
        if any(self.unless.match(normalise_target(w.value)) for w in args if not w.dynamic):
            return "no"
        results: list[Tri] = []
        # A run-time argument may turn out to be any flag ('echo -rf / | xargs rm'), unless
        # it stays one argument that starts with other text ('./"$f"', 'GOPATH="$x"').
        dynamic_flag = any(w.dynamic and w.may_be_option() for w in options)
        if self.literal_only:
            dynamic = dynamic_flag = False
        for group in self.flags:
            hit = any(
                _flag_present(f, w.value, cmd.program)
                for f in group
                for w in options
                if not w.dynamic
            )
            results.append("yes" if hit else "maybe" if dynamic_flag else "no")
        if self.args or self.args_regex:
            hit = any(
                self.args.match(path_form(w.value)) is not None
                or any(rx.search(w.value) for rx in self.args_regex)
                for w in operands
                if not w.dynamic
            )
            results.append("yes" if hit else "maybe" if dynamic else "no")
        if self.flags and (self.args or self.args_regex) and _one_argument(cmd, args):
            # The only run-time word is one argument: it may be the flag or the path, not
            # both ('rm -f "$f"' is no 'rm -r /'; 'rm -rf "$f"' and 'rm -f $f' may be).
            flag_maybe = "maybe" in results[: len(self.flags)]
            if flag_maybe and results[len(self.flags)] == "maybe":
                return "no"
        if self.args_seq:
            values = [w.value for w in args]
            hit = any(_has_seq(values, seq) for seq in self.args_seq)
            # A run-time word may be a word of a sequence unless it stays one word whose
            # literal start rules that out ('-DPREFIX=$HOME/x' is no '-E' or 'rm').
            fills = not self.literal_only and any(
                w.dynamic and _may_be_one_of(w, self.seq_heads) for w in args
            )
            results.append("yes" if hit else "maybe" if fills else "no")
        if self.piped_from:
            hit = any(fnmatchcase(f, p) for f in cmd.feeds for p in self.piped_from)
            results.append("yes" if hit else "no")
        if self.redirect_to:
            redirects = cmd.redirects
            if cmd.cwd is not None:  # 'cd /dev; echo x > sda'
                redirects += tuple(rebased(w, cmd.cwd) for w in redirects)
            results.append(self._any_word(redirects, self.redirect_to))
        if self.writes_to:
            written = written_operands(cmd)
            if cmd.cwd is not None:  # 'cd /dev && cp x sda'
                written += [rebased(w, cmd.cwd) for w in written]
            results.append(self._any_word(tuple(written), self.writes_to))
        if self.assigns_rx is not None:
            hit = any(self.assigns_rx.match(a) is not None for a in cmd.assigns)
            results.append("yes" if hit else "no")
        if self.modes_regex:
            results.append(self._modes(cmd))
        return _all(results)

    def _modes(self, cmd: SimpleCommand) -> Tri:
        """:attr:`CommandRule.modes_regex` on the modes ``cmd`` gives files: a mode copied
        from a file whose mode is not known may match; a mode only known at run time
        may unless the rule is literal_only."""
        modes, copied = granted_modes(cmd)
        if any(rx.search(w.value) for w in modes if not w.dynamic for rx in self.modes_regex):
            return "yes"
        if copied or (not self.literal_only and any(w.dynamic for w in modes)):
            return "maybe"
        return "no"

    def _any_word(self, words: tuple[Word, ...], globs: GlobSet) -> Tri:
        if any(globs.match(normalise_target(w.value)) for w in words if not w.dynamic):
            return "yes"
        if not self.literal_only:
            return "maybe" if any(w.dynamic for w in words) else "no"
        return "maybe" if any(w.dynamic and _heads_for(w, self.heads) for w in words) else "no"


class _ReadingBudget:
    """The words the readings of one command string may still visit (MAX_READING_WORDS),
    and the ids of the rules whose readings it cut short."""

    __slots__ = ("cut", "left")

    def __init__(self) -> None:
        self.left = MAX_READING_WORDS
        self.cut: set[str] = set()

    def spend(self, words: int) -> bool:
        """Take ``words`` from what is left; False (nothing taken) when too few are."""
        if words > self.left:
            return False
        self.left -= words
        return True


def _named_programs(cmd: SimpleCommand) -> tuple[tuple[int, str], ...]:
    """(index, base name) of the arguments of ``cmd`` that could name a program it runs
    (see :meth:`_Compiled.match`): literal non-options, not the subcommand of a tool that
    takes one ('git rm'), not the program itself."""
    if not cmd.program:
        return ()
    sub = _subcommand_index(cmd)  # 'git -C repo rm -r --cached .'
    return tuple(
        (k, name)
        for k, w in enumerate(cmd.args)
        if not w.dynamic
        and not w.value.startswith("-")
        and k != sub
        and (name := program_name(w.value)) != cmd.program
    )


def _in_workspace(word: Word, root: str) -> Word | None:
    """``word`` as a workspace-relative path when it names ``root`` or a path below it
    ('/w*/*' is '*': :func:`runtime.policy._moves.workspace_relative`)."""
    if word.dynamic or not word.value.startswith("/"):
        return None
    inside = workspace_relative(word.value, root)
    return None if inside is None else Word(inside)


def _one_argument(cmd: SimpleCommand, args: list[Word]) -> bool:
    """Whether the command's run-time part is one word the shell passes as one argument:
    its only dynamic argument is ``single`` and its directory is known."""
    if cmd.cwd is not None and cmd.cwd.dynamic:
        return False
    dynamic = [w for w in args if w.dynamic]
    return len(dynamic) == 1 and dynamic[0].single and not dynamic[0].operand


def _glob_head(glob: str) -> str:
    """The literal text a glob starts with ('/dev/sd*' -> '/dev/sd')."""
    return re.split(r"[*?\[]", glob, maxsplit=1)[0]


def _agrees(start: str, heads: tuple[str, ...]) -> bool:
    """Whether a text that starts with ``start`` may also start as one of ``heads`` does
    (the literal starts of globs): one of the two begins the other."""
    return any(h.startswith(start) or start.startswith(h) for h in heads)


def _may_be_one_of(word: Word, heads: tuple[str, ...]) -> bool:
    """Whether the run-time ``word`` may be (or split into) a word that starts as one of
    ``heads`` does: always, unless it stays one word with a literal start that no head
    agrees with."""
    return not word.single or not word.prefix or _agrees(word.prefix, heads)


def _heads_for(word: Word, heads: tuple[str, ...]) -> bool:
    """Whether the run-time ``word``'s literal start may begin a path one of ``heads``
    begins ('/dev/"$n"', '/dev/tcp/$h/80'); one with no literal start ('"$out"') or another
    one ('out/"$f"', './"$f"') does not."""
    if "" in heads:
        return True  # a glob that starts with a wildcard ('**'): any path may match it
    start = word.prefix
    if not start:
        return False
    if start.startswith("/"):
        start = normalise_target(start) + ("/" if start.endswith("/") and start != "/" else "")
    return _agrees(start, heads)


def _has_seq(values: list[str], seq: tuple[str, ...]) -> bool:
    k = len(seq)
    return any(
        all(fnmatchcase(values[i + j], seq[j]) for j in range(k))
        for i in range(len(values) - k + 1)
    )


_SEVERITY = {"allow": 0, "ask": 1, "deny": 2}


class CommandRules:
    """Compiled ``[commands]`` section."""

    def __init__(self, section: CommandsSection, paths: PathRules | None = None) -> None:
        """``paths``: the policy's path rules. Their ``root`` is where the sandbox shows the
        workspace: an absolute operand below it is judged as the relative path too; and
        what ``mv`` moves and the shell writes is judged by them (see :meth:`_moves`)."""
        self.section = section
        self._paths = paths
        # The shell reaches the workspace at /workspace, whatever the caller: a rule
        # on the workspace root ("rm -rf /workspace/*") must read it so.
        workspace_root = SANDBOX_ROOT
        rules: list[_Compiled] = []
        deny, services = builtin_rules()
        disabled = set(section.disable)
        if section.builtin:
            rules += [_Compiled(r, r.action, workspace_root) for r in deny if r.id not in disabled]
        # 'services' is a setting of its own: 'builtin = false' drops the deny rules, not
        # the dev-server rules a policy asked for by saying services = "deny" or "ask".
        if section.services != "allow":
            rules += [
                _Compiled(r, section.services, workspace_root)
                for r in services
                if r.id not in disabled
            ]
        rules += [_Compiled(r, r.action, workspace_root) for r in section.rules]
        self._rules = tuple(rules)
        self._allow_programs = tuple(section.allow)
        self._cache: dict[str, tuple[CommandFinding, ...]] = {}

    def check(self, command: object) -> tuple[CommandFinding, ...]:
        """Findings (ask/deny, and allow-rule hits) for one command string, worst first."""
        if not isinstance(command, str):
            return (CommandFinding("deny", "commands.invalid", "command must be a string"),)
        if len(command) > CACHED_COMMAND_CHARS:
            return self._check(command)
        found = self._cache.get(command)
        if found is None:
            found = self._check(command)
            if len(self._cache) >= 2048:
                self._cache.clear()
            self._cache[command] = found
        return found

    def _moves(self, cmd: SimpleCommand) -> list[CommandFinding]:
        """What ``mv``/``rm -r``/``rename`` would move or delete, and what the command
        writes, judged by the path rules (:mod:`runtime.policy._moves`,
        :mod:`runtime.policy._writes`)."""
        assert self._paths is not None
        found = move_findings(cmd, self._paths, self.section.dynamic)
        found += write_findings(cmd, self._paths)
        return [CommandFinding(*f) for f in found]

    def _check(self, command: str) -> tuple[CommandFinding, ...]:
        analysis = analyse(command)
        sec = self.section
        out: list[CommandFinding] = []
        for h in analysis.hazards:
            if h.kind == "fork_bomb":
                out.append(CommandFinding("deny", "commands.deny.fork-bomb", h.detail))
            else:
                action: Action = getattr(sec, h.kind)
                out.append(CommandFinding(action, f"commands.hazard.{h.kind}", h.detail))
        budget = _ReadingBudget()
        for cmd in analysis.commands:
            allowed_by_rule = False
            named = _named_programs(cmd)
            budget.cut.clear()  # the rules cut short reading this command
            for rule in self._rules:
                m = rule.match(cmd, named, budget)
                if m == "no":
                    continue
                if cmd.guess and m == "yes":
                    m = "maybe"  # a guessed reading (SimpleCommand.guess): at most ask
                if rule.action == "allow":
                    allowed_by_rule = allowed_by_rule or m == "yes"
                    continue
                if m == "maybe":
                    why = (
                        _CUT_SHORT
                        if rule.id in budget.cut
                        else "an argument is only known at run time"
                    )
                    out.append(CommandFinding("ask", rule.id, f"{rule.reason} (may apply: {why})"))
                else:
                    out.append(CommandFinding(rule.action, rule.id, rule.reason))
            if (
                sec.mode == "allowlist"
                and cmd.program
                and not cmd.speculative  # another reading of a wrapper: it may never run
                and not allowed_by_rule
                and not any(fnmatchcase(cmd.program, p) for p in self._allow_programs)
            ):
                out.append(
                    CommandFinding(
                        "deny", "commands.allowlist", f"program {cmd.program!r} is not allowlisted"
                    )
                )
            if self._paths is not None:
                out.extend(self._moves(cmd))
        out.sort(key=lambda f: -_SEVERITY[f.action])
        return tuple(out)
