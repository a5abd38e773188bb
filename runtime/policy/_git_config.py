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

from runtime.policy._long_options import long_option
from runtime.policy.argv import Word, short_cluster
from runtime.policy.wrappers import GIT_COMMAND_KEYS

__all__ = [
    "GIT_CODE_KEYS",
    "KeyKind",
    "classify_key",
    "code_options",
    "global_config",
    "subcommand_config",
]

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
    "browser.*.path",  # the program 'git help --web' / instaweb runs for that browser
    "man.*.path",  # the program 'git help --man' runs for that viewer
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
        out.append(_split_setting(setting, from_env))
    return out


def _split_setting(setting: Word, from_env: bool = False) -> tuple[Word, Word | None]:
    """(key, value) of a 'KEY=VALUE' word; a key only known at run time is a dynamic Word,
    a value from the environment (``from_env``) or the run time is one too."""
    key, eq, value = setting.value.partition("=")
    if setting.dynamic and not eq:
        return Word(key, dynamic=True), None
    val = Word(value, setting.dynamic or from_env) if eq else None
    return Word(key, setting.dynamic and any(c in key for c in "$`{")), val


def _subcommand(words: list[Word]) -> int | None:
    """The index of git's subcommand: the first word after its global options."""
    i = 1
    while i < len(words):
        w = words[i]
        if not w.value.startswith("-") and not w.dynamic:
            return i
        i += 2 if w.value in _GLOBAL_VALUED or w.value in ("-c", "--config-env") else 1
    return None


def _subcommand_words(words: list[Word], names: frozenset[str]) -> list[Word]:
    """The words after git's subcommand up to '--' when it is one of ``names``, else []."""
    sub = _subcommand(words)
    if sub is None or words[sub].value not in names:
        return []
    rest = words[sub + 1 :]
    cut = next((k for k, w in enumerate(rest) if w.value == "--" and not w.dynamic), len(rest))
    return rest[:cut]


# clone's short options that take a value: in a cluster the first takes the rest of it.
_CLONE_SHORT_VALUED = "obcuj"


def subcommand_config(words: list[Word]) -> list[tuple[Word, Word | None]]:
    """(key, value) of each 'git clone -c KEY=VALUE' ('--config', any prefix, '-cKV', a
    cluster ending in 'c'): clone writes them into the new repository's configuration
    before it checks out, so they steer that checkout and every later git command there
    ('core.hooksPath', 'core.fsmonitor'), as 'git -c' does for one command."""
    out: list[tuple[Word, Word | None]] = []
    rest = _subcommand_words(words, frozenset({"clone"}))
    for k, w in enumerate(rest):
        v = w.value
        following = rest[k + 1] if k + 1 < len(rest) else None
        setting: Word | None = None
        if long_option(v, ("--config",), "git") is not None:
            setting = w.tail(v.index("=") + 1) if "=" in v else following
        elif (cluster := short_cluster(v)) is not None:
            for j, letter in enumerate(cluster):
                if letter == "c":
                    setting = w.tail(j + 2) if cluster[j + 1 :] else following
                if letter in _CLONE_SHORT_VALUED:
                    break
        if setting is not None:
            out.append(_split_setting(setting))
    return out


def _option_values(rest: list[Word], name: str) -> list[Word]:
    """The values of the long option ``name`` (any prefix, '=VALUE' or the next word)."""
    out: list[Word] = []
    for k, w in enumerate(rest):
        if long_option(w.value, (name,), "git") is None:
            continue
        if "=" in w.value:
            out.append(w.tail(w.value.index("=") + 1))
        elif k + 1 < len(rest):
            out.append(rest[k + 1])
    return out


def code_options(words: list[Word]) -> list[str]:
    """Options of a git subcommand that point git at code it runs, as :data:`GIT_CODE_KEYS`
    do for keys: 'clone/init --template=DIR' copies DIR's hooks into the new repository
    (its post-checkout hook runs at once, as 'git -c init.templateDir=DIR clone' does);
    'send-email --smtp-server=/PATH' runs PATH as a sendmail program. An empty template
    ('--template=') copies none."""
    out: list[str] = []
    for value in _option_values(
        _subcommand_words(words, frozenset({"clone", "init", "init-db"})), "--template"
    ):
        if value.value or value.dynamic:
            out.append(f"--template={value.value}")
    for value in _option_values(
        _subcommand_words(words, frozenset({"send-email"})), "--smtp-server"
    ):
        if value.value.startswith("/") or (value.dynamic and not value.prefix[:1].isalnum()):
            out.append(f"--smtp-server={value.value}")
    return out
