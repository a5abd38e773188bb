"""Environment variables a tool may set: names that are valid and do not hijack a program.

Shared by ``set_env`` (the session environment) and ``shell_exec`` (its ``env`` argument).
The sandbox is the wall; refusing loader and shell start-up hooks is defence in depth
against a prompt-injected agent that tries ``LD_PRELOAD=/workspace/x.so`` or ``BASH_ENV``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from runtime.errors import InvalidArguments, ResourceLimitExceeded, ToolFailed

__all__ = [
    "DEFAULT_PATH",
    "ENV_KEY_RE",
    "OPTION_HOOK_ENV",
    "SESSION_ENV_MAX_BYTES",
    "SESSION_ENV_MAX_VARS",
    "check_env_arguments",
    "check_env_key",
    "check_env_size",
    "check_env_value",
    "env_bytes",
]

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

#: Most variables a session's environment holds (``set_env``).
SESSION_ENV_MAX_VARS = 256
#: Most bytes a session's environment holds, counted as the environment block a program
#: gets (``NAME=VALUE`` and a NUL each, UTF-8). Why a bound: every sandboxed call carries
#: the environment to the fork-server in one control packet, which the kernel caps at the
#: socket's send buffer (``net.core.wmem_default``, ~208 KiB on Linux); 128 KiB of one
#: variable made every later call of the broker fail. 64 KiB is 16 times the usual session.
SESSION_ENV_MAX_BYTES = 64 * 1024

#: Variables whose value is a program's options, or where it reads data it trusts, and can
#: make an ordinary run of it run a command: ``TAR_OPTIONS='--checkpoint-action=exec=CMD'``
#: then ``tar cf``, ``ZIPOPT='-TT CMD'`` then ``zip``, ``MAKEFLAGS=--eval=$(shell CMD)``,
#: ``GOFLAGS=-toolexec=CMD``, ``RUSTFLAGS=-Clinker=CMD``, java's option variables (an
#: ``-agentpath``), glibc's locale and host-alias files, ncurses' terminfo, the XDG data
#: directories (desktop files name commands), perl's module-build options, the directories
#: gcc finds its subprograms in (``COMPILER_PATH``, ``GCC_EXEC_PREFIX``: a planted ``./x/as``
#: runs, as with ``-B ./x``) and clang's edits of its own command line
#: (``CCC_OVERRIDE_OPTIONS='+-fplugin=./p.so'``). The command
#: rules ask when a command sets one (``commands.deny.loader-env``), the default ``[env]
#: deny`` refuses them for a session (tests keep the lists in step), the tools refuse them.
#: Their value is not read for what it runs (each program splits its own way): the name is
#: the hazard.
#: Not listed: ``GREP_OPTIONS`` (grep ignores it since 3.6, and no grep option runs code);
#: the prompt strings ``PS0``-``PS3`` an interactive bash expands (``PS1='$(CMD)'``): a
#: script sets PS1 as a plain variable, and the command rules read the substitutions of any
#: stored value already, so only the session list and the tools refuse them.
OPTION_HOOK_ENV = frozenset(
    {
        "TAR_OPTIONS",
        "ZIPOPT",
        "ZIP",
        "UNZIP",
        "UNZIPOPT",
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "GOFLAGS",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_RUSTC",
        "CARGO_BUILD_RUSTC_WRAPPER",
        "CARGO_HOME",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "LOCPATH",
        "HOSTALIASES",
        "TERMINFO",
        "TERMINFO_DIRS",
        "XDG_DATA_DIRS",
        "XDG_DATA_HOME",
        "PYTHONEXECUTABLE",
        "PERL_MB_OPT",
        "PERL_MM_OPT",
        "COMPILER_PATH",
        "GCC_EXEC_PREFIX",
        "CCC_OVERRIDE_OPTIONS",
    }
)

#: Variables that make a program load or run code it was not asked to run.
_REFUSED = OPTION_HOOK_ENV | frozenset(
    {
        "BASH_ENV",  # sourced by every non-interactive bash
        "ENV",  # sourced by interactive sh
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",  # expanded (command substitution) under `set -x`
        # Expanded by an interactive bash (PS0 after a command is read, PS1-PS3 prompts).
        "PS0",
        "PS1",
        "PS2",
        "PS3",
        "PROMPT_COMMAND",
        "IFS",  # word splitting of every later script
        "GCONV_PATH",  # glibc loads iconv modules from here
        "PERL5OPT",
        "NODE_OPTIONS",
        "PYTHONSTARTUP",
        "PYTHONINSPECT",
    }
)
_REFUSED_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_", "MALLOC_", "GLIBC_TUNABLES")


def check_env_key(key: str) -> str:
    """Return ``key`` or raise ToolFailed naming why it cannot be set."""
    if not ENV_KEY_RE.match(key):
        raise ToolFailed(
            f"{key!r} is not a valid variable name (letters, digits, '_', not starting "
            "with a digit)",
            reason="bad_key",
            key=key,
        )
    if key in _REFUSED or key.upper().startswith(_REFUSED_PREFIXES):
        raise ToolFailed(
            f"{key!r} changes how programs load or start and cannot be set by a tool",
            reason="refused_key",
            key=key,
        )
    return key


def check_env_value(key: str, value: str, *, path: str) -> str:
    """``value`` when an environment can carry it; InvalidArguments naming ``key`` (and
    ``path``, the JSON path of the argument) when it holds a NUL byte, which ends a string
    in the block the kernel hands a program: the arguments are wrong, nothing else."""
    if "\0" in value:
        raise InvalidArguments(
            f"the value of the environment variable {key!r} contains a NUL byte, which an "
            "environment cannot carry",
            reason="bad_value",
            key=key,
            path=path,
        )
    return value


def check_env_arguments(arg_roles: Mapping[str, str], arguments: Mapping[str, Any]) -> None:
    """Raise InvalidArguments for a variable a call would set whose value holds a NUL byte:
    an ``env`` argument (an object of NAME: VALUE, shell_exec's) or a ``session_env`` one
    (the name; its value is the argument ``value``, set_env's). The broker checks this before
    the policy, which reads the assignment as a command and asked for approval of a "NUL byte
    in command" the caller never wrote."""
    for arg, role in arg_roles.items():
        value = arguments.get(arg)
        pairs: Iterable[tuple[Any, Any]]
        if role == "env" and isinstance(value, Mapping):
            pairs = ((name, (text, f"$.{arg}.{name}")) for name, text in value.items())
        elif role == "session_env" and isinstance(value, str):
            pairs = [(value, (arguments.get("value"), "$.value"))]
        else:
            continue
        for name, (text, path) in pairs:
            if isinstance(text, str):
                check_env_value(str(name), text, path=path)


def env_bytes(env: Mapping[str, str]) -> int:
    """The size of ``env`` as an environment block: ``NAME=VALUE`` and a NUL each, UTF-8
    (a lone surrogate counted as its 3 bytes: it cannot be carried anyway)."""
    return sum(
        len(name.encode("utf-8", "surrogatepass")) + len(value.encode("utf-8", "surrogatepass"))
        for name, value in env.items()
    ) + 2 * len(env)


def check_env_size(env: Mapping[str, str], what: str = "the session's environment") -> None:
    """ResourceLimitExceeded when ``env`` holds more than :data:`SESSION_ENV_MAX_VARS`
    variables or :data:`SESSION_ENV_MAX_BYTES` bytes (:func:`env_bytes`)."""
    if len(env) > SESSION_ENV_MAX_VARS:
        raise ResourceLimitExceeded(
            f"{what} would hold {len(env)} variables, more than the {SESSION_ENV_MAX_VARS} "
            "allowed; remove some with set_env(key, null)",
            reason="env_too_large",
            limit="env_vars",
            variables=len(env),
            max_variables=SESSION_ENV_MAX_VARS,
        )
    size = env_bytes(env)
    if size > SESSION_ENV_MAX_BYTES:
        raise ResourceLimitExceeded(
            f"{what} would be {size} bytes (NAME=VALUE, UTF-8), more than the "
            f"{SESSION_ENV_MAX_BYTES} allowed; remove or shorten variables with set_env, or "
            "write large values to a file in the workspace",
            reason="env_too_large",
            limit="env_bytes",
            bytes=size,
            max_bytes=SESSION_ENV_MAX_BYTES,
        )
