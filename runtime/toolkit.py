"""What a tool implementation sees: the small API that code in ``tools/impl`` is written against.

A Python tool is a function ``def tool(args: dict, ctx: ToolContext) -> dict``. It runs inside
the sandbox child (subprocess backend) or in the broker (host backend, never untrusted code).
``args`` are already schema-validated. To fail, raise :class:`ToolFailed` with a clear message;
any other exception is reported as ``tool_error`` with its type and message.

Paths: ``ctx.workspace`` is where the workspace is visible to the tool (``/workspace`` inside
the sandbox; a plain directory in unit tests). The kernel is the wall (mounts, Landlock);
helpers in ``runtime.toolkit_fs`` add defence in depth and clear errors.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.errors import ToolFailed

if TYPE_CHECKING:
    # Not imported at run time: the sandbox's fork-server imports this module, and every
    # copy of it pays for pydantic's heap on fork and exit (see benchmarks/SANDBOX.md).
    from runtime.models import Limits, ToolSpec

__all__ = [
    "PREVIEW_CHARS",
    "BrokerRequest",
    "ToolContext",
    "ToolFailed",
    "WarmUp",
    "builtin_tools_dir",
    "guests_source_dir",
    "is_builtin",
    "json_head",
    "json_size",
    "load_entry",
    "result_json",
    "result_size",
    "too_large_message",
    "unencodable_result",
    "warm_up",
    "warm_with",
]

#: Synchronous request from a tool back to the broker: (operation, payload) -> reply.
#: Operations: "http" (egress gateway), "ask_user". Raises ToolFailed when refused.
BrokerRequest = Callable[[str, dict[str, Any]], dict[str, Any]]


#: Prepares a scratch workspace (an empty directory) and returns arguments for one run of
#: the tool there (see :func:`warm_with`).
WarmUp = Callable[[Path], dict[str, Any]]

_WARM_ATTR = "__runtime_warm_up__"

ToolFunc = Callable[[dict[str, Any], "ToolContext"], Any]


def warm_with(prepare: WarmUp) -> Callable[[ToolFunc], ToolFunc]:
    """Give a tool a warm-up: the sandbox's pre-forked spare, already behind every wall,
    runs the tool once on a scratch workspace in its private ``/tmp`` before it waits for
    its call, so that the call does not pay the first run of the tool's code in a fresh
    copy of the fork-server (copy-on-write faults, the interpreter's warm-up of each
    function: ~0.5-0.8 ms of a ``read_file`` measured). ``prepare(scratch)`` writes what
    the run needs under ``scratch`` and returns its arguments. The run's result and errors
    are dropped; nothing of it reaches a call but the warmed code. Only for tools that
    need nothing outside their workspace (no programs, no broker)."""

    def mark(func: ToolFunc) -> ToolFunc:
        setattr(func, _WARM_ATTR, prepare)
        return func

    return mark


def warm_up(func: object) -> WarmUp | None:
    """The tool's warm-up (:func:`warm_with`), if it has one."""
    prepare = getattr(func, _WARM_ATTR, None)
    return prepare if callable(prepare) else None


def _default_limits() -> Limits:
    from runtime.models import Limits

    return Limits()


@dataclass(slots=True)
class ToolContext:
    workspace: Path
    limits: Limits = field(default_factory=_default_limits)
    env: dict[str, str] = field(default_factory=dict)
    call_id: str = ""
    writable: bool = False
    session: str = "default"
    broker: BrokerRequest | None = None
    #: Policy-derived extras for the tool (e.g. blocked services list, search endpoint).
    options: dict[str, Any] = field(default_factory=dict)

    def ask_broker(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if self.broker is None:
            raise ToolFailed(f"this call has no channel to the broker for {op!r}")
        return self.broker(op, payload)


def builtin_tools_dir() -> Path:
    """The built-in catalogue: ``runtime/_builtin_tools`` in a wheel, ``<repo>/tools`` in a
    source checkout (the top-level ``tools/`` is never installed as a module of its own)."""
    pkg = Path(__file__).resolve().parent
    installed = pkg / "_builtin_tools"
    if installed.is_dir():
        return installed
    return pkg.parent / "tools"


def is_builtin(spec: ToolSpec) -> bool:
    """Whether ``spec`` is a manifest of the built-in catalogue (by where it was loaded
    from, not by its name, which a catalogue built without the built-ins could give any
    tool). Asked per call by the sandbox backend when the policy's globs are narrow: an
    absolute source is resolved once (a relative one depends on the cwd)."""
    source = spec.source
    if source is None:
        return False
    if not source.is_absolute():
        return source.resolve().is_relative_to(builtin_tools_dir())
    return _builtin_source(source)


@functools.lru_cache(maxsize=256)
def _builtin_source(source: Path) -> bool:
    return source.resolve().is_relative_to(builtin_tools_dir())


def guests_source_dir() -> Path:
    """The wasm guests' sources: ``runtime/_guests`` in a wheel, ``<repo>/guests`` in a
    source checkout."""
    pkg = Path(__file__).resolve().parent
    installed = pkg / "_guests"
    return installed if installed.is_dir() else pkg.parent / "guests"


def load_entry(entry: str, base: Path) -> Callable[[dict[str, Any], ToolContext], Any]:
    """Import ``module:function`` where ``module`` is a ``.py`` file in ``base`` (a manifest's
    folder). The folder is a package of a private name (``_runtime_tools_<digest of its
    path>``), so two folders may both have a ``files.py``, the top-level name ``tools`` is
    never used, a module named like a stdlib one or ``runtime`` shadows nothing, and its
    modules import each other relatively (``from . import helpers``, ``from .util import
    f``): each is ``<package>.<name>``."""
    import hashlib
    import importlib
    import importlib.machinery
    import importlib.util
    import sys

    module_name, sep, func_name = entry.partition(":")
    if not sep or not module_name or not func_name:
        raise ValueError(f"entry {entry!r} must be 'module:function'")
    if module_name.startswith("runtime."):
        # The package's own runners (command templates): imported by name, never by path.
        package_module = importlib.import_module(module_name)
        func = getattr(package_module, func_name, None)
        if not callable(func):
            raise ValueError(f"entry {entry!r}: no function {func_name!r}")
        return func  # type: ignore[no-any-return]
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise ValueError(f"entry module {module_name!r} is not a module name")
    path = base.joinpath(*module_name.split(".")).with_suffix(".py")
    folder = base.resolve()
    package = f"_runtime_tools_{hashlib.sha256(str(folder).encode()).hexdigest()[:12]}"
    if package not in sys.modules:
        # A package with no code of its own whose modules are the folder's files (the
        # import system finds ``<package>.<name>`` on its ``__path__``).
        spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        sys.modules[package] = importlib.util.module_from_spec(spec)
    qualname = f"{package}.{module_name}"
    module = sys.modules.get(qualname)
    if module is None:
        if not path.is_file():
            raise ValueError(f"entry module {module_name!r} not found at {path}")
        module = importlib.import_module(qualname)  # a failed import leaves no module behind
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ValueError(f"entry {entry!r}: {func_name!r} is not a function in {path}")
    return func  # type: ignore[no-any-return]


#: Bytes JSON writes as themselves (everything but control characters, '"' and '\\').
_JSON_PLAIN = bytes(b for b in range(256) if b >= 0x20 and b not in b'"\\')
#: The escaped bytes with a two-character escape; the other control characters take six.
_JSON_SHORT = b'"\\\b\t\n\f\r'


def json_size(text: str) -> int:
    """Bytes ``text`` takes as a string in the result's JSON. The output cap is checked on
    that (canonical RFC 8785 JSON, by the broker): a control character takes 6 bytes, a
    quote, backslash or newline 2, other text its UTF-8. A tool that cuts its output to fit
    the cap must measure it this way, not by ``len(text.encode())``."""
    raw = text.encode("utf-8", "surrogatepass")
    # Counted on the bytes, in C (no encoder per call: this runs on every read_file): each
    # escaped byte adds 1 (\n, \", ...) or 5 (\u00XX, the other control characters).
    escaped = raw.translate(None, _JSON_PLAIN)
    return len(raw) + len(escaped) + 4 * len(escaped.translate(None, _JSON_SHORT))


def result_json(value: Any) -> bytes:
    """``value`` as the broker sizes a result against the output cap and the audit log
    digests it: canonical (RFC 8785) JSON, integers beyond 2**53 as strings. Raises
    ValueError or TypeError for a value that is not JSON data."""
    from runtime.audit._canonical import canonical_json_ijson

    return canonical_json_ijson(value)


def result_size(value: Any) -> int:
    """Bytes ``value`` counts against the output cap as a whole result (:func:`result_json`).
    :func:`json_size` is the same measure for one string, without encoding anything."""
    return len(result_json(value))


#: Characters of a result past its cap shown in its ``output_too_large`` error.
PREVIEW_CHARS = 1024


def unencodable_result(value: Any) -> tuple[int, str]:
    """(size, preview) of a result that has no canonical JSON (:func:`result_json` refused
    it: not JSON data), as the broker and the sandbox's child both size it against the cap:
    its plain JSON with anything else as text, or nothing."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = ""
    return len(text.encode("utf-8", "surrogatepass")), text[:PREVIEW_CHARS]


def too_large_message(tool: str, size: object, limit: int) -> str:
    """The ``output_too_large`` message of a result of ``size`` bytes, the broker's and the
    sandbox child's alike."""
    prefix = f"{tool}: " if tool else ""
    return f"{prefix}result of {size} bytes exceeds the limit of {limit} bytes"


def json_head(text: str, size: int) -> str:
    """The longest prefix of ``text`` that takes at most ``size`` bytes as JSON."""
    if json_size(text) <= size:
        return text
    lo, hi = 0, min(len(text), max(size, 0))  # every character takes at least a byte
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_size(text[:mid]) <= size:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
