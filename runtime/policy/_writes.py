"""What a shell command writes, judged by the path rules as ``write_file`` is: output
redirect targets (the shell opens them: ``echo x > .git/hooks/pre-commit``) and the files
ordinary writing programs name (``tee``, ``cp``/``install``/``ln``/``rsync``
destinations, ``dd of=``, ``touch``, ``truncate``, ``shred``, ``unlink``, ``rm``, ``mkdir``,
``chmod``, ``sed -i``, ``patch FILE``, ``ed FILE``, ``uniq``/``xxd``/``split``'s second
operand, ``objcopy``, ``strip``, ``mktemp``, ``mkfifo``, ``mknod``, ``script``, the
compressors' operands, compilers' ``-o``, tar's archive and extraction directory, git's
``--output``/``-o``/``config -f``, and the output options of ``sort``, ``curl``, ``wget``,
``unzip``, ``patch``, ``shuf``, ``iconv``, ``csplit``). A path a deny or deny_write glob
protects is refused (``paths.deny*``).

Not the wall: the sandbox's masks make the kernel refuse these writes (a read-only bind, an
empty hidden file). The policy refuses what it can see, early and with a reason, as the
file tools do. Literal operands only, from every directory the command may be in
(:func:`runtime.policy._moves.operand_forms`); a run-time operand or directory is the
kernel's (asking would refuse every ``cd "$D" && make > log``).
"""

from __future__ import annotations

from runtime.policy._globreach import is_glob
from runtime.policy._long_options import long_option
from runtime.policy._moves import Finding, operand_forms
from runtime.policy._shell_model import SimpleCommand
from runtime.policy.argv import Word, short_cluster
from runtime.policy.paths import PathRules

__all__ = [
    "CONTENT_WRITERS",
    "content_writes",
    "option_values",
    "write_findings",
    "written_operands",
]

# The separate-valued options cp, install and ln share (GNU coreutils' backup suffix and
# target directory).
_COPY_VALUED = frozenset({"-S", "--suffix", "-t", "--target-directory"})
# program -> (options that take a separate value, which operands are written):
# 'all', 'last' (or the -t/--target-directory value), 'after_first' (chmod MODE FILE...;
# with --reference=RFILE there is no MODE: every operand). An option whose value is
# optional ('tee --output-error[=MODE]', 'mkdir --context[=CTX]', 'cp --backup[=CONTROL]')
# takes it only attached: the next word is an operand, never its value.
_WRITERS: dict[str, tuple[frozenset[str], str]] = {
    "tee": (frozenset(), "all"),
    "touch": (frozenset({"-r", "-d", "-t", "--reference", "--date", "--time"}), "all"),
    "truncate": (frozenset({"-s", "-r", "--size", "--reference"}), "all"),
    "shred": (frozenset({"-n", "-s", "--iterations", "--size", "--random-source"}), "all"),
    "unlink": (frozenset(), "all"),
    "rm": (frozenset(), "all"),
    "mkdir": (frozenset({"-m", "--mode"}), "all"),
    "cp": (_COPY_VALUED | {"--sparse", "--no-preserve"}, "last"),
    "install": (
        _COPY_VALUED | {"-m", "--mode", "-o", "--owner", "-g", "--group", "--strip-program"},
        "last",
    ),
    "ln": (_COPY_VALUED, "last"),
    "mv": (_COPY_VALUED, "last"),
    # A mode may also be given as an option word ('chmod -w FILE', '-x', '-rwx', '-w,+x'):
    # chmod then takes no MODE operand (see _MODE_LETTERS).
    "chmod": (frozenset({"--reference"}), "after_first"),
    "chown": (frozenset({"--reference", "--from"}), "after_first"),
    "chgrp": (frozenset({"--reference"}), "after_first"),
    # 'patch FILE [PATCHFILE]' edits FILE; 'ed FILE' writes it back on 'w'.
    "patch": (
        frozenset(
            {
                "-p",
                "-i",
                "-o",
                "-d",
                "-r",
                "-B",
                "-z",
                "-D",
                "-F",
                "-V",
                "-Y",
                "-g",
                "--input",
                "--output",
                "--directory",
                "--reject-file",
                "--prefix",
                "--suffix",
                "--ifdef",
                "--fuzz",
                "--version-control",
                "--basename-prefix",
                "--get",
                "--strip",
                "--quoting-style",
            }
        ),
        "first",
    ),
    "ed": (frozenset({"-p", "--prompt"}), "first"),
    # 'uniq IN OUT', 'xxd [-r] IN OUT', 'split IN PREFIX' (files PREFIXaa...).
    "uniq": (
        frozenset({"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"}),
        "second",
    ),
    "xxd": (frozenset({"-c", "-g", "-l", "-o", "-s", "-n", "-C", "--name"}), "second"),
    "split": (
        frozenset(
            {
                "-a",
                "-b",
                "-C",
                "-l",
                "-n",
                "-t",
                "--suffix-length",
                "--bytes",
                "--line-bytes",
                "--lines",
                "--number",
                "--separator",
                "--additional-suffix",
                "--filter",
            }
        ),
        "second",
    ),
    "objcopy": (
        frozenset({"-I", "-O", "-B", "-j", "-R", "-K", "-N", "-L", "-G", "-W", "-b", "-i"}),
        "last",
    ),
    "strip": (frozenset({"-o", "-R", "-K", "-N", "-F", "-I", "-O"}), "all"),
    "mktemp": (frozenset({"-p", "--suffix"}), "all"),
    "mkfifo": (frozenset({"-m", "--mode", "--context"}), "all"),
    "mknod": (frozenset({"-m", "--mode", "--context"}), "first"),
    "script": (
        frozenset(
            {
                "-c",
                "--command",
                "-E",
                "--echo",
                "-O",
                "--log-out",
                "-I",
                "--log-in",
                "-B",
                "--log-io",
                "-T",
                "--log-timing",
                "-m",
                "--logging-format",
            }
        ),
        "all",
    ),
    # Compressors replace each operand by its compressed (or expanded) file, unless they
    # write to stdout, test or list (see _STDOUT_ONLY).
    "gzip": (frozenset({"-S", "--suffix"}), "all"),
    "gunzip": (frozenset({"-S", "--suffix"}), "all"),
    "bzip2": (frozenset(), "all"),
    "bunzip2": (frozenset(), "all"),
    "xz": (
        frozenset(
            {
                "-S",
                "--suffix",
                "-F",
                "--format",
                "-C",
                "--check",
                "-M",
                "--memlimit",
                "-T",
                "--threads",
            }
        ),
        "all",
    ),
    "unxz": (frozenset({"-S", "--suffix"}), "all"),
}
# Compressor options that leave the operands alone (a cluster letter or a long option).
_STDOUT_ONLY = {
    "letters": frozenset("ctl"),
    "long": frozenset({"--stdout", "--to-stdout", "--test", "--list", "--keep"}),
}
_COMPRESSORS = frozenset({"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz"})
_TARGET = frozenset({"-t", "--target-directory"})
# The letters GNU chmod's getopt string reads as a mode ('r::w::x::X::s::t::u::g::o::a::,::
# +::=::' and the digits): a word holding one is the whole mode, and every operand a file.
_MODE_LETTERS = frozenset("rwxXstugoa,+=01234567")
_REFERENCE = frozenset({"--reference"})
# program -> options whose value is a path it writes (a file, or a directory it fills).
_OUTPUT_OPTIONS: dict[str, frozenset[str]] = {
    "sort": frozenset({"-o", "--output"}),
    "curl": frozenset({"-o", "--output", "--output-dir"}),
    "wget": frozenset({"-O", "--output-document", "-P", "--directory-prefix"}),
    "unzip": frozenset({"-d"}),
    "patch": frozenset({"-o", "--output"}),
    "shuf": frozenset({"-o", "--output"}),
    "iconv": frozenset({"-o", "--output"}),
    "csplit": frozenset({"-f", "--prefix"}),
    "mktemp": frozenset({"-p", "--tmpdir"}),
    "strip": frozenset({"-o"}),
    "script": frozenset({"-O", "--log-out", "-B", "--log-io", "-T", "--log-timing"}),
}
# Compilers and linkers: '-o FILE' or '-oFILE', never inside a cluster of flags (their
# options are words: '-fno-omit-frame-pointer' holds no '-o').
_COMPILERS = frozenset(
    {"gcc", "cc", "c++", "g++", "clang", "clang++", "ld", "as", "tcc", "rustc", "zig", "go"}
)


def option_values(args: tuple[Word, ...], opts: frozenset[str], program: str) -> list[Word]:
    """Values of ``opts`` among ``args``: '-o F', '-oF', '--output F', '--output=F', and a
    long option by any prefix ('--output-doc=F', :func:`long_option`)."""
    longs = [o for o in opts if o.startswith("--")]
    out: list[Word] = []
    for k, w in enumerate(args):
        v = w.value
        if v.startswith("--"):
            if long_option(v, longs, program) is None:
                continue
            if "=" in v:
                out.append(w.tail(v.index("=") + 1))
            elif k + 1 < len(args):
                out.append(args[k + 1])
            continue
        if v in opts:
            if k + 1 < len(args):
                out.append(args[k + 1])
            continue
        for opt in opts:
            if opt.startswith("--"):
                continue
            at = v.find(opt[1], 1) if v.startswith("-") else -1
            if at == -1 or not (at == 1 or v[1:at].isalpha()):
                continue  # '-sSLo F', '-oF': the letter ends a cluster of flags
            if v[at + 1 :]:
                out.append(w.tail(at + 1))
            elif k + 1 < len(args):
                out.append(args[k + 1])
    return out


_SED_SCRIPT = ("--expression", "--file")


def _sed_files(args: tuple[Word, ...]) -> list[Word]:
    """The files 'sed -i SCRIPT FILE...' edits in place (none without -i)."""
    in_place = False
    script_given = False
    operands: list[Word] = []
    skip = False
    for w in args:
        v = w.value
        if skip:
            skip = False
            continue
        if long_option(v, ("--in-place",), "sed") or (
            v.startswith("-") and not v.startswith("--") and "i" in v
        ):
            in_place = True
        script = long_option(v, _SED_SCRIPT, "sed")
        if v in ("-e", "-f") or (script and "=" not in v):
            script_given = True
            skip = True
        elif script:
            script_given = True
        elif not v.startswith("-") or v == "-":
            operands.append(w)
    if not in_place:
        return []
    return operands if script_given else operands[1:]


# rsync's options that take a separate value (popt: '--rsh CMD' or '--rsh=CMD', '-e CMD',
# short ones also attached: '-eCMD'); a value is not a source or the destination.
_RSYNC_VALUED_SHORT = "efBTM"
_RSYNC_VALUED_LONG = frozenset(
    {
        "--rsh", "--rsync-path", "--filter", "--exclude", "--include", "--exclude-from",
        "--include-from", "--files-from", "--block-size", "--backup-dir", "--suffix",
        "--chmod", "--chown", "--usermap", "--groupmap", "--timeout", "--contimeout",
        "--temp-dir", "--compare-dest", "--copy-dest", "--link-dest", "--compress-choice",
        "--zc", "--compress-level", "--zl", "--skip-compress", "--checksum-choice", "--cc",
        "--max-size", "--min-size", "--max-delete", "--max-alloc", "--partial-dir",
        "--log-file", "--log-file-format", "--out-format", "--password-file", "--port",
        "--sockopts", "--bwlimit", "--stop-after", "--stop-at", "--write-batch",
        "--only-write-batch", "--read-batch", "--protocol", "--iconv", "--address",
        "--outbuf", "--remote-option", "--modify-window", "--info", "--debug", "--checksum-seed",
        "--copy-as", "--early-input", "--mkpath-mode", "--config", "--dparam",
    }
)  # fmt: skip


def _rsync_paths(args: tuple[Word, ...]) -> list[Word]:
    """The source and destination operands of an rsync command line: not options, not the
    values of options that take one ('-e ssh', '--exclude .git', '-f "merge x"')."""
    paths: list[Word] = []
    skip = False
    options = True
    for w in args:
        v = w.value
        if skip:
            skip = False
        elif options and v == "--":
            options = False
        elif options and v.startswith("--") and not w.operand:
            # popt reads long options whole: no abbreviations, so the exact name.
            skip = "=" not in v and v in _RSYNC_VALUED_LONG
        elif options and (cluster := short_cluster(v)) is not None and not w.operand:
            for k, letter in enumerate(cluster):
                if letter in _RSYNC_VALUED_SHORT:
                    skip = k == len(cluster) - 1  # '-e CMD'; '-eCMD' holds it
                    break
        else:
            paths.append(w)
    return paths


def written_operands(cmd: SimpleCommand) -> list[Word]:
    """The paths ``cmd`` writes through its own arguments (see the module's docstring)."""
    if cmd.program == "sed":
        return _sed_files(cmd.args)
    if cmd.program == "dd":
        return [w.tail(3) for w in cmd.args if w.value.startswith("of=")]
    if cmd.program == "rsync":
        paths = _rsync_paths(cmd.args)
        return paths[-1:] if len(paths) > 1 else []
    if cmd.program in _COMPILERS:
        return _compiler_outputs(cmd.args)
    if cmd.program == "tar":
        return _tar_paths(cmd.args)
    if cmd.program == "git":
        return _git_outputs(cmd.args)
    out: list[Word] = []
    if cmd.program in _OUTPUT_OPTIONS:
        out = option_values(cmd.args, _OUTPUT_OPTIONS[cmd.program], cmd.program)
    spec = _WRITERS.get(cmd.program)
    if spec is None or (cmd.program in _COMPRESSORS and _stdout_only(cmd.args)):
        return out
    operands, targets, reference = _split(cmd, spec[0])
    which = spec[1]
    if which == "all":
        return out + operands
    if which == "after_first":
        return out + (operands if reference else operands[1:])
    if which == "first":
        return out + operands[:1]
    if which == "second":
        return out + operands[1:2]
    return out + (targets or operands[-1:])


def _stdout_only(args: tuple[Word, ...]) -> bool:
    for w in args:
        v = w.value
        if v == "--":
            break
        if v.startswith("--") and any(long_option(v, (o,), "gzip") for o in _STDOUT_ONLY["long"]):
            return True
        cluster = short_cluster(v)
        if cluster is not None and _STDOUT_ONLY["letters"].intersection(cluster):
            return True
    return False


def _compiler_outputs(args: tuple[Word, ...]) -> list[Word]:
    out: list[Word] = []
    for k, w in enumerate(args):
        if w.value == "-o" and k + 1 < len(args):
            out.append(args[k + 1])
        elif w.value.startswith("-o") and len(w.value) > 2:
            out.append(w.tail(2))
    return out


# tar's short options that take a value (GNU tar): in a cluster or the old-style first
# word ('xzf A.tar', 'cvbf 20 A.tar') each takes the next word, in order.
_TAR_VALUED = frozenset("bCfFgHIKLNTVX")
_TAR_EXTRACT = frozenset({"--extract", "--get"})
_TAR_CREATE = frozenset({"--create", "--append", "--update", "--catenate", "--concatenate"})


def _tar_paths(args: tuple[Word, ...]) -> list[Word]:
    """What tar writes: the archive ('-f A') when it creates or adds to one, the directory
    it extracts into ('-C DIR', '--directory=DIR') when it extracts."""
    mode = ""
    archives: list[Word] = []
    dirs: list[Word] = []
    pending: list[str] = []  # value letters waiting for their words, in order

    def take(letter: str, value: Word) -> None:
        if letter == "f":
            archives.append(value)
        elif letter == "C":
            dirs.append(value)

    for k, w in enumerate(args):
        v = w.value
        if pending:
            take(pending.pop(0), w)
            continue
        if v.startswith("--"):
            opt = long_option(v, [*_TAR_EXTRACT, *_TAR_CREATE, "--file", "--directory"], "tar")
            if opt in _TAR_EXTRACT:
                mode += "x"
            elif opt in _TAR_CREATE:
                mode += "c"
            elif opt in ("--file", "--directory"):
                letter = "f" if opt == "--file" else "C"
                if "=" in v:
                    take(letter, w.tail(v.index("=") + 1))
                else:
                    pending.append(letter)
            continue
        letters = v[1:] if v.startswith("-") else (v if k == 0 else "")
        for i, c in enumerate(letters):
            if c in "xcruA":
                mode += "x" if c == "x" else "c"
            if c in _TAR_VALUED:
                if v.startswith("-") and i < len(letters) - 1:
                    take(c, w.tail(i + 2))  # '-fA.tar', '-CDIR': the rest of the word
                    break
                pending.append(c)
    out = archives if "c" in mode else []
    return out + (dirs if "x" in mode else [])


# git subcommands and the options whose value is a file they write.
_GIT_OUTPUTS: dict[str, frozenset[str]] = {
    "diff": frozenset({"--output"}),
    "log": frozenset({"--output"}),
    "show": frozenset({"--output"}),
    "format-patch": frozenset({"-o", "--output-directory", "--output"}),
    "archive": frozenset({"-o", "--output"}),
    "config": frozenset({"-f", "--file"}),
}


def _git_outputs(args: tuple[Word, ...]) -> list[Word]:
    """Files git writes named by an option of its subcommand ('git diff --output=F',
    'git archive -o F', 'git config -f F KEY VALUE'; the subcommand is the first word
    that is not one of git's own options)."""
    for k, w in enumerate(args):
        if w.value.startswith("-"):
            continue
        opts = _GIT_OUTPUTS.get(w.value)
        return [] if opts is None else option_values(args[k + 1 :], opts, "git")
    return []


def _split(cmd: SimpleCommand, valued: frozenset[str]) -> tuple[list[Word], list[Word], bool]:
    """A writer's (operands, -t/--target-directory values, whether chmod's mode is an
    option word or --reference) given its options that take a separate value."""
    operands: list[Word] = []
    targets: list[Word] = []
    options = True
    reference = False  # chmod --reference=RFILE or 'chmod -w': no MODE operand
    skip = ""
    for w in cmd.args:
        v = w.value
        if skip:
            if skip in _TARGET:
                targets.append(w)
            skip = ""
            continue
        if options and v == "--":
            options = False
        elif options and v.startswith("--") and not w.operand:
            opt = long_option(v, valued | _REFERENCE, cmd.program) or ""
            reference |= opt == "--reference"
            if opt in _TARGET and "=" in v:
                targets.append(w.tail(v.index("=") + 1))
            elif opt in valued and "=" not in v:
                skip = opt
        elif options and (cluster := short_cluster(v)) is not None and not w.operand:
            if cmd.program == "chmod" and _MODE_LETTERS.intersection(cluster):
                reference = True  # 'chmod -w FILE': the mode is this word, not an operand
                continue
            # '-rt DIR', '-t.git/hooks': the first valued letter takes the rest of the
            # cluster, or the next word when it ends it.
            for k, letter in enumerate(cluster):
                if "-" + letter not in valued:
                    continue
                if k == len(cluster) - 1:
                    skip = "-" + letter
                elif "-" + letter in _TARGET:
                    targets.append(w.tail(k + 2))  # '-' and the letters up to it
                break
        else:
            operands.append(w)
    return operands, targets, reference


#: The programs :func:`content_writes` reads (a name test before any work per command).
CONTENT_WRITERS = frozenset({"tee", "sponge", "dd", "cp", "install", "ln", "mv"})


def content_writes(cmd: SimpleCommand) -> list[tuple[Word, Word | None]]:
    """(file, source) for each file ``cmd`` fills with content it reads: a path it copies
    from, or None for its standard input. ``tee`` and ``sponge`` write their input; ``dd
    of=`` its ``if=`` or its input; ``cp``, ``install``, ``ln`` and ``mv`` each source (into
    a directory: the source's name there, which is what a script's run is matched by)."""
    program = cmd.program
    if program == "tee":
        return [(w, None) for w in written_operands(cmd)]
    if program == "sponge":
        files = [w for w in cmd.args if not w.value.startswith("-")]
        return [(files[0], None)] if files else []
    if program == "dd":
        sources = [w.tail(3) for w in cmd.args if w.value.startswith("if=")]
        return [(w, sources[-1] if sources else None) for w in written_operands(cmd)]
    if program in ("cp", "install", "ln", "mv"):
        operands, targets, _ = _split(cmd, _WRITERS[program][0])
        if targets:
            sources, into = operands, targets[-1]
        elif len(operands) > 1:
            sources, into = operands[:-1], operands[-1]
        else:
            return []
        out: list[tuple[Word, Word | None]] = []
        for source in sources:
            out.append((into, source))
            if targets or len(sources) > 1 or into.value.endswith("/"):
                out.append((Word(source.value.rstrip("/"), source.dynamic), source))
        return out
    return []


def _glob_only(word: Word) -> bool:
    """A word whose only unknown is its glob characters: its text is the pattern bash
    matches against the tree (no parameter, substitution or brace in it)."""
    v = word.value
    return is_glob(v) and not any(c in v for c in "$`{")


def write_findings(cmd: SimpleCommand, paths: PathRules) -> list[Finding]:
    """Deny findings for the protected paths ``cmd`` writes (redirects and operands)."""
    words = [(w, "a redirect") for w in cmd.redirects]
    words += [(w, cmd.program) for w in written_operands(cmd)]
    out: list[Finding] = []
    for word, what in words:
        # A delete's glob is judged as a move's is (_moves: 'rm -r .e*' keeps no name, and
        # 'rm -f c*' removes no directory): only what writes into a path is here.
        glob = _glob_only(word) and cmd.program not in ("rm", "unlink", "rmdir", "shred")
        if word.dynamic and not glob:
            continue
        # A glob's text, judged by every path it could name.
        forms, _ = operand_forms(cmd, Word(word.value) if glob else word, paths.root)
        for norm in forms:
            if norm == ".":
                continue  # the directory itself: not a file this writes
            # A glob ('cp x .gi?/config', 'truncate -s0 .g*/config') by every existing
            # path it could name, as a move's operand is (paths.check_operand).
            v = paths.check_operand(norm) if glob else paths.check(norm, "write")
            if not v.allowed and v.rule in ("paths.deny", "paths.deny_write"):
                out.append(("deny", v.rule, f"{what} would write a protected path: {v.reason}"))
                break
            aimed = paths.renamed_name(norm) if glob else None
            if aimed is not None:  # 'cp x .e??': a glob aimed at a '**/.env' name
                rule, pattern = aimed
                reason = f"{what} would write {norm!r}, aimed at names {pattern!r} protects"
                out.append(("deny", rule, reason))
                break
    return out
