"""The text an approval asks the user with: the call as it will run, never a cut view of it.

Why: the prompt showed ``json.dumps(arguments)[:2000]``, keys in the caller's order, so a
``write_file`` whose 2,100-character ``content`` came first and ``path`` last was approved
by a user who never saw the path (and a ``shell_exec`` with a long benign prefix hid its
end). Now:

* the arguments that decide what the call touches (the tool's ``arg_roles``: paths, the
  command, its working directory, a url) come first, each whole;
* every other argument follows, each by its name: the short ones (a value of at most
  :data:`SHORT_VALUE` characters: ``"method": "DELETE"``, ``"overwrite": true``) whole and
  first, then the long ones, each cut on its own bound with its own marker (``… [N more
  characters not shown]``). One shared bound in the caller's order let a long ``body``
  push a behaviour-switching ``method`` out of the prompt;
* the arguments' digest (sha256 of their canonical JSON, the audit log's
  ``arguments_digest``) names the exact call, and the policy's reason is said again last,
  right above the question;
* characters that display as nothing or reorder text (bidi controls such as U+202E, zero
  widths, other format and control characters, line separators, default-ignorable and
  blank-rendering letters: :func:`runtime._jsontext.terminal_char`) are shown as
  ``\\uXXXX`` escapes, so the text read is the text run; a run of more than
  :data:`MAX_SPACES` spaces is shown as one marker (``⟨7600 spaces⟩``), so a long blank
  cannot push a command's head off the screen (a literal ``⟨`` is shown escaped);
* when the deciding arguments alone do not fit :data:`MAX_DECIDING`, there is no prompt
  (:func:`approval_text` returns None) and the call is refused: a user must not approve
  what they were not shown.

Hazard: every argument is the caller's (an LLM's, possibly an injected one).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from runtime._jsontext import terminal_char

__all__ = [
    "MAX_DECIDING",
    "MAX_REST",
    "MAX_SPACES",
    "SHORT_VALUE",
    "approval_text",
    "arguments_digest",
    "shown",
    "visible_lines",
]

#: Characters of the deciding arguments (their JSON, escaped) a prompt shows at most; past
#: it the call is refused rather than asked about. Room for the longest path a built-in
#: tool takes (4,096 characters) and then some; a longer command is refused.
MAX_DECIDING = 8000
#: Characters of the long other arguments shown at most, shared out among them (each gets
#: at least :data:`MIN_LONG`); the rest of each is said to be left out.
MAX_REST = 2000
#: Characters a long argument is shown at least, however many there are.
MIN_LONG = 160
#: An argument whose value is at most this many characters (as shown) is shown whole.
SHORT_VALUE = 80
#: Characters of an argument's name shown at most (built-in tools' names are short).
MAX_NAME = 120
#: A run of more spaces than this is shown as one marker saying how many.
MAX_SPACES = 8


def _units(value: Any) -> list[str]:
    """``value`` as JSON text, one visible unit per character (an escaped one is one unit,
    so a cut never splits it): non-ASCII text stays readable; characters that hide or
    reorder text are escaped (``json.dumps`` already escapes quotes, backslashes and ASCII
    controls, so an escape is never ambiguous); a run of more than :data:`MAX_SPACES`
    spaces is one unit, ``⟨N spaces⟩`` (the marker's bracket, written in the text, is shown
    escaped)."""
    out: list[str] = []
    spaces = 0
    for ch in json.dumps(value, ensure_ascii=False):
        if ch == " ":
            spaces += 1
            continue
        if spaces:
            out.extend([" "] * spaces if spaces <= MAX_SPACES else [f"⟨{spaces} spaces⟩"])
            spaces = 0
        out.append("\\u27e8" if ch == "⟨" else terminal_char(ch))
    if spaces:
        out.extend([" "] * spaces if spaces <= MAX_SPACES else [f"⟨{spaces} spaces⟩"])
    return out


def _cut(units: list[str], limit: int) -> str:
    """``units`` joined, or as many as fit ``limit`` characters and a marker saying how many
    characters are left out."""
    used = 0
    for index, unit in enumerate(units):
        if used + len(unit) > limit:
            rest = sum(map(len, units[index:]))
            return "".join(units[:index]) + f" … [{rest} more characters not shown]"
        used += len(unit)
    return "".join(units)


def shown(value: Any) -> str:
    """``value`` as JSON text whose every character is visible (see :func:`_units`)."""
    return "".join(_units(value))


def visible_lines(text: str, limit: int) -> str:
    """``text`` (not JSON: a question to show as it reads) with every character that hides,
    moves or reorders text shown as a ``\\uXXXX`` escape: ESC (and so every terminal escape
    sequence: cursor moves, line erases, OSC 52 clipboard writes), the other C0 and C1
    controls, DEL, carriage returns, bidi controls, zero widths. Line feeds are kept (a
    question may have lines), and a backslash is doubled (an escape shown is never one the
    text spelled). Past ``limit`` characters it is cut, and says so:
    ``… [N more characters not shown]``."""
    out: list[str] = []
    used = 0
    for index, ch in enumerate(text):
        unit = "\n" if ch == "\n" else "\\\\" if ch == "\\" else terminal_char(ch)
        if used + len(unit) > limit:
            rest = len(text) - index
            out.append(f" … [{rest} more characters not shown]")
            break
        used += len(unit)
        out.append(unit)
    return "".join(out)


def arguments_digest(arguments: Any) -> str:
    """sha256 of the arguments' canonical JSON (RFC 8785), as the audit log records it."""
    from runtime.audit._canonical import canonical_json_ijson

    try:
        data = canonical_json_ijson(arguments)
    except (ValueError, RecursionError):
        data = json.dumps(arguments, sort_keys=True, ensure_ascii=False).encode(
            "utf-8", "surrogatepass"
        )
    return hashlib.sha256(data).hexdigest()


def approval_text(
    tool: str, reasons: str, arguments: Mapping[str, Any], roles: Mapping[str, str]
) -> str | None:
    """The approval prompt for ``tool`` called with ``arguments``, or None when the
    arguments that decide (``roles``: the tool's arg_roles) are too long to show whole."""
    deciding = [(name, arguments[name]) for name in roles if name in arguments]
    lines = [f"The policy asks before running {tool} ({reasons})."]
    used = 0
    for name, value in deciding:
        text = f"{shown(name)}: {shown(value)}"
        used += len(text)
        if used > MAX_DECIDING:
            return None
        lines.append(f"{text}  [{roles[name]}]")
    short: list[str] = []
    long: list[tuple[str, list[str]]] = []
    for name, value in arguments.items():
        if name in roles:
            continue
        label = _cut(_units(name), MAX_NAME)
        units = _units(value)
        if sum(map(len, units)) <= SHORT_VALUE:
            short.append(f"{label}: {''.join(units)}")
        else:
            long.append((label, units))
    lines.extend(short)
    each = max(MIN_LONG, MAX_REST // len(long)) if long else 0
    lines.extend(f"{label}: {_cut(units, each)}" for label, units in long)
    lines.append(f"Arguments sha256: {arguments_digest(dict(arguments))}")
    lines.append(f"Asked because: {reasons}")
    return "\n".join(lines)
