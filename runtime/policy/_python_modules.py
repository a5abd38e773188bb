"""Python's interactive mode and the standard modules that run code: 'python3 -c CODE' and
'python3 a.py' spelled another way.

``python3 -m timeit -s SETUP STMT`` runs SETUP and STMT, ``python3 -m pdb -c '!stmt' a.py``
runs debugger commands (``!`` is any statement) and reads more from its input, ``python3 -m
code`` and ``-m asyncio`` are consoles that read statements from their input, ``python3 -i
a.py`` reads its input as statements after the script, and ``-m cProfile/profile/trace/pdb
a.py``, ``-m doctest f.txt`` and ``-m pickle f`` run (or unpickle) the files they name.
:func:`python_run` says which; the walker asks for code given as text (it cannot be read),
asks when the input is code and it is fed one, and marks the files as scripts the command
runs (a file the same command writes then asks, as ``python3 a.py`` of one does). Every
other module (``pytest``, ``pip``, ``venv``, ``json.tool``, ``http.server``) is what it was:
its name is not a file. Pure functions on :class:`Word` lists.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from runtime.policy._long_options import long_option
from runtime.policy.argv import Word

__all__ = ["PythonRun", "module_files", "python_run"]


class PythonRun(NamedTuple):
    code: str | None = None  # why words on the command line run as code
    files: tuple[Word, ...] = ()  # files run as code: a script, doctest files, a pickle
    reads_input: bool = False  # the input is read as statements or debugger commands


class _Module(NamedTuple):
    valued: frozenset[str] = frozenset()  # options that take a value
    code: frozenset[str] = frozenset()  # options whose value is code
    module_flags: frozenset[str] = frozenset()  # the operand is a module name, no file
    # What the operands are: statements ('code'), a script and its arguments ('script'),
    # files each run ('files'), or nothing this table reads ('none').
    operands: Literal["code", "script", "files", "none"] = "none"
    # Whether it reads statements or debugger commands from its input: always, or only
    # when no file is named.
    reads_input: Literal["always", "no-operands", "never"] = "never"
    extra_files: tuple[str, ...] = ()  # start-up files it runs from the working directory


_L = frozenset
_PROFILERS = _Module(
    valued=_L({"-o", "-s", "--outfile", "--sort"}), module_flags=_L({"-m"}), operands="script"
)
_MODULES: dict[str, _Module] = {
    "timeit": _Module(
        valued=_L({"-n", "-r", "-s", "-u", "--number", "--repeat", "--setup", "--unit"}),
        code=_L({"-s", "--setup"}),
        operands="code",
    ),
    "pdb": _Module(
        valued=_L({"-c", "--command"}),
        code=_L({"-c", "--command"}),
        module_flags=_L({"-m"}),
        operands="script",
        reads_input="always",
        extra_files=(".pdbrc",),
    ),
    "cProfile": _PROFILERS,
    "profile": _PROFILERS,
    "trace": _Module(
        valued=_L({"-f", "--file", "-C", "--coverdir", "--ignore-module", "--ignore-dir"}),
        module_flags=_L({"--module"}),
        operands="script",
    ),
    "doctest": _Module(valued=_L({"-o", "--option"}), operands="files"),
    "pickle": _Module(operands="files", reads_input="no-operands"),
    "code": _Module(reads_input="always"),
    "asyncio": _Module(reads_input="always"),
}


def python_run(words: list[Word]) -> PythonRun:
    """What a python command line (``words[0]`` is python) runs besides '-c' and its
    script operand: '-i' reads the input as statements after the script, '-m MODULE'
    (also '-mMODULE', a cluster ending in 'm') runs what :data:`_MODULES` says. Python's
    options end at the first operand; '-W'/'-X' take a value."""
    interactive = False
    k = 1
    while k < len(words):
        w = words[k]
        v = w.value
        if w.dynamic or not v.startswith("-") or v in ("-", "--"):
            break
        if v.startswith("--"):
            k += 2 if v == "--check-hash-based-pycs" else 1
            continue
        cluster = v[1:]
        for j, letter in enumerate(cluster):
            interactive = interactive or letter == "i"
            if letter == "m":
                return _module(cluster[j + 1 :], words[k + 1 :], interactive)
            if letter in "cWX":
                k += 0 if cluster[j + 1 :] or letter == "c" else 1
                break
        k += 1
    return PythonRun(reads_input=interactive)


def _module(attached: str, rest: list[Word], interactive: bool) -> PythonRun:
    """'-m MODULE ARGS': the module is ``attached`` or the first of ``rest``."""
    if not attached:
        if not rest or rest[0].dynamic:
            return PythonRun(reads_input=interactive)
        attached, rest = rest[0].value, rest[1:]
    spec = _MODULES.get(attached)
    run = PythonRun() if spec is None else _module_run(attached, spec, rest)
    files = (*module_files(attached), *run.files)
    return run._replace(files=files, reads_input=run.reads_input or interactive)


def module_files(module: str) -> tuple[Word, ...]:
    """The files python runs for 'python3 -m MODULE' when the working directory holds
    them: 'MODULE.py' (its last component's), or a package's '__main__.py'. Base names:
    a file the same command writes under either name is then a script it runs."""
    return (Word(module.rsplit(".", 1)[-1] + ".py"), Word("__main__.py"))


def _module_run(name: str, spec: _Module, args: list[Word]) -> PythonRun:
    """What module ``name`` run with ``args`` runs (:class:`_Module`). Options are read as
    getopt, optparse and argparse read them: clusters, a value attached or the next word,
    long options by any unique prefix."""
    code: str | None = None
    module_named = False
    operands: list[Word] = []
    longs = [o for o in spec.valued | spec.module_flags if o.startswith("--")]
    k = 0
    while k < len(args):
        w = args[k]
        v = w.value
        k += 1
        if v == "--":
            operands += args[k:]
            break
        if w.dynamic or not v.startswith("-") or v == "-":
            operands.append(w)
            if spec.operands in ("script", "code"):
                operands += args[k:]  # the script's own arguments; timeit's statements
                break
            continue
        opt, attached = _option(v, longs, name, spec.valued | spec.code)
        if opt in spec.code:
            code = f"python -m {name} {opt} runs code given as an argument"
        module_named = module_named or opt in spec.module_flags
        if opt in spec.valued and attached is None:
            k += 1  # its value is the next word
    if spec.operands == "code" and operands:
        code = code or f"python -m {name} runs its operands as code"
    files: list[Word] = []
    if spec.operands == "script" and operands and module_named:
        files += module_files(operands[0].value) if not operands[0].dynamic else ()
    elif spec.operands == "script" and operands:
        files.append(operands[0])
    elif spec.operands == "files":
        files += operands
    files += [Word(f) for f in spec.extra_files]
    reads = spec.reads_input == "always" or (spec.reads_input == "no-operands" and not operands)
    return PythonRun(code, tuple(files), reads)


def _option(
    value: str, longs: list[str], name: str, valued: frozenset[str]
) -> tuple[str, str | None]:
    """(option, attached value) of an option word: '--name[=V]' by any prefix of a known
    long option, or in a cluster of flags the first letter that takes a value, with the
    rest of the word as that value ('-sCODE', '-vs CODE': '-s'); else the last letter."""
    if value.startswith("--"):
        opt = long_option(value, longs, name) or value.split("=", 1)[0]
        return opt, value.split("=", 1)[1] if "=" in value else None
    for j, letter in enumerate(value[1:], 2):
        if f"-{letter}" in valued:
            return f"-{letter}", value[j:] or None
    return f"-{value[-1]}", None
