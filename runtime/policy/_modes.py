"""The permission modes a command gives files, for rules on modes (``modes_regex``, the
built-in ``commands.ask.chmod-world-writable``).

Each is spelled as chmod spells it, so one regex judges them all: chmod's MODE (or a mode
given as an option word, ``chmod -w,o+w``), the ``-m``/``--mode`` value of ``mkdir``,
``install``, ``mkfifo`` and ``mknod`` (``-pm777``, ``-Dm 777``, ``--mode=a+w``), the mode a
``umask`` lets files have (``umask 0`` is ``777``; a symbolic umask is a chmod clause
already), each ``rsync --chmod`` clause (its ``D``/``F`` prefix dropped), an ACL entry
``setfacl`` gives others, the mask or a named user or group (``o::rwx`` is ``o=rwx``),
git's shared-repository mode (``init --shared=0777``, ``core.sharedRepository``), and a
mode copied from a file: chmod ``--reference``, and ``cp -p``/``-a``/``--preserve``,
``rsync -a``/``-p`` of a source. A copied mode is known for the world-writable files
every system has (``/tmp``: ``1777``, ``/dev/null``: ``666``). Any other file's is not:
``--reference`` to one outside the workspace may match (the caller asks); a workspace
file's mode was given by commands judged when they ran, and a copy (``cp -p a b``) is not
asked about, or every ``cp -p`` would be.

What an attacker controls is every word; the kernel cannot stop these (the mode is passed
whole: see ``commands.ask.chmod-world-writable``). A mode only known at run time is a
dynamic Word: the rule's ``literal_only`` decides.
"""

from __future__ import annotations

import posixpath
import re

from runtime.policy._long_options import long_option
from runtime.policy._shell_model import SimpleCommand
from runtime.policy._writes import RSYNC_VALUED_SHORT, rsync_paths
from runtime.policy.argv import Word, short_cluster

__all__ = ["granted_modes"]

# Files every system makes world-writable, by their mode: the mode a copy of one keeps
# ('cp -p /dev/null x' makes x 0666) and the one 'chmod --reference' gives.
_WORLD_WRITABLE = {
    **dict.fromkeys(("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue"), "1777"),
    **dict.fromkeys(
        ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
         "/dev/ptmx"),
        "666",
    ),
}  # fmt: skip
# The letters GNU chmod's getopt reads as (part of) a mode word ('chmod -w', '-rwx').
_MODE_LETTERS = frozenset("rwxXstugoa,+=01234567")
# program -> (short options that take a value, long options that take one): the mode
# option is '-m'/'--mode'; the others are skipped so their value is not read as a mode.
_MODE_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mkdir": ("m", ("--mode", "--context")),
    "mkfifo": ("m", ("--mode", "--context")),
    "mknod": ("m", ("--mode", "--context")),
    "install": (
        "mgoSt",
        ("--mode", "--owner", "--group", "--suffix", "--target-directory", "--strip-program"),
    ),
}
# Long options whose value is optional: never the next word ('--context[=CTX]').
_OPTIONAL_VALUE = frozenset({"--context"})
# cp's options whose value is separate, and rsync's (so sources are found).
_CP_VALUED = frozenset({"-S", "--suffix", "-t", "--target-directory"})
_UMASK_RE = re.compile(r"^[0-7]{1,4}$")
# An ACL entry's permissions ('[d[efault]:]TAG:[QUALIFIER]:PERMS'): letters or one octal
# digit.
_ACL_PERMS_RE = re.compile(r"^(?:[rwxX-]*|[0-7])$")
_SHARED_WORDS = frozenset({"false", "umask", "true", "group", "all", "world", "everybody"})


def granted_modes(cmd: SimpleCommand) -> tuple[list[Word], bool]:
    """(the modes ``cmd`` gives files, spelled as chmod's, whether it copies a mode from a
    file whose mode is not known here). See the module's docstring."""
    p = cmd.program
    if p == "chmod":
        return _chmod(cmd.args, cmd.cwd)
    if p in _MODE_OPTIONS:
        return _mode_option(p, cmd.args), False
    if p == "umask":
        return _umask(cmd.args), False
    if p == "rsync":
        return _rsync(cmd.args, cmd.cwd), False
    if p == "setfacl":
        return _setfacl(cmd.args)
    if p == "git":
        return _git(cmd.args), False
    if p == "cp":
        return _cp(cmd.args, cmd.cwd), False
    return [], False


def _located(w: Word, cwd: Word | None) -> str | None:
    """Where path ``w`` is, normalised: absolute, or relative to the workspace (may start
    with '..'); None when only known at run time (the word, or the 'cd' before it)."""
    if w.dynamic:
        return None
    if w.value.startswith("/"):
        return posixpath.normpath(w.value)
    if cwd is None:
        return posixpath.normpath(w.value)
    if cwd.dynamic:
        return None
    return posixpath.normpath(posixpath.join(cwd.value, w.value))


def _copied_mode(w: Word, cwd: Word | None) -> str | None:
    """The mode of a file every system makes world-writable ('/tmp': '1777'), else None."""
    loc = _located(w, cwd)
    return None if loc is None else _WORLD_WRITABLE.get(loc)


def _reference(w: Word, cwd: Word | None, modes: list[Word]) -> bool:
    """'chmod --reference=FILE': a world-writable system file's mode is added to
    ``modes``; True when FILE's mode is not known here (outside the workspace, or named at
    run time). A workspace file's mode was given by commands judged when they ran."""
    mode = _copied_mode(w, cwd)
    if mode is not None:
        modes.append(Word(mode))
        return False
    loc = _located(w, cwd)
    return loc is None or loc.startswith("/") or loc == ".." or loc.startswith("../")


def _chmod(args: tuple[Word, ...], cwd: Word | None) -> tuple[list[Word], bool]:
    modes: list[Word] = []
    operands: list[Word] = []
    copied = mode_word = False
    options = True
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        if options and v == "--":
            options = False
        elif options and v.startswith("--") and not w.operand:
            if long_option(v, ("--reference",), "chmod") is None:
                continue
            mode_word = True
            ref = w.tail(v.index("=") + 1) if "=" in v else (args[k] if k < len(args) else None)
            k += 0 if "=" in v else 1
            if ref is not None:
                copied |= _reference(ref, cwd, modes)
        elif options and (cluster := short_cluster(v)) is not None and not w.operand:
            if _MODE_LETTERS.intersection(cluster):
                mode_word = True
                modes.append(w)  # 'chmod -w,o+w f': the word is the mode
        else:
            operands.append(w)
    if not mode_word and operands:
        modes.append(operands[0])
    return modes, copied


def _mode_option(program: str, args: tuple[Word, ...]) -> list[Word]:
    """The '-m'/'--mode' values among ``args`` ('-m 777', '-m777', '-pm 777', '-Dm777',
    '--mode=a+w', '--mo 777')."""
    letters, longs = _MODE_OPTIONS[program]
    out: list[Word] = []
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        if v == "--":
            break
        if v.startswith("--"):
            opt = long_option(v, longs, program)
            if opt is None:
                continue
            if "=" in v:
                value: Word | None = w.tail(v.index("=") + 1)
            elif opt in _OPTIONAL_VALUE or k >= len(args):
                continue
            else:
                value, k = args[k], k + 1
            if opt == "--mode" and value is not None:
                out.append(value)
        elif (cluster := short_cluster(v)) is not None:
            for i, letter in enumerate(cluster):
                if letter not in letters:
                    continue
                if i < len(cluster) - 1:
                    value = w.tail(i + 2)  # '-m777', '-Dm777': the rest of the word
                elif k < len(args):
                    value, k = args[k], k + 1
                else:
                    value = None
                if letter == "m" and value is not None:
                    out.append(value)
                break
    return out


def _umask(args: tuple[Word, ...]) -> list[Word]:
    """The mode 'umask VALUE' lets new files have: the complement of a numeric mask
    ('0' -> '777', '0002' -> '775'); a symbolic one ('o=rwx') is that mode already."""
    for w in args:
        v = w.value
        if w.dynamic:
            return [w]
        if v.startswith("-") and v != "-":
            continue  # '-S', '-p'
        if _UMASK_RE.match(v):
            return [Word(format(0o777 & ~int(v, 8), "o"))]
        return [w]
    return []


def _rsync(args: tuple[Word, ...], cwd: Word | None) -> list[Word]:
    """'--chmod=CLAUSES' (each clause, its 'D'/'F' prefix dropped), and a world-writable
    system file copied with its permissions ('-a', '-p', '--perms', '--archive')."""
    out: list[Word] = []
    perms = False
    for k, w in enumerate(args):
        v = w.value
        if v.startswith("--"):
            opt = long_option(v, ("--chmod", "--perms", "--archive"), "rsync")
            if opt == "--chmod":
                value = w.tail(v.index("=") + 1) if "=" in v else None
                if value is None and k + 1 < len(args):
                    value = args[k + 1]
                if value is not None:
                    out += _clauses(value, strip="DF")
            perms |= opt in ("--perms", "--archive")
        elif (cluster := short_cluster(v)) is not None:
            for letter in cluster:
                if letter in RSYNC_VALUED_SHORT:
                    break  # '-e ssh', '-essh -p': the rest is its value
                perms |= letter in "ap"
    if perms:
        paths = rsync_paths(args)
        out += [Word(m) for w in paths[:-1] if (m := _copied_mode(w, cwd)) is not None]
    return out


def _clauses(value: Word, strip: str = "") -> list[Word]:
    if value.dynamic:
        return [value]
    return [Word(c.lstrip(strip)) for c in value.value.split(",")]


def _setfacl(args: tuple[Word, ...]) -> tuple[list[Word], bool]:
    """ACL entries given with '-m'/'--modify'/'-s'/'--set' (clusters '-Rm', '-dm'): an
    entry for others, the mask or a named user or group is the chmod clause 'o=PERMS'
    (another local user gets them); entries read from a file ('-M', '-S') may be any."""
    out: list[Word] = []
    from_file = False
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        value: Word | None = None
        opt = ""
        if v.startswith("--"):
            opt = (
                long_option(
                    v, ("--modify", "--set", "--modify-file", "--set-file", "--remove"), "setfacl"
                )
                or ""
            )
            if opt and "=" in v:
                value = w.tail(v.index("=") + 1)
            elif opt and k < len(args):
                value, k = args[k], k + 1
        elif (cluster := short_cluster(v)) is not None:
            for i, letter in enumerate(cluster):
                if letter in "msMSx":
                    opt = letter
                    if i < len(cluster) - 1:
                        value = w.tail(i + 2)
                    elif k < len(args):
                        value, k = args[k], k + 1
                    break
        if value is None:
            continue
        if opt in ("M", "S", "--modify-file", "--set-file"):
            from_file = True
        elif opt in ("m", "s", "--modify", "--set"):
            out += _acl_modes(value)
    return out, from_file


def _acl_modes(value: Word) -> list[Word]:
    if value.dynamic:
        return [value]
    out: list[Word] = []
    for entry in value.value.split(","):
        parts = entry.strip().split(":")
        if parts[0] in ("d", "default"):
            parts = parts[1:]
        if len(parts) < 2 or not _ACL_PERMS_RE.match(parts[-1]):
            continue
        tag, perms = parts[0], parts[-1]
        if tag in ("u", "user", "g", "group"):
            if len(parts) != 3 or not parts[1]:
                continue  # the owner or the owning group: chmod u=/g= is not asked about
        elif tag not in ("o", "other", "m", "mask") or len(parts) > 3:
            continue
        if perms.isdigit():
            perms = "".join(c for c, bit in zip("rwx", (4, 2, 1), strict=True) if int(perms) & bit)
        out.append(Word("o=" + perms.replace("-", "")))
    return out


def _git(args: tuple[Word, ...]) -> list[Word]:
    """git's shared-repository mode: 'init --shared=MODE' (or 'clone'), 'config
    core.sharedRepository MODE', '-c core.sharedRepository=MODE'. A word ('group', 'all',
    'world') keeps others' write off (git makes the repository group-writable and at most
    world-readable); an octal mode is the files' mode."""
    out: list[Word] = []
    sub = -1
    k = 0
    while k < len(args):
        v = args[k].value
        if not v.startswith("-"):
            sub = k
            break
        if v in ("-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env"):
            if v == "-c" and k + 1 < len(args):
                out += _shared_setting(args[k + 1])
            k += 2
            continue
        if v.startswith("-c") and not v.startswith("--"):
            out += _shared_setting(args[k].tail(2))
        k += 1
    if sub == -1:
        return out
    rest = args[sub + 1 :]
    if args[sub].value in ("init", "clone"):
        for w in rest:
            if long_option(w.value, ("--shared",), "git") and "=" in w.value:
                out += _shared_value(w.tail(w.value.index("=") + 1))
    elif args[sub].value == "config":
        values = [w.value.lower() for w in rest]
        for i, v in enumerate(values[:-1]):
            if v == "core.sharedrepository":
                out += _shared_value(rest[i + 1])
    return out


def _shared_setting(setting: Word) -> list[Word]:
    key, eq, _ = setting.value.partition("=")
    if not eq or key.lower() != "core.sharedrepository":
        return []
    return _shared_value(setting.tail(len(key) + 1))


def _shared_value(value: Word) -> list[Word]:
    if value.dynamic:
        return [value]
    return [] if value.value.lower() in _SHARED_WORDS else [value]


def _cp(args: tuple[Word, ...], cwd: Word | None) -> list[Word]:
    """The mode of a world-writable system file cp copies with its mode ('-p', '-a',
    '--preserve[=mode]', '--archive'): '/tmp' (1777), '/dev/null' (666)."""
    preserve = into = False  # into: a '-t DIR' names the destination
    operands: list[Word] = []
    skip = False
    options = True
    for w in args:
        v = w.value
        if skip:
            skip = False
        elif options and v == "--":
            options = False
        elif options and v.startswith("--"):
            opt = long_option(v, ("--preserve", "--archive", *_CP_VALUED), "cp")
            if opt == "--preserve":
                value = v.partition("=")[2]
                preserve |= not value or bool({"mode", "all"}.intersection(value.split(",")))
            preserve |= opt == "--archive"
            into |= opt == "--target-directory"
            skip = opt in _CP_VALUED and "=" not in v
        elif options and (cluster := short_cluster(v)) is not None:
            for i, letter in enumerate(cluster):
                if "-" + letter in _CP_VALUED:
                    into |= letter == "t"
                    skip = i == len(cluster) - 1
                    break
                preserve |= letter in "ap"
        else:
            operands.append(w)
    if not preserve:
        return []
    sources = operands if into else operands[:-1]
    return [Word(m) for w in sources if (m := _copied_mode(w, cwd)) is not None]
