"""What a shell command writes, judged by the path rules as ``write_file`` is: output
redirect targets (the shell opens them: ``echo x > .git/hooks/pre-commit``) and the files
ordinary writing programs name (``tee``, ``cp``/``install``/``ln``/``rsync``
destinations, ``dd of=``, ``touch``, ``truncate``, ``shred``, ``unlink``, ``rm``, ``mkdir``,
``chmod``, ``sed -i``, ``patch FILE``, ``ed FILE``, ``uniq``/``xxd``/``split``'s second
operand, ``objcopy``, ``strip``, ``mktemp``, ``mkfifo``, ``mknod``, ``script``, the
compressors' operands, compilers' ``-o``, tar's archive and extraction directory, git's
``--output``/``-o``/``config -f`` and the directories ``init``/``clone``/``worktree add``
make, ``bundle create``'s file, ``checkout-index``/``read-tree`` ``--prefix``, a
``--work-tree`` and an ``init --git-dir``, and the output options of ``sort``, ``curl``,
``wget``, ``unzip``, ``patch``, ``shuf``, ``iconv``, ``csplit``, ``gpg``, ``openssl``,
``ssh-keygen -f``, ``exiftool``, gawk's ``-o``/``-p``/``-d`` and ``-i inplace``), the
files a program's own script writes (sed's ``w``/``W`` commands and ``s///w`` flag, awk's
``print > "FILE"``: in the text given as an argument here, and through
:func:`program_text_writes` in text the walker finds on a literal input or in a ``-f``
file the same command writes; find's ``-fprint``/``-fprintf``/``-fls``), a database
``sqlite3`` opens and the files its dot-commands and SQL name (``.output F``, ``VACUUM
INTO 'F'``), and ``yq -i``'s operands. A path a deny or deny_write glob
protects is refused (``paths.deny*``).

Not the wall: the sandbox's masks make the kernel refuse these writes (a read-only bind, an
empty hidden file). The policy refuses what it can see, early and with a reason, as the
file tools do. Literal operands only, from every directory the command may be in
(:func:`runtime.policy._moves.operand_forms`); a run-time operand or directory is the
kernel's (asking would refuse every ``cd "$D" && make > log``).
"""

from __future__ import annotations

import posixpath
import re

from runtime.policy._globreach import is_glob
from runtime.policy._long_options import long_option
from runtime.policy._moves import Finding, operand_forms
from runtime.policy._shell_model import SimpleCommand
from runtime.policy.argv import Word, short_cluster
from runtime.policy.embedded import awk_programs
from runtime.policy.paths import PathRules

__all__ = [
    "CONTENT_WRITERS",
    "RSYNC_VALUED_SHORT",
    "awk_outputs",
    "content_writes",
    "option_values",
    "program_text_writes",
    "rsync_paths",
    "runtime_script",
    "sqlite_text_writes",
    "write_findings",
    "writes_through_arguments",
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
    "gpg": frozenset({"-o", "--output"}),
    "gpg2": frozenset({"-o", "--output"}),
    # ssh-keygen writes the key it makes (and FILE.pub), or the known_hosts it edits (-R).
    "ssh-keygen": frozenset({"-f"}),
}
# program -> its options spelled as one word with one dash ('openssl -out F', 'exiftool
# -o F'), whose next word is a path it writes; read whole, never as a cluster of letters.
# openssl also reads '--out F' and '-out=F'; exiftool ignores the case of option names.
_WORD_OUTPUTS: dict[str, frozenset[str]] = {
    "openssl": frozenset(
        {
            "-out", "-keyout", "-writerand", "-sess_out", "-outdir", "-keylogfile",
            "-msgfile", "-reqout", "-respout", "-rspout", "-certout", "-chainout",
            "-extracertsout", "-cacertsout", "-crlout", "-signature", "-out_trusted",
            "-cert_out", "-key_out", "-sigfile",
        }
    ),
    # '-w EXT'/'-W FMT' (text and tag outputs, '!' overwrites, '+' appends), lower case.
    "exiftool": frozenset({"-o", "-out", "-w", "-textout", "-w!", "-w+", "-textout!",
                           "-textout+", "-tagout", "-tagout!", "-tagout+"}),
}  # fmt: skip
# The compiler drivers by name, also versioned or with a target prefix ('gcc-12',
# 'x86_64-linux-gnu-g++', 'clang++-16'): GCC's for every language it compiles (c89 and c99
# are POSIX's 'exec gcc -std=... "$@"', cpp runs cc1 -E as gcc does), and clang's. Each
# writes '-o FILE', runs its subprograms through '-wrapper' and finds them by '-B'
# (``_tool_options``).
COMPILER_DRIVER_RE = re.compile(
    r"(?:[A-Za-z0-9_.]+-)*"
    r"(?:gcc|g\+\+|cc|c\+\+|c89|c99|cpp|gfortran|gccgo|gdc|gnat|gm2|clang|clang\+\+)"
    r"(?:-[0-9.]+)?"
)
# Other compilers and linkers. All of them: '-o FILE' or '-oFILE', never inside a cluster of
# flags (their options are words: '-fno-omit-frame-pointer' holds no '-o').
_OTHER_COMPILERS = frozenset({"ld", "as", "tcc", "rustc", "zig", "go"})


def _is_compiler(program: str) -> bool:
    return program in _OTHER_COMPILERS or COMPILER_DRIVER_RE.fullmatch(program) is not None


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
RSYNC_VALUED_SHORT = "efBTM"
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


def rsync_paths(args: tuple[Word, ...]) -> list[Word]:
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
                if letter in RSYNC_VALUED_SHORT:
                    skip = k == len(cluster) - 1  # '-e CMD'; '-eCMD' holds it
                    break
        else:
            paths.append(w)
    return paths


def written_operands(cmd: SimpleCommand) -> list[Word]:
    """The paths ``cmd`` writes through its own arguments (see the module's docstring),
    after those the walker found in its program text (``SimpleCommand.writes``)."""
    return list(cmd.writes) + _argument_writes(cmd)


#: Programs :func:`_argument_writes` reads beyond the tables below (each has its own reader).
_OWN_READERS = frozenset(
    {
        "sed",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "find",
        "sqlite3",
        "sqlite",
        "yq",
        "dd",
        "rsync",
        "tar",
        "git",
    }
)


def writes_through_arguments(program: str) -> bool:
    """Whether :func:`written_operands` may find a file ``program`` writes in its own
    arguments. For any other program it is ``cmd.writes`` alone, whatever the arguments:
    the command rules skip such a program when they read an argument as a program's start
    (:meth:`runtime.policy.commands._Compiled.match`)."""
    return (
        program in _OWN_READERS
        or program in _WORD_OUTPUTS
        or program in _OUTPUT_OPTIONS
        or program in _WRITERS
        or _is_compiler(program)
    )


def _argument_writes(cmd: SimpleCommand) -> list[Word]:
    # The one gate: a program writes_through_arguments does not name has no reader here.
    if not writes_through_arguments(cmd.program):
        return []
    if cmd.program == "sed":
        return _sed_files(cmd.args) + sed_script_writes(cmd.args)
    if cmd.program in ("awk", "gawk", "mawk", "nawk"):
        return awk_outputs(cmd.program, cmd.args)[0] + _gawk_files(cmd.program, cmd.args)
    if cmd.program == "find":
        return _find_outputs(cmd.args)
    if cmd.program in _WORD_OUTPUTS:
        return _word_outputs(cmd.program, cmd.args)
    if cmd.program in ("sqlite3", "sqlite"):
        return _sqlite_database(cmd.args)
    if cmd.program == "yq":
        return _yq_in_place(cmd.args)
    if cmd.program == "dd":
        return [w.tail(3) for w in cmd.args if w.value.startswith("of=")]
    if cmd.program == "rsync":
        paths = rsync_paths(cmd.args)
        return paths[-1:] if len(paths) > 1 else []
    if _is_compiler(cmd.program):
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


# sed's commands by what follows them: a label to ';' or the line's end, a file name or
# text to the line's end, nothing or a number ('l 5', 'q 1').
_SED_LABEL = frozenset(":btT")
_SED_TO_EOL = frozenset("aicrRwWe#")
_SED_PLAIN = frozenset("=dDgGhHnNpPxzFlLqQv{}")
_SED_ADDRESS_RE = re.compile(r"(?:\d+(?:~\d+)?|\$|[,+~!]|\s)*")


def _sed_scripts(args: tuple[Word, ...]) -> list[Word]:
    """The script texts of a sed command line: each '-e SCRIPT' ('-neS', '--expression=S',
    its prefixes), or the first operand when there is none ('-f FILE' counts as one)."""
    scripts: list[Word] = []
    operands: list[Word] = []
    given = False
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        if v == "--":
            operands += args[k:]
            break
        if v.startswith("--"):
            opt = long_option(v, ("--expression", "--file", "--line-length"), "sed")
            if opt is None:
                continue
            given |= opt in ("--expression", "--file")
            if "=" in v:
                if opt == "--expression":
                    scripts.append(w.tail(v.index("=") + 1))
            elif k < len(args):
                if opt == "--expression":
                    scripts.append(args[k])
                k += 1
        elif (cluster := short_cluster(v)) is not None:
            for i, letter in enumerate(cluster):
                if letter == "i":
                    break  # '-i[SUFFIX]': the rest is its suffix
                if letter in "efl":
                    given |= letter in "ef"
                    value = w.tail(i + 2) if i < len(cluster) - 1 else None
                    if value is None and k < len(args):
                        value = args[k]
                        k += 1
                    if letter == "e" and value is not None:
                        scripts.append(value)
                    break
        else:
            operands.append(w)
    return scripts if given else operands[:1]


def _sed_regex_end(text: str, i: int, delim: str) -> int:
    """The index after the closing ``delim`` of a sed regex or replacement starting at
    ``i`` ('\\' escapes the next character), or -1 when it is not closed."""
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == delim:
            return i + 1
        i += 1
    return -1


def _sed_written(text: str) -> list[str] | None:
    """The files sed script ``text`` writes: 'w FILE' and 'W FILE' (the rest of the line),
    the 's' command's 'w FILE' flag; None when the text is not read to its end (sed
    refuses such a script, or the grammar here is wrong: the caller then looks harder)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        m = _SED_ADDRESS_RE.match(text, i)
        i = m.end() if m else i
        if i < n and text[i] in "/\\":  # an address '/re/' or '\cREc', then the rest
            delim = text[i + 1] if text[i] == "\\" and i + 1 < n else "/"
            end = _sed_regex_end(text, i + (2 if text[i] == "\\" else 1), delim)
            if end == -1:
                return None
            i = end
            while i < n and text[i] in "IM":
                i += 1
            continue
        if i >= n:
            break
        c = text[i]
        i += 1
        if c in ";\n":
            continue
        eol = text.find("\n", i)
        eol = n if eol == -1 else eol
        if c in _SED_TO_EOL:
            if c in "wW":
                out.append(text[i:eol].lstrip(" \t"))
            i = eol
        elif c in _SED_LABEL:
            end = min((j for j in (text.find(";", i), eol) if j != -1), default=n)
            i = end
        elif c in "sy":
            if i >= n:
                return None
            delim = text[i]
            end = _sed_regex_end(text, i + 1, delim)
            end = -1 if end == -1 else _sed_regex_end(text, end, delim)
            if end == -1:
                return None
            i = end
            while i < n and text[i] not in ";\n}":
                if text[i] == "w":  # the 'w FILE' flag: the rest of the line
                    out.append(text[i + 1 : eol].lstrip(" \t"))
                    i = eol
                    break
                i += 1
        elif c in _SED_PLAIN:
            while i < n and (text[i].isdigit() or text[i] in " \t"):
                i += 1
        else:
            return None
    return out


def sed_script_writes(args: tuple[Word, ...]) -> list[Word]:
    """The files a sed command line's scripts write ('sed -n "w FILE"', 's/a/b/w FILE').
    A script named at run time, or read from a file or the input, is not read here: the
    walker gives such text to :func:`program_text_writes` (a '-f' file, '-f -')."""
    out: list[Word] = []
    for script in _sed_scripts(args):
        if not script.dynamic:
            out += program_text_writes("sed", script.value)[0]
    return out


def program_text_writes(program: str, text: str) -> tuple[list[Word], bool]:
    """(files an awk or sed program ``text`` writes, whether it writes one named at run
    time). One reader for program text wherever it comes from: an argument, a '-f' file
    the same command writes, the input ('-f -', '-f /dev/stdin' with a here-document).
    sed: 'w FILE', 'W FILE', the 's' command's 'w FILE' flag; a script this grammar cannot
    read to its end is searched for any 'w' that may start a command, its line's rest read
    as a file (more found, never less). awk: see :func:`awk_outputs`."""
    if program == "sed":
        files = _sed_written(text)
        if files is None:
            files = [m.group(1) for m in _SED_W_RE.finditer(text)]
        return [Word(f) for f in files if f], False
    out: list[Word] = []
    unknown = False
    for m in _AWK_PRINT_RE.finditer(text):
        target = _awk_redirect(text, m.end())
        if target is None:
            continue
        literal = _AWK_STRING_RE.match(text, target)
        if literal is not None and "\\" not in literal.group(1):
            out.append(Word(literal.group(1)))
        else:
            unknown = True
    return out, unknown


def runtime_script(program: str, args: tuple[Word, ...]) -> bool:
    """Whether a sed or awk command line's script text is only known at run time: a
    script word that starts with an expansion ('sed "$S" f', 'awk "$P" f', 'sed -e
    "$(cat s)"'). Its commands ('e', 'w FILE', system()) cannot be read, as a shell
    string's cannot ('sh -c "$S"'). A script whose literal start is text ('s/a/$b/') is
    read for what that text shows."""
    if program == "sed":
        scripts = _sed_scripts(args)
    else:
        texts, _ = awk_programs([Word(program), *args])
        scripts = [w for w in args if w.dynamic and w.value in texts]
    return any(w.dynamic and not w.prefix for w in scripts)


_SED_W_RE = re.compile(r"(?<![A-Za-z0-9_\\-])[wW][ \t]*([^\n]*)")
# An awk output redirection in a print statement and its target: a string literal alone
# up to the statement's end is a file named here; anything else is named at run time.
_AWK_PRINT_RE = re.compile(r"\b(print|printf)\b")
_AWK_STRING_RE = re.compile(r'"((?:[^"\\\n]|\\.)*)"\s*(?=$|[;}\n]|#)')


def awk_outputs(program: str, args: tuple[Word, ...]) -> tuple[list[Word], bool]:
    """(files an awk command line's program text writes, whether it writes one named at
    run time): 'print > "F"', 'printf ... >> "F"'. A '>' at the top level of a print
    statement (outside parentheses, strings and brackets) redirects it; what follows is a
    file: a string literal is read, any other expression is a name made at run time
    ('print > $1'). A program given at run time is not read (its 'system' is not either)."""
    texts, _ = awk_programs([Word(program), *args])
    dynamic = [w for w in args if w.dynamic]
    out: list[Word] = []
    unknown = False
    for text in texts:
        if any(w.value == text for w in dynamic):
            continue
        files, named_late = program_text_writes(program, text)
        out += files
        unknown |= named_late
    return out, unknown


def _awk_redirect(text: str, i: int) -> int | None:
    """Where the target of a print statement's '>'/'>>' starts (``i``: after 'print'), or
    None when the statement has no such redirect."""
    depth = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c in ";}\n" and depth <= 0:
            return None
        elif c == ">" and depth <= 0:
            i += 2 if text[i + 1 : i + 2] == ">" else 1
            while i < n and text[i] in " \t":
                i += 1
            return i
        elif c == "|" and depth <= 0:
            return None  # a pipe: the command is judged as one (embedded)
        i += 1
    return None


# gawk's options that write a file: the value attached only ('-oFILE', '--profile=FILE'),
# else the default name in the working directory.
_GAWK_OUTPUTS = {
    "-o": "awkprof.out",
    "--pretty-print": "awkprof.out",
    "-p": "awkprof.out",
    "--profile": "awkprof.out",
    "-d": "awkvars.out",
    "--dump-variables": "awkvars.out",
}
_GAWK_LONG_OUTPUTS = tuple(o for o in _GAWK_OUTPUTS if o.startswith("--"))


def _gawk_files(program: str, args: tuple[Word, ...]) -> list[Word]:
    """What gawk writes by its options (any awk name may be gawk): '-o'/'-p'/'-d' and
    their long forms (pretty-print, profile, variable dump), and with the 'inplace'
    extension ('-i inplace', '--include=inplace') every input file it is given."""
    out: list[Word] = []
    inplace = False
    start = len(args)  # where the operands (the program text, then the files) start
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        if v == "--" or not v.startswith("-") or v == "-":
            start = k if v == "--" else k - 1
            break
        if v.startswith("--"):
            opt = long_option(v, (*_GAWK_LONG_OUTPUTS, "--include"), "gawk")
            if opt == "--include":
                value = v.partition("=")[2] if "=" in v else args[k].value if k < len(args) else ""
                k += 0 if "=" in v else 1
                inplace |= value.removesuffix(".awk") == "inplace"
            elif opt is not None:
                out.append(w.tail(v.index("=") + 1) if "=" in v else Word(_GAWK_OUTPUTS[opt]))
            continue
        letter, rest = v[:2], v[2:]
        if letter == "-i":
            value = rest or (args[k].value if k < len(args) else "")
            k += 0 if rest else 1
            inplace |= value.removesuffix(".awk") == "inplace"
        elif letter in _GAWK_OUTPUTS:
            out.append(w.tail(2) if rest else Word(_GAWK_OUTPUTS[letter]))
        elif letter in ("-v", "-F", "-f", "-e", "-l", "-E") and not rest:
            k += 1  # its value is the next word
    if inplace:
        texts, files = awk_programs([Word(program), *args])
        operands = [w for w in args[start:] if not w.value.startswith("-")]
        if not files and texts and operands:
            operands = operands[1:]  # the program text
        out += [w for w in operands if "=" not in w.value or w.dynamic]
    return out


# find's actions that write a file named by their value: '-fprint F', '-fprintf F FMT'.
_FIND_OUTPUTS = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})


def _find_outputs(args: tuple[Word, ...]) -> list[Word]:
    return [args[k + 1] for k, w in enumerate(args[:-1]) if w.value in _FIND_OUTPUTS]


def _word_outputs(program: str, args: tuple[Word, ...]) -> list[Word]:
    """'openssl req -out F -keyout K' (also '--out F', '-out=F'), 'exiftool -o F' (any
    case); exiftool's operands when it sets a tag ('-Comment=x FILE' rewrites FILE,
    keeping FILE_original) or copies tags into them ('-tagsFromFile SRC FILE'), and the
    files its '-w'/'-W' write (see :func:`_exif_text_outputs`)."""
    opts = _WORD_OUTPUTS[program]
    exif = program == "exiftool"
    out: list[Word] = []
    text_outputs: list[Word] = []
    for k, w in enumerate(args):
        v = w.value.lower() if exif else w.value
        if program == "openssl" and v.startswith("--"):
            v = v[1:]  # '--out F': openssl reads one dash or two
        name, eq, _ = v.partition("=")
        if eq and not exif and name in opts:
            out.append(w.tail(w.value.index("=") + 1))  # '-out=F'
        elif v in opts and k + 1 < len(args):
            target = text_outputs if exif and v.lstrip("-")[0] in "wt" else out
            target.append(args[k + 1])
    if exif:
        operands = _plain_operands(args, _EXIF_VALUED)
        if any(_EXIF_ASSIGN_RE.match(w.value) for w in args) or any(
            w.value.lower() == "-tagsfromfile" for w in args
        ):
            out += operands
        for fmt in text_outputs:
            out += _exif_text_outputs(fmt, operands)
    return out


_EXIF_FORMAT_RE = re.compile(r"%[-+]?\d*(?:\.\d+)?[dfecDFEC]")


def _exif_text_outputs(fmt: Word, operands: list[Word]) -> list[Word]:
    """The files 'exiftool -w FMT FILE' writes: FMT with its '%d%f%e' codes (a name made
    from each FILE's) read as a name ('.git/hooks/%f' is a file there); a plain
    extension ('txt', '.txt') is FILE's name with that extension."""
    if fmt.dynamic:
        return [fmt]
    v = fmt.value
    if "%" in v or "/" in v:
        return [Word(_EXIF_FORMAT_RE.sub("x", v))]
    ext = v.lstrip(".")
    return [Word(posixpath.splitext(w.value)[0] + "." + ext, w.dynamic) for w in operands if ext]


# exiftool: '-TAG=VALUE', '-TAG+=V', '-TAG<=FILE', '-TAG<SRC' set a tag in each file named.
_EXIF_ASSIGN_RE = re.compile(r"-[\w:#*-]+[+\-^]?(?:<?=|<)")
# exiftool's options that take the next word (lower case: it ignores case).
_EXIF_VALUED = frozenset(
    {
        "-o", "-out", "-ext", "-extension", "-if", "-p", "-printformat", "-w", "-textout",
        "-tagsfromfile", "-d", "-dateformat", "-c", "-coordformat", "-charset", "-api",
        "-x", "-exclude", "-@", "-i", "-ignore", "-lang", "-sep", "-separator", "-srcfile",
        "-userparam", "-fileorder", "-geotag", "-globaltimeshift", "-csvdelim", "-use",
        "-password", "-htmldump", "-listitem", "-wm", "-writemode",
    }
)  # fmt: skip


def _plain_operands(args: tuple[Word, ...], valued: frozenset[str]) -> list[Word]:
    """The words that are neither options nor the values of ``valued`` (one dash, any
    case)."""
    out: list[Word] = []
    skip = False
    for w in args:
        v = w.value
        if skip:
            skip = False
        elif v.startswith("-") and v != "-":
            skip = v.lower() in valued
        else:
            out.append(w)
    return out


# sqlite3's options that take the next word ('-cmd SQL'; '--cmd' alike).
_SQLITE_VALUED = frozenset(
    {
        "-cmd", "-separator", "-newline", "-nullvalue", "-init", "-vfs", "-mmap", "-maxsize",
        "-heap", "-lookaside", "-pagecache", "-pcachetrace", "-escape",
    }
)  # fmt: skip


def _sqlite_database(args: tuple[Word, ...]) -> list[Word]:
    """What sqlite3 writes: the database file it opens read-write (its first operand;
    none with '-readonly', or in archive mode '-A', whose '-f FILE' is the archive it
    writes when it creates or updates one), and the files the SQL and dot-commands of its
    other operands and '-cmd' values write (:func:`sqlite_text_writes`)."""
    norm = tuple(Word(w.value[1:], w.dynamic) if w.value.startswith("--") else w for w in args)
    operands = _plain_operands(norm, _SQLITE_VALUED)
    out: list[Word] = []
    archive = [k for k, w in enumerate(norm) if w.value in ("-A", "-archive")]
    if archive:
        writes, files = _sqlite_archive(args[archive[0] + 1 :])
        # Without '-f' the archive is the database operand: 'sqlite3 A.sqlar -A -c F'.
        before = [w for w in operands if norm.index(w) < archive[0]]
        out += (files or [args[norm.index(w)] for w in before[:1]]) if writes else []
    elif operands and not any(w.value == "-readonly" for w in norm):
        out.append(args[norm.index(operands[0])])
    texts = operands[1:] + [norm[k + 1] for k, w in enumerate(norm[:-1]) if w.value == "-cmd"]
    for text in texts:
        if not text.dynamic:
            out += sqlite_text_writes(text.value)
    return out


def _sqlite_archive(args: tuple[Word, ...]) -> tuple[bool, list[Word]]:
    """'sqlite3 -A -cf ARCHIVE FILE...': (whether it creates or updates the archive, the
    '-f' files naming it). Its options follow -A: 'c', 'u', 'i' write, 'f' takes the file."""
    writes = False
    files: list[Word] = []
    for k, w in enumerate(args):
        v = w.value
        if v.startswith("--"):
            opt, eq, _ = v.partition("=")
            writes |= opt in ("--create", "--update", "--insert")
            if opt == "--file":
                files += [w.tail(len(opt) + 1)] if eq else list(args[k + 1 : k + 2])
            continue
        letters = v[1:] if v.startswith("-") else (v if k == 0 else "")
        for i, c in enumerate(letters):
            writes |= c in "cui"
            if c == "f":
                rest = w.tail(len(v) - len(letters) + i + 1)
                files += [rest] if rest.value else list(args[k + 1 : k + 2])
                break
    return writes, files


# sqlite3's dot-commands that write the file they name: '.output F', '.once [-x] F',
# '.backup [DB] F', '.save F', '.clone F', '.log F', '.trace F' ('stdout'/'stderr'/'off'
# are none); SQL that writes a file: 'VACUUM [schema] INTO 'F'', 'ATTACH [DATABASE] 'F''.
_SQLITE_DOT_RE = re.compile(r"^\s*\.(output|once|backup|save|clone|log|trace)\b(.*)$", re.M)
_SQLITE_SQL_RE = re.compile(
    r"\b(?:VACUUM(?:\s+\w+)?\s+INTO|ATTACH(?:\s+DATABASE)?)\s+('(?:[^']|'')*'|\"[^\"]*\")",
    re.I,
)
_SQLITE_NOT_FILES = frozenset({"stdout", "stderr", "off", "on"})


def sqlite_text_writes(text: str) -> list[Word]:
    """The files sqlite3's input or argument ``text`` (SQL and dot-commands) writes."""
    out: list[Word] = []
    for m in _SQLITE_DOT_RE.finditer(text):
        words = [w.strip("'\"") for w in m.group(2).split() if not w.startswith("-")]
        if m.group(1) in ("backup", "save") and len(words) > 1:
            words = words[1:]  # '.backup main F': the schema, then the file
        if words and words[0].lower() not in _SQLITE_NOT_FILES and not words[0].startswith("|"):
            out.append(Word(words[0]))
    for m in _SQLITE_SQL_RE.finditer(text):
        name = m.group(1)[1:-1].replace("''", "'")
        if name and name != ":memory:" and not name.startswith("file:"):
            out.append(Word(name))
    return out


def _yq_in_place(args: tuple[Word, ...]) -> list[Word]:
    """'yq -i EXPR FILE...' rewrites each FILE (the expression is the first operand,
    unless '--from-file'/'--expression' gives it)."""
    flags = [short_cluster(w.value) or "" for w in args]
    if not any("i" in f for f in flags) and not any(
        long_option(w.value, ("--inplace",), "yq") for w in args
    ):
        return []
    valued = frozenset({"-I", "--indent", "-o", "--output-format", "-p", "--input-format"})
    operands: list[Word] = []
    skip = False
    for w in args:
        v = w.value
        if skip:
            skip = False
        elif v.startswith("-") and v != "-":
            skip = "=" not in v and v in valued
        else:
            operands.append(w)
    given = any(long_option(w.value, ("--from-file", "--expression"), "yq") for w in args)
    return operands if given else operands[1:]


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


# git's own options that take the next word ('git -C DIR', '-c KEY=VALUE').
_GIT_GLOBAL_VALUED = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}
)
# Subcommands that make a directory or file named by an operand: (the words before it
# that select it, the options of the subcommand that take the next word, which operand).
_GIT_DESTINATIONS: dict[str, tuple[tuple[str, ...], frozenset[str], int]] = {
    "init": ((), frozenset({"--template", "--separate-git-dir", "-b", "--initial-branch",
                            "--object-format", "--ref-format"}), 0),
    "clone": ((), frozenset({"--template", "--separate-git-dir", "-b", "--branch", "-o",
                             "--origin", "-u", "--upload-pack", "--reference",
                             "--reference-if-able", "--depth", "--shallow-since",
                             "--shallow-exclude", "-c", "--config", "--jobs", "-j",
                             "--filter", "--bundle-uri", "--server-option",
                             "--ref-format"}), 1),
    "worktree": (("add",), frozenset({"-b", "-B", "--reason"}), 0),
    "bundle": (("create",), frozenset({"--version"}), 0),
}  # fmt: skip
_GIT_DIR_OPTIONS = frozenset({"--separate-git-dir"})


def _git_outputs(args: tuple[Word, ...]) -> list[Word]:
    """Files git writes named by an option of its subcommand ('git diff --output=F',
    'git archive -o F', 'git config -f F KEY VALUE', 'init --separate-git-dir D') or by
    its operand (the directory 'init D', 'clone URL D', 'worktree add D' make, the file
    'bundle create F' writes). The subcommand is the first word that is neither one of
    git's own options nor their value; a relative path is taken from the '-C DIR's."""
    chdir = ""
    moved = False  # a '-C' only known at run time
    k = 0
    while k < len(args) and args[k].value.startswith("-"):
        v = args[k].value
        if v in _GIT_GLOBAL_VALUED and k + 1 < len(args):
            if v == "-C":
                d = args[k + 1]
                moved |= d.dynamic
                chdir = d.value if d.value.startswith("/") else posixpath.join(chdir, d.value)
            k += 1
        k += 1
    if k >= len(args):
        return []
    sub, rest = args[k].value, args[k + 1 :]
    out: list[Word] = []
    opts = _GIT_OUTPUTS.get(sub, frozenset()) | {"--output"}  # any log/diff-family command
    out += option_values(rest, opts, "git")
    out += _git_prefixed(sub, rest)
    trees = option_values(args[:k], frozenset({"--work-tree"}), "git")
    if trees and sub not in _GIT_READS_TREE:
        # The work tree is where it checks files out: a file in it is written there.
        for tree in trees:
            base = tree.value.rstrip("/") or "/"
            out += [Word(posixpath.join(base, "x"), tree.dynamic)]
            out += [
                Word(posixpath.join(base, w.value), tree.dynamic or w.dynamic)
                for w in _git_operands(rest, frozenset())
            ]
    if sub in ("init", "clone"):
        # '--git-dir=D init' makes D.
        out += [
            Word(posixpath.join(d.value, "x"), d.dynamic)
            for d in option_values(args[:k], frozenset({"--git-dir"}), "git")
        ]
    spec = _GIT_DESTINATIONS.get(sub)
    if spec is not None:
        selectors, valued, which = spec
        out += option_values(rest, _GIT_DIR_OPTIONS, "git")
        operands = _git_operands(rest, valued)
        if [w.value for w in operands[: len(selectors)]] == list(selectors):
            out += operands[len(selectors) + which : len(selectors) + which + 1]
    if not chdir:
        return out
    return [
        w if w.value.startswith("/") else Word(posixpath.join(chdir, w.value), w.dynamic or moved)
        for w in out
    ]


# Subcommands that leave the work tree alone (a '--work-tree' given to them is read, not
# written). Any other, and an alias, may check files out there.
_GIT_READS_TREE = frozenset(
    {
        "status", "diff", "log", "show", "ls-files", "grep", "blame", "annotate",
        "rev-parse", "describe", "shortlog", "cat-file", "ls-tree", "diff-files",
        "diff-index", "diff-tree", "rev-list", "for-each-ref", "branch", "tag", "config",
        "remote", "fetch", "push", "count-objects", "fsck", "show-ref", "var", "help",
        "version", "check-ignore", "check-attr", "whatchanged", "reflog", "name-rev",
        "add", "commit", "ls-remote", "show-branch", "format-patch", "bundle", "archive",
        "gc", "repack", "prune", "notes", "verify-commit", "verify-tag", "hash-object",
    }
)  # fmt: skip


def _git_prefixed(sub: str, rest: tuple[Word, ...]) -> list[Word]:
    """'checkout-index --prefix=P [FILE...]' writes P+FILE (P+'x' for '-a'/'--stdin' or
    none named); 'read-tree --prefix=P -u' checks a tree out below P."""
    if sub not in ("checkout-index", "read-tree"):
        return []
    prefixes = option_values(rest, frozenset({"--prefix"}), "git")
    if sub == "read-tree" and not any(w.value == "-u" for w in rest):
        return []
    files = [w for w in _git_operands(rest, frozenset()) if sub == "checkout-index"]
    out: list[Word] = []
    for p in prefixes:
        out += [Word(p.value + f.value, p.dynamic or f.dynamic) for f in files]
        out.append(Word(p.value + "x", p.dynamic))
    return out


def _git_operands(args: tuple[Word, ...], valued: frozenset[str]) -> list[Word]:
    """A git subcommand's operands: not its options, not the values ``valued`` take."""
    out: list[Word] = []
    skip = False
    options = True
    for w in args:
        v = w.value
        if skip:
            skip = False
        elif options and v == "--":
            options = False
        elif options and v.startswith("-") and v != "-":
            name = long_option(v, valued, "git") if v.startswith("--") else v
            skip = "=" not in v and name in valued
        else:
            out.append(w)
    return out


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
