"""What a shell ``mv``/``rm -r``/``rename`` moves or deletes, judged by the path rules.

Why here as well as in the sandbox: the masks over protected entries are bound by glob at
each call's start, and rename(2) of a directory that holds a mount point succeeds, so
``mv config x`` carries a masked ``config/prod.env`` to ``x/prod.env``, which the next call
reads. An early lexical check; a run-time operand is the kernel's.

Each operand is judged from every directory the command may be in when it runs
(:attr:`SimpleCommand.dirs`: the start, and each directory a ``cd``/``pushd`` before it may
have reached; a ``cd`` can fail and the command goes on after ``;``): ``cd sub && mv .. x``
moves the workspace root. A directory only known at run time (``cd "$d"``, ``cd s*``,
``cd -``) makes a relative operand unknown: the ``dynamic`` hazard's action (ask).

An absolute operand is the workspace when its leading segments could match the workspace
root (``/w*/config`` is ``/workspace/config``): see :func:`workspace_relative`.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from runtime.models import Action
from runtime.policy._globreach import is_glob
from runtime.policy._long_options import long_option
from runtime.policy._shell_model import SimpleCommand
from runtime.policy.argv import Word, proc_alias, short_cluster
from runtime.policy.paths import PathRules

__all__ = [
    "Finding",
    "move_findings",
    "moved_operands",
    "operand_forms",
    "rebased",
    "unknown_finding",
    "workspace_relative",
]

Finding = tuple[Action, str, str]  # (action, rule, reason)

# The long options of mv and rm these checks read (by any prefix: '--target=DIR').
_MOVE_LONG = frozenset({"--target-directory", "--suffix", "--recursive"})


def rebased(word: Word, cwd: Word) -> Word:
    """``word`` as a path seen from the starting directory, after 'cd cwd'. Options,
    absolute and home paths are left alone; under a run-time directory a relative path is
    itself only known at run time (but is still an operand, never an option)."""
    v = word.value
    if word.dynamic or v.startswith(("-", "/", "~")):
        return word
    if cwd.dynamic:
        return Word(v, dynamic=True, operand=True)
    return Word(cwd.value.rstrip("/") + "/" + v if cwd.value != "/" else "/" + v)


def _normal(value: str) -> list[str]:
    """Segments of a path, '.' and '..' resolved lexically (a leading '..' dropped: above
    the root is the root, and a relative climb is read from every depth)."""
    out: list[str] = []
    for s in value.split("/"):
        if s in ("", "."):
            continue
        if s == "..":
            if out:
                out.pop()
            continue
        out.append(s)
    return out


def _segment_may_match(pattern: str, name: str) -> bool:
    """Whether the shell glob segment ``pattern`` may match the literal ``name``; what is
    not read exactly here (an extglob group, '[^..]', a backslash) is taken to match."""
    if not is_glob(pattern):
        return pattern == name
    if name.startswith(".") and not pattern.startswith("."):
        return False  # a leading dot is matched only by a literal dot
    if "(" in pattern or "[^" in pattern or "\\" in pattern:
        return True
    return fnmatchcase(name, pattern)


def workspace_relative(value: str, root: str) -> str | None:
    """The workspace-relative form ('.' for the root itself) of the absolute ``value``
    when it names ``root`` or a path below it, its leading segments globs included
    ('/w*/config' -> 'config', '/*/*' -> '*', '/**/config' -> '**/config'); None when it
    cannot. Only absolute values: a relative one already is relative."""
    if not value.startswith("/"):
        return None
    segs = _normal(value)
    root_segs = _normal(root)
    for k, name in enumerate(root_segs):
        if k >= len(segs):
            return None  # an ancestor of the root ('/', '/w*'): not the path rules'
        if segs[k] == "**":
            # globstar: any run of names, the root's included, then the rest anywhere
            return "/".join(["**", *segs[k + 1 :]])
        if not _segment_may_match(segs[k], name):
            return None
    rest = segs[len(root_segs) :]
    return "/".join(rest) if rest else "."


def moved_operands(cmd: SimpleCommand) -> tuple[list[tuple[Word, bool]], bool]:
    """The paths ``mv SRC... DST`` (``git mv``) names, each with whether it is moved (a
    source), and whether the move may give its sources new names (one source, no ``-t``,
    a destination without a trailing '/'; every operand of ``rename``). Sources and
    destination alike: a destination can be a protected directory that sources land in.
    ``ln`` as ``mv``: a link is a second name for its target, through which what is below
    it is written ('ln -s .git g; cp x g/hooks/pre-commit', 'ln .git/config c; echo >> c');
    its new name renames nothing.
    ``rm -r``: every operand, each deleted with what is below it. ``rename`` (util-linux
    'rename FROM TO FILE...', perl 'rename EXPR FILE...'): every word, expressions too (an
    expression that reads as a protected path is refused; that costs nothing real), none
    taken for a source."""
    args = list(cmd.args)
    if cmd.program == "git" and args and args[0].value == "mv":
        args = args[1:]
    elif cmd.program not in ("mv", "rename", "rm", "ln"):
        return [], False
    out: list[tuple[Word, bool]] = []
    options = True
    value_of = ""  # the option whose separate value comes next
    target = False  # mv -t DIR: every operand is a source
    recursive = False
    for w in args:
        v = w.value
        if value_of:
            if value_of in ("-t", "--target-directory"):
                out.append((w, False))  # the destination directory
                target = True
            value_of = ""  # '-S SUFFIX': a backup suffix, not a path
        elif options and v == "--":
            options = False
        elif options and not w.operand and v.startswith("-") and v != "-":
            program = "mv" if cmd.program == "git" else cmd.program
            opt = long_option(v, _MOVE_LONG, program) or v
            if cmd.program == "rm":
                short = short_cluster(v)
                recursive |= opt == "--recursive" or (
                    short is not None and bool(set(short) & {"r", "R"})
                )
            elif opt in ("-t", "--target-directory", "-S", "--suffix") and "=" not in v:
                value_of = opt
            elif opt == "--target-directory":
                out.append((w.tail(v.index("=") + 1), False))
                target = True
            elif (cluster := short_cluster(v)) is not None:
                # '-vt DIR', '-t.git': the first valued letter takes the rest of the
                # cluster, or the next word when it ends it.
                k = next((k for k, c in enumerate(cluster) if c in "tS"), -1)
                if k == len(cluster) - 1:
                    value_of = "-" + cluster[k]
                elif k >= 0 and cluster[k] == "t":
                    out.append((Word(cluster[k + 1 :], w.dynamic), False))
                    target = True
        else:
            out.append((w, cmd.program != "rename"))
    if cmd.program == "rm":
        return (out if recursive else []), False
    if cmd.program == "rename":
        return out, True
    renames = False
    if not target:
        # 'mv SRC... DST': the last operand is where the sources land.
        last = max((k for k, (_, source) in enumerate(out) if source), default=-1)
        if last > 0:
            out[last] = (out[last][0], False)
            renames = last == 1 and not out[last][0].value.endswith("/") and cmd.program != "ln"
    return out, renames


def operand_forms(cmd: SimpleCommand, operand: Word, root: str) -> tuple[list[str], bool]:
    """The workspace-relative forms of the literal ``operand`` from every directory
    ``cmd`` may run in (a leading climb read from every depth: the command may start below
    the root, where '../config' is the root's 'config' and '..' the root; '.' is the root),
    and whether one of those directories is only known at run time. Forms outside the
    workspace are left out: not the path rules' to judge."""
    if not operand.dynamic:
        operand = Word(proc_alias(operand.value))  # '/proc/self/cwd/x' is './x'
    words = [operand]
    unknown = False
    if not operand.value.startswith(("/", "~")):
        for d in cmd.dirs:
            if d.dynamic:
                unknown = True
            else:
                words.append(rebased(operand, d))
    out: list[str] = []
    for w in words:
        value = w.value
        if value.startswith("/"):
            inside = workspace_relative(value, root)
            if inside is None:
                continue
            value = inside
        elif value.startswith("~"):
            continue
        norm = "/".join(_normal(value)) or "."
        if norm not in out:
            out.append(norm)
    return out, unknown


def move_findings(cmd: SimpleCommand, paths: PathRules, unknown_action: Action) -> list[Finding]:
    """Findings for what ``cmd`` would move out of, or into, a path the deny/deny_write
    globs protect (see the module's docstring). ``unknown_action``: for an operand whose
    directory is only known at run time (the policy's ``dynamic`` action)."""
    operands, renames = moved_operands(cmd)
    if not operands:
        return []
    out: list[Finding] = []
    for operand, source in operands:
        if operand.dynamic:
            continue
        forms, unknown = operand_forms(cmd, operand, paths.root)
        if unknown:
            out.append(unknown_finding(cmd, operand, unknown_action))
        for norm in forms:
            out.extend(_judge(cmd, operand, norm, source=source, renames=renames, paths=paths))
    return out


def _verb(cmd: SimpleCommand) -> str:
    return "link to" if cmd.program == "ln" else "move or delete"


def unknown_finding(cmd: SimpleCommand, operand: Word, action: Action) -> Finding:
    return (
        action,
        "commands.hazard.dynamic",
        f"{cmd.program} operand {operand.value!r} is relative to a directory only known at "
        "run time",
    )


def _judge(
    cmd: SimpleCommand,
    operand: Word,
    norm: str,
    *,
    source: bool,
    renames: bool,
    paths: PathRules,
) -> list[Finding]:
    if norm == "." and source:
        # 'mv config/.. x', 'cd sub && mv .. x': the workspace root, above every protected
        # path.
        return [
            (
                "deny",
                "paths.root",
                f"{cmd.program} would {_verb(cmd)} the workspace root ({operand.value!r})",
            )
        ]
    v = paths.check_operand(norm)
    if not v.allowed and v.rule in ("paths.deny", "paths.deny_write"):
        return [
            (
                "deny",
                v.rule,
                f"{cmd.program} would {_verb(cmd)} a protected path: {v.reason}",
            )
        ]
    if renames and source and v.allowed:
        hit = paths.renamed_name(norm)
        if hit is not None:
            return [
                (
                    "ask",
                    hit[0],
                    f"{cmd.program} may rename an entry {hit[1]!r} protects to another name "
                    f"({operand.value!r} could name one)",
                )
            ]
    return []
