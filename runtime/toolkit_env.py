"""Environment variables a tool may set: names that are valid and do not hijack a program.

Shared by ``set_env`` (the session environment) and ``shell_exec`` (its ``env`` argument).
The sandbox is the wall; refusing loader and shell start-up hooks is defence in depth
against a prompt-injected agent that tries ``LD_PRELOAD=/workspace/x.so`` or ``BASH_ENV``.
"""

from __future__ import annotations

import re

from runtime.errors import ToolFailed

__all__ = ["DEFAULT_PATH", "ENV_KEY_RE", "check_env_key", "check_env_value"]

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

#: Variables that make a program load or run code it was not asked to run.
_REFUSED = frozenset(
    {
        "BASH_ENV",  # sourced by every non-interactive bash
        "ENV",  # sourced by interactive sh
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",  # expanded (command substitution) under `set -x`
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


def check_env_value(key: str, value: str) -> str:
    if "\0" in value:
        raise ToolFailed(f"the value of {key!r} contains a NUL byte", reason="bad_value", key=key)
    return value
