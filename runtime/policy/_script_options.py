"""Options by which editors, pagers and perl run a file as code at start-up.

``vim -S s.vim f`` sources ``s.vim`` (vim script: ``call system(...)``, ``!cmd``), ``less
--lesskey-src=k f`` reads a lesskey source whose ``#env`` section can set ``LESSOPEN`` (a
shell command less runs on every file), ``perl -d x.pl`` reads the debugger's ``.perldb``
from the working directory. Each names a file; the walker marks it as a script the command
runs (:meth:`runtime.policy._shell_state.WalkerState.note_run`), so one the same command
writes is asked about, as ``python3 a.py`` of a written ``a.py`` is. Pure functions on
:class:`Word` lists; what an attacker controls is every word.
"""

from __future__ import annotations

from runtime.policy._long_options import long_option
from runtime.policy.argv import Word, short_cluster

__all__ = ["VIM_NAMES", "lesskey_sources", "perl_debugger_files", "vim_scripts"]

#: The vi family (as in :data:`runtime.policy.wrappers.HAZARD_ARGS`).
VIM_NAMES = frozenset(
    {"vim", "vi", "nvim", "ex", "view", "vimdiff", "rvim", "rview", "gvim", "evim", "nex"}
)
# vim's option letters that take the next word as their value (vim refuses an attached
# one): a letter among them ends the cluster.
_VIM_VALUED = "cSTuUiswWtq"
_EX_NAMES = frozenset({"ex", "nex"})


def vim_scripts(name: str, words: list[Word]) -> list[Word]:
    """The files vim runs as vim script or keystrokes: '-S FILE' (a bare '-S', or one
    followed by another option, is 'Session.vim'), '-u VIMRC', '-U GVIMRC', '-s SCRIPTIN'
    (typed as keys, ':!cmd' included; in ex mode '-s' is silent instead) and nvim's '-l
    SCRIPT' (a Lua script, the rest its arguments). vim reads options among its files up
    to '--'."""
    out: list[Word] = []
    ex_mode = name in _EX_NAMES
    k = 1
    while k < len(words):
        v = words[k].value
        if v == "--":
            break
        cluster = short_cluster(v) if not v.startswith("--") else None
        following = words[k + 1] if k + 1 < len(words) else None
        for j, letter in enumerate(cluster or ""):
            if letter in "eE":
                ex_mode = True
            if letter == "l" and name == "nvim":
                return out + ([following] if following is not None else [])
            if letter == "s" and ex_mode:
                continue
            if letter not in _VIM_VALUED or j + 1 < len(cluster or ""):
                continue
            if letter == "S" and (following is None or following.value.startswith("-")):
                out.append(Word("Session.vim"))
                break
            if letter in "SuUs" and following is not None:
                out.append(following)
            k += 1  # the value
            break
        k += 1
    return out


# less's option letters that take a value, attached or the next word.
_LESS_VALUED = "bhjkoOpPtTxyzD#"
_LESS_FILES = ("--lesskey-file", "--lesskey-src")


def lesskey_sources(words: list[Word]) -> tuple[list[Word], list[Word]]:
    """(files, texts) less reads key bindings and variables from: '-k FILE', '-kFILE',
    '--lesskey-file[=]FILE', '--lesskey-src[=]FILE' (any prefix) and the text of
    '--lesskey-content=TEXT'. A lesskey source's '#env' section sets LESSOPEN, which less
    runs through the shell for every file it opens."""
    files: list[Word] = []
    texts: list[Word] = []
    for k, w in enumerate(words[1:], 1):
        v = w.value
        if v == "--":
            break
        following = words[k + 1] if k + 1 < len(words) else None
        opt = long_option(v, (*_LESS_FILES, "--lesskey-content"), "less")
        if opt is not None:
            value = w.tail(v.index("=") + 1) if "=" in v else following
            if value is not None:
                (texts if opt == "--lesskey-content" else files).append(value)
            continue
        cluster = short_cluster(v) if not v.startswith("--") else None
        for j, letter in enumerate(cluster or ""):
            if letter not in _LESS_VALUED:
                continue
            value = w.tail(j + 2) if (cluster or "")[j + 1 :] else following
            if letter == "k" and value is not None:
                files.append(value)
            break
    return files, texts


def perl_debugger_files(words: list[Word]) -> list[str]:
    """'.perldb' when perl runs under its debugger ('-d', '-d:Mod' loads Devel::Mod, a
    module by name, as '-M' does): perl5db.pl reads it from the working directory and
    runs it as perl code before the program."""
    for w in words[1:]:
        v = w.value
        if not v.startswith("-") or v in ("-", "--"):
            break
        cluster = short_cluster(v)
        if cluster is None:
            continue
        for letter in cluster:
            if letter == "d":
                return [".perldb"]
            if letter in "eEIMmxilC0DF":
                break  # the rest of the cluster is this option's value
    return []
