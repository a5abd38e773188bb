"""Command-template tools: a manifest declares an argv list, never a shell string.

    "command": ["grep", "-n", "--", "{pattern}", "{path}"]

Each item may hold ``{name}`` placeholders filled from the *validated* arguments. Rules:

* an item that is exactly ``{name}`` becomes one argv item (or several, when the argument is
  a list of strings/numbers); an absent optional argument drops the item;
* a placeholder inside a longer item (``--lines={n}``) is replaced textually and must be given;
* an argv item that starts with ``-`` because of an argument value (the whole item, or a
  value at the start of a longer item: ``{name}.txt`` with ``--output=x``) is refused
  unless an earlier template item is ``--`` (option injection: ``{pattern}`` = ``--help``);
  a ``-`` the template itself writes (``--lines={n}``) is the manifest author's option;
* values must be strings, numbers or booleans (``true``/``false``); NUL is refused;
* the program runs with the same bounds as ``shell_exec`` (``runtime.toolkit_proc``), in the
  workspace, with the policy's environment, inside the sandbox (the tool's manifest must
  declare ``sandbox.exec``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from runtime.errors import ManifestError, ToolFailed
from runtime.toolkit import ToolContext
from runtime.toolkit_env import DEFAULT_PATH
from runtime.toolkit_proc import kill_grace, run_capped, within_call

__all__ = ["ENTRY", "check_template", "fill_template", "run_template"]

#: The entry point the catalogue gives a command-template tool.
ENTRY = "runtime.command_tool:run_template"

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def check_template(template: Sequence[str], parameters: dict[str, Any], where: str) -> None:
    """At load time: a non-empty argv whose placeholders all name parameters."""
    if not template or not all(isinstance(t, str) for t in template):
        raise ManifestError(f"{where}: 'command' must be a non-empty list of strings")
    if _PLACEHOLDER.search(template[0]):
        raise ManifestError(f"{where}: the program (command[0]) cannot be a placeholder")
    props = parameters.get("properties", {})
    for item in template:
        for name in _PLACEHOLDER.findall(item):
            if name not in props:
                raise ManifestError(
                    f"{where}: command placeholder {{{name}}} is not a parameter",
                    field="command",
                )


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        text = str(value)
        if "\0" in text:
            raise ToolFailed(f"argument {name!r} contains a NUL byte", reason="bad_argument")
        return text
    raise ToolFailed(
        f"argument {name!r} must be a string, number or boolean to fill a command",
        reason="bad_argument",
    )


def fill_template(template: Sequence[str], args: dict[str, Any]) -> list[str]:
    argv: list[str] = [template[0]]
    after_dashdash = False
    for item in template[1:]:
        whole = _PLACEHOLDER.fullmatch(item)
        if whole:
            name = whole.group(1)
            if args.get(name) is None:
                continue
            value = args[name]
            values = value if isinstance(value, list) else [value]
            for v in values:
                text = _text(name, v)
                if text.startswith("-") and not after_dashdash:
                    raise ToolFailed(
                        f"argument {name!r} may not start with '-' here (it would be read as "
                        "an option)",
                        reason="option_injection",
                    )
                argv.append(text)
            continue
        missing = [n for n in _PLACEHOLDER.findall(item) if args.get(n) is None]
        if missing:
            raise ToolFailed(f"argument {missing[0]!r} is required by the command template")
        filled = _PLACEHOLDER.sub(lambda m: _text(m.group(1), args[m.group(1)]), item)
        if filled.startswith("-") and not item.startswith("-") and not after_dashdash:
            # The '-' is a value's, at the start of the item: ``{name}.txt`` with
            # ``--output=keep`` is ``sort --output=keep.txt``, an option all the same.
            name = _PLACEHOLDER.match(item)
            raise ToolFailed(
                f"argument {name.group(1) if name else '?'!r} may not start with '-' here "
                "(it would make the item an option)",
                reason="option_injection",
            )
        argv.append(filled)
        if item == "--":
            after_dashdash = True
    return argv


def run_template(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    template = ctx.options.get("command")
    if not isinstance(template, list) or not template:
        raise ToolFailed("this tool has no command template", reason="no_template")
    env = dict(ctx.env)
    env.setdefault("PATH", DEFAULT_PATH)
    preexec = ctx.options.get("preexec")
    limit = ctx.limits.timeout_s
    own = within_call(limit, limit)
    return run_capped(
        fill_template(template, args),
        cwd=str(ctx.workspace),
        env=env,
        timeout=own,
        grace=kill_grace(own, limit),
        cap=ctx.limits.output_bytes,
        preexec=preexec if callable(preexec) else None,
    ).as_result()
