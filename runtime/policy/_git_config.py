"""Which git configuration keys run code or change what runs, for ``git -c KEY=VALUE``,
``git --config-env=KEY=ENVVAR`` and ``git config KEY VALUE``.

git reads its configuration keys case-insensitively in the section and the name (the
subsection, between them, is case-sensitive); keys are lowered here and the patterns are
lower case, which matches every spelling. Two kinds of dangerous key:

- command keys (:data:`runtime.policy.wrappers.GIT_COMMAND_KEYS`): git runs the value
  through the shell (``core.pager``, ``alias.x = !cmd``); the walker reads the value as
  shell, so its commands meet the rules;
- code keys (:data:`GIT_CODE_KEYS`): the value points git at code or a program it runs
  later (a hooks directory, an included config file, a protocol or URL rewrite that makes
  ``ext::sh -c CMD`` reachable, a remote helper), or turns off a protection against a
  crafted repository: an interpreter hazard (ask).

Every other key (``user.name``, ``color.ui``, ``core.quotepath``, ``init.defaultBranch``)
changes what git prints or records, not what runs: no hazard. Pure functions on
:class:`Word` lists; what an attacker controls is every word.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from runtime.policy.argv import Word
from runtime.policy.wrappers import GIT_COMMAND_KEYS

__all__ = ["GIT_CODE_KEYS", "KeyKind", "classify_key", "global_config"]

KeyKind = Literal["command", "code"]

#: Keys (lower case, fnmatch) whose value makes git run code, choose a program it runs, or
#: drop a guard against crafted repositories. Not read as shell: an ask.
GIT_CODE_KEYS = (
    "core.hookspath",
    "core.worktree",
    "core.attributesfile",  # attributes choose filter/diff/merge drivers
    "core.alternaterefscommand",
    "core.protect*",  # core.protectHFS/NTFS guard .git against crafted trees
    "init.templatedir",  # templates carry hooks
    "include.*",
    "includeif.*",
    "hook.*",  # config-based hooks (hook.NAME.command)
    "protocol.*",  # protocol.ext.allow=always: 'ext::sh -c CMD' URLs run commands
    "url.*",  # url.X.insteadOf rewrites any URL (to ext::...)
    "remote.*.uploadpack",
    "remote.*.receivepack",
    "remote.*.vcs",  # runs git-remote-VCS
    "submodule.*.update",  # '!cmd' runs a shell command
    "diff.*.*",  # diff drivers: textconv, command
    "diff.tool",
    "diff.guitool",
    "difftool.*",
    "merge.*.*",  # merge drivers
    "merge.tool",
    "merge.guitool",
    "mergetool.*",
    "filter.*",
    "credential.*",
    "gpg.*",
    "sendemail.*",  # smtpServer may be a program; toCmd, ccCmd
    "imap.tunnel",
    "interactive.difffilter",
    "tar.*.command",
    "uploadpack.*",
    "instaweb.*",
    "guitool.*",
    "help.browser",
    "svn.authorsprog",
    "svn-remote.*",
    "lfs.customtransfer.*",
    "trace2.*",  # writes trace output to any path or socket
    "safe.*",  # safe.directory=*: repositories of other owners (and their config) are read
    "ssh.variant",
)


def classify_key(key: str) -> KeyKind | None:
    """'command', 'code', or None for a key that changes no code git runs."""
    low = key.lower()
    if any(fnmatchcase(low, g) for g in GIT_COMMAND_KEYS):
        return "command"
    if any(fnmatchcase(low, g) for g in GIT_CODE_KEYS):
        return "code"
    return None


# git's global options that take a separate value (git.c handle_options).
_GLOBAL_VALUED = frozenset(
    {"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--attr-source"}
)


def global_config(words: list[Word]) -> list[tuple[Word, Word | None]]:
    """(key, value) of each ``-c KEY[=VALUE]`` and ``--config-env[=]KEY=ENVVAR`` before the
    subcommand of ``git ...`` (``words[0]`` is git). A value taken from the environment
    (``--config-env``) is only known at run time; a key that is itself only known at run
    time is a dynamic Word (the caller asks). None: a boolean key with no value."""
    out: list[tuple[Word, Word | None]] = []
    i = 1
    while i < len(words):
        w = words[i]
        v = w.value
        if not v.startswith("-") and not w.dynamic:
            break  # the subcommand
        setting: Word | None = None
        from_env = False
        if v in ("-c", "--config-env"):
            if i + 1 >= len(words):
                break
            setting = words[i + 1]
            from_env = v == "--config-env"
            i += 2
        elif v.startswith("--config-env="):
            setting, from_env = w.tail(v.index("=") + 1), True
            i += 1
        elif v.startswith("-c") and not v.startswith("--"):
            setting = Word(v[2:], w.dynamic)  # read '-cKEY=VALUE' too: more, never less
            i += 1
        elif w.dynamic:
            out.append((Word(v, dynamic=True), None))  # may be '-c KEY=VALUE' at run time
            i += 1
            continue
        else:
            i += 2 if v in _GLOBAL_VALUED else 1
            continue
        key, eq, value = setting.value.partition("=")
        if setting.dynamic and "=" not in setting.value:
            out.append((Word(key, dynamic=True), None))
            continue
        val: Word | None = Word(value, setting.dynamic or from_env) if eq else None
        out.append((Word(key, setting.dynamic and any(c in key for c in "$`{")), val))
    return out
