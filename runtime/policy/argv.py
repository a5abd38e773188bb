"""Words of a parsed command line and the argv surgery done on them: quote removal,
seeing through a wrapper's options, finding shell-string options. Pure functions on
:class:`Word` lists; :mod:`runtime.policy.shell` drives them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.policy._long_options import long_option
from runtime.policy.wrappers import Wrapper

__all__ = [
    "Word",
    "is_dynamic_name",
    "join_words",
    "program_name",
    "shell_options",
    "short_cluster",
    "skip_options",
    "unquote",
    "unwrap",
]

_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Word:
    value: str  # after quote removal
    dynamic: bool = False  # its value is only known at run time ($x, $(..), globs, braces)
    operand: bool = False  # known never to be an option (find's '{}' is always a path)
    # Of a dynamic word (runtime.policy._word_shape): the shell passes it as exactly one
    # argument (every expansion double-quoted), and the literal text it starts with.
    single: bool = False
    prefix: str = ""

    def may_be_option(self) -> bool:
        """Whether the program may read this word (or a word it splits into) as an option:
        a run-time word that stays one argument and starts with text other than '-' is not
        ('GOPATH="$x"', './"$f"'); '"$f"', '"$d"/x', '-D"$x"' and any unquoted $x may be."""
        if not self.dynamic:
            return self.value.startswith("-")
        if self.operand:
            return False
        return not self.single or not self.prefix or self.prefix.startswith("-")

    def tail(self, start: int) -> Word:
        """The word from its character ``start`` on: an option's attached value
        ('--target=DIR', 'of=/dev/"$d"'). A run-time word keeps its shape: the literal
        start that remains, and whether the shell passes it as one argument."""
        if not self.dynamic:
            return Word(self.value[start:])
        prefix = self.prefix[start:] if len(self.prefix) > start else ""
        return Word(self.value[start:], True, single=self.single, prefix=prefix)


# A process's root and working directory through procfs ('/proc/self/root/' is '/',
# '/proc/1/cwd/x' is the directory pid 1 runs in: in the sandbox, the call's own).
_PROC_LINK_RE = re.compile(
    r"^/+proc/+(?:self|thread-self|[0-9]+)(?:/+task/+[0-9]+)?/+(root|cwd)(?=/|$)"
)


def proc_alias(value: str) -> str:
    """``value`` with a leading '/proc/PID/root' read as '/' and '/proc/PID/cwd' as the
    working directory ('.'): 'rm -rf /proc/self/root/' is 'rm -rf /', 'rm -rf
    /proc/self/cwd/*' is 'rm -rf ./*'. Every process in the sandbox shares the call's
    root and starts in its working directory; a 'cd' before it is followed as for '.'."""
    for _ in range(8):  # '/proc/self/root/proc/self/root/...'
        m = _PROC_LINK_RE.match(value)
        if m is None:
            return value
        rest = value[m.end() :].lstrip("/")
        value = "/" + rest if m.group(1) == "root" else ("./" + rest if rest else ".")
    return value


def literal_text(word: Word | None) -> str | None:
    """A word's value when it is known before the command runs (a literal here-document
    or here-string on a command's input), else None."""
    return None if word is None or word.dynamic else word.value


def program_name(value: str) -> str:
    """'/usr/bin//rm' -> 'rm'; '/proc/self/root/bin/./rm' -> 'rm'."""
    segs = [s for s in value.split("/") if s and s != "."]
    return segs[-1] if segs else value


def is_dynamic_name(word: Word) -> bool:
    """A command name the shell would expand: substitutions, parameters, globs, braces.
    '[' (test) is a program, not a glob."""
    if word.value in ("[", "[["):
        return word.dynamic
    return word.dynamic or bool(_GLOB_CHARS.intersection(word.value))


def short_cluster(value: str) -> str | None:
    if len(value) >= 2 and value[0] == "-" and value[1] != "-":
        return value[1:]
    return None


def unquote(raw: str) -> str:
    """Bash quote removal of a word without expansions: '..', "..", backslashes."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "'":
            j = raw.find("'", i + 1)
            if j < 0:
                raise ValueError("unterminated single quote")
            out.append(raw[i + 1 : j])
            i = j + 1
        elif c == '"':
            i += 1
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append(raw[i + 1])
                    i += 2
                else:
                    out.append(raw[i])
                    i += 1
            if i >= n:
                raise ValueError("unterminated double quote")
            i += 1
        elif c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def join_words(words: list[Word]) -> Word:
    return Word(" ".join(w.value for w in words), any(w.dynamic for w in words))


def skip_options(words: list[Word]) -> list[Word]:
    valued = {
        "-n",
        "--name",
        "-p",
        "--prefix",
        "--with",
        "--python",
        "--package",
        "-w",
        "--workspace",
        "--from",
        "--env",
        "-e",
        "--directory",
        "-C",
    }
    i = 0
    while i < len(words) and words[i].value.startswith("-"):
        if words[i].value == "--":
            i += 1
            break
        i += 2 if words[i].value in valued else 1
    return words[i:]


def shell_options(words: list[Word], spec: Wrapper) -> list[Word]:
    """Values of a wrapper's shell-string options ('su root -c CMD', 'script -qc CMD f'),
    wherever they sit: such wrappers accept options after their positionals."""
    out: list[Word] = []
    if not spec.shell_arg:
        return out
    letters = {o[1] for o in spec.shell_arg if len(o) == 2}
    for k, w in enumerate(words[1:], 1):
        v = w.value
        if v.startswith("--"):
            _, eq, val = v.partition("=")
            if long_option(v, spec.shell_arg, program_name(words[0].value)):  # '--comm CMD'
                if eq:
                    out.append(Word(val, w.dynamic))
                elif k + 1 < len(words):
                    out.append(words[k + 1])
        elif (cluster := short_cluster(v)) is not None:
            for m, letter in enumerate(cluster):
                if letter in letters:
                    attached = cluster[m + 1 :]
                    if attached:
                        out.append(Word(attached, w.dynamic))
                    elif k + 1 < len(words):
                        out.append(words[k + 1])
                    break
                if letter in spec.short_with_arg:
                    break
    return out


def unwrap(words: list[Word], spec: Wrapper) -> tuple[list[Word], tuple[str, ...], tuple[int, ...]]:
    """Split ``wrapper [options] [positionals] program args`` -> (program args, assigns,
    indices of the words read as option values or positionals).

    The indices are where the split may be wrong: an option the table says takes a value
    but does not, or a positional count that differs between versions. The caller checks
    the command that would run if one of them were the program (``WrappersMixin.simple``).
    """
    assigns: list[str] = []
    values: list[int] = []
    i, n = 1, len(words)
    positionals = spec.positionals
    while i < n:
        w = words[i]
        v = w.value
        if v == "--":
            i += 1
            break
        if v == "-" and spec.dash_option:
            i += 1  # 'env -' is 'env -i'; 'su -' is 'su --login'
            continue
        if v.startswith("--") and len(v) > 2:
            # By any prefix, as getopt_long reads it ('timeout --sig KILL 5 rm').
            if "=" not in v and long_option(v, spec.long_with_arg, program_name(words[0].value)):
                values.append(i + 1)
                i += 2
            else:
                i += 1
            continue
        cluster = short_cluster(v)
        if cluster is not None:
            i += 1
            for k, letter in enumerate(cluster):
                if letter in spec.short_with_arg:
                    if not cluster[k + 1 :]:
                        values.append(i)
                        i += 1  # the value is the next word
                    break
            continue
        if spec.assignments and "=" in v and v.split("=", 1)[0].isidentifier():
            assigns.append(v.split("=", 1)[0])
            i += 1
            continue
        if positionals:
            # 'flock FILE -c CMD', 'timeout 5 -s KILL cmd': options may follow positionals.
            positionals -= 1
            values.append(i)
            i += 1
            continue
        break
    values.extend(range(i, min(i + positionals, n)))
    i += positionals
    return list(words[i:]), tuple(assigns), tuple(k for k in values if k < n)
