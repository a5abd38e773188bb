"""The policy engine: a loaded policy file and its ``decide`` for one call.

Evaluation of one call (deny > ask > allow among everything that matches; the decision names
the first rule with the winning action):

1. profile: a call under a profile may only use that profile's tools (``profiles.<name>``);
2. tool level: ``[tools.<name|glob>]``, ``[categories]``, ``[[rules]]`` whose conditions
   hold; nothing matched -> ``default`` (deny unless the file says otherwise);
3. argument level, by the tool's ``arg_roles``: path rules, command rules, network rules.
   These can only make a decision stricter.

Everything that does not depend on the arguments is compiled at load and cached per tool.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError

import runtime
from runtime import _trusted as _fastmodel
from runtime.errors import ManifestError, PolicyError
from runtime.models import (
    Action,
    BackendKind,
    Decision,
    Limits,
    SandboxNeeds,
    ToolCall,
    ToolSpec,
)
from runtime.policy._catalogue import CATALOGUE_HINTS, builtin_parameters
from runtime.policy._load import locate, parse_policy
from runtime.policy.commands import CommandRules
from runtime.policy.conditions import CompiledCondition, holds_on_paths
from runtime.policy.network import NetworkRules, NetworkVerdict, url_parts
from runtime.policy.paths import PathRules
from runtime.policy.schema import Example, PolicyFile, Rule, ToolEntry

__all__ = ["Policy", "default_policy_path"]

_SEVERITY: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
_LIMIT_FIELDS = frozenset(Limits.model_fields)
# Sandboxed tools always get a sane PATH and locale; [env] may override both.
#: Longest policy file read, bytes (4 MiB; the default policy is ~4 KiB).
_MAX_POLICY_BYTES = 4 * 1024 * 1024
_ENV_CACHE_SIZE = 64  # distinct (host values, session env) pairs kept; cleared when full
#: Every sandboxed tool's environment starts here. HOME is the call's private /tmp (the
#: sandbox user's home in its /etc/passwd): unset, `~` was not expanded and programs that
#: read $HOME (npm, pip, git) found none. A session may not set it (``[env] deny``).
_BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
_PATH_ROLES = frozenset({"read_path", "write_path", "read_write_path", "cwd"})
_ROLE_PREFIX = {
    "read_path": "paths",
    "write_path": "paths",
    "read_write_path": "paths",
    "cwd": "paths",
    "command": "commands",
    "url": "network",
    "env": "env",
    "session_env": "env",
}
#: Roles whose argument sets environment variables: judged as 'export NAME=VALUE' is.
_ENV_ROLES = frozenset({"env", "session_env"})


#: The path checks of each path role.
_ROLE_ACCESS: dict[str, tuple[Literal["read", "write"], ...]] = {
    "read_path": ("read",),
    "cwd": ("read",),
    "write_path": ("write",),
    "read_write_path": ("read", "write"),
}


class _Cand(NamedTuple):
    action: Action
    rule: str
    reason: str


def default_policy_path() -> Path:
    """``policy/default.toml``: packaged under ``runtime/_policy_data`` in a wheel, the
    top-level ``policy/`` in a source checkout."""
    pkg = Path(runtime.__file__).resolve().parent
    installed = pkg / "_policy_data"
    base = installed if installed.is_dir() else pkg.parent / "policy"
    return base / "default.toml"


class _CompiledRule:
    __slots__ = ("action", "categories", "conditions", "id", "reason", "tools")

    def __init__(self, rule: Rule) -> None:
        self.id = rule.id
        self.action: Action = rule.action
        self.reason = rule.reason or f"rule {rule.id!r}"
        self.tools = tuple(rule.tools)
        self.categories = frozenset(rule.categories)
        self.conditions = tuple(CompiledCondition(c) for c in rule.when)

    def applies_to(self, tool: str, category: str | None) -> bool:
        if self.tools and not any(fnmatchcase(tool, t) for t in self.tools):
            return False
        return not (self.categories and (category is None or category not in self.categories))


_M = TypeVar("_M", bound=BaseModel)


def _trusted(cls: type[_M], fields: dict[str, Any]) -> _M:
    """``cls(**fields)`` without validation, for values this module built and typed itself:
    the action and rule come from the validated policy, reasons/network/env are fresh
    containers of str, limits a fresh copy of a validated Limits. Validation cost ~40 % of a
    decision (pydantic-core re-checks and copies every container). Hazard: only for such
    values; ``tests/policy/test_policy_trusted.py`` checks the result equals the validated
    model."""
    # runtime._trusted.model: the same steps in one accelerator call (extra="forbid": None).
    return _fastmodel.model(cls, fields, fields, None)  # type: ignore[no-any-return]


def _copy(limits: Limits) -> Limits:
    """``limits.model_copy()`` (shallow: every field is a number) without pydantic's generic
    copy path: the cached Limits must not be shared, a caller may edit its decision's."""
    return _trusted(Limits, dict(limits.__dict__))


class _Plan(NamedTuple):
    """What decide() needs for one (tool, spec, profile) that does not depend on arguments."""

    spec: ToolSpec  # held so that the id() in the plan's key cannot be reused
    static: tuple[_Cand, ...]
    conditional: tuple[_CompiledRule, ...]  # rules with conditions that apply to the tool
    roles: tuple[tuple[str, str], ...]
    network_tool: bool
    caps: tuple[tuple[str, Any], ...]
    #: The decision's limits (copied for each decision: a caller may edit its own).
    limits: Limits
    #: (action, rule, reasons) when no conditional rule and no argument role applies.
    verdict: tuple[Action, str, tuple[str, ...]] | None
    #: The tool schema's top-level argument defaults, which rule conditions see.
    defaults: tuple[tuple[str, Any], ...] = ()


def _schema_defaults(parameters: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """``(name, default)`` of each top-level property of a tool's parameter schema that
    has a ``default``: what the tool does with an argument the call leaves out."""
    props = parameters.get("properties")
    if not isinstance(props, Mapping):
        return ()
    return tuple(
        (name, prop["default"])
        for name, prop in props.items()
        if isinstance(name, str) and isinstance(prop, Mapping) and "default" in prop
    )


def _with_defaults(args: dict[str, Any], defaults: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """``args`` with the defaults of the arguments it leaves out filled in."""
    missing = [(k, v) for k, v in defaults if k not in args]
    return {**dict(missing), **args} if missing else args


def _verdict(cands: list[_Cand]) -> tuple[Action, str, tuple[str, ...]]:
    """The strictest candidates win (deny > ask > allow); the first names the rule, all of
    them give the reasons (none for allow)."""
    worst = max(_SEVERITY[c.action] for c in cands)
    winners = [c for c in cands if _SEVERITY[c.action] == worst]
    action = winners[0].action
    reasons = tuple(c.reason for c in winners if c.reason) if action != "allow" else ()
    return action, winners[0].rule, reasons


_PLAN_CACHE_SIZE = 1024


class Policy:
    """A loaded, compiled policy. Build with :meth:`load`, :meth:`from_toml`, :meth:`default`."""

    def __init__(self, doc: PolicyFile, *, source: str = "<string>", text: str = "") -> None:
        self.document = doc
        self.source = source
        self._paths = PathRules(doc.paths)
        self._commands = CommandRules(doc.commands, self._paths)
        exact: list[tuple[str, ToolEntry]] = []
        globbed: list[tuple[str, ToolEntry]] = []
        for key, value in doc.tools.items():
            entry = ToolEntry(action=value) if isinstance(value, str) else value
            (globbed if any(c in key for c in "*?[") else exact).append((key, entry))
        # Globs first so that an exact entry's limits override a glob's.
        self._tool_entries = tuple(globbed + exact)
        self._rules = tuple(_CompiledRule(r) for r in doc.rules)
        self._env_pass_exact = tuple(p for p in doc.env.pass_ if not any(c in p for c in "*?["))
        self._env_pass_glob = tuple(p for p in doc.env.pass_ if any(c in p for c in "*?["))
        # The names as os.environ's own dict keys them (see _host_values); None: not known.
        self._env_pass_keys: tuple[Any, ...] | None = None
        encode = getattr(os.environ, "encodekey", None)
        if encode is not None:
            with contextlib.suppress(Exception):  # a name the platform cannot encode
                self._env_pass_keys = tuple(encode(name) for name in self._env_pass_exact)
        self._static = functools.lru_cache(maxsize=1024)(self._static_uncached)
        self._limits = functools.lru_cache(maxsize=1024)(self._limits_uncached)
        self._env_cache: dict[tuple[Any, ...], dict[str, str]] = {}
        self._plans: dict[tuple[int, str, str | None], _Plan] = {}
        # budget() per tool name: the tool entries never change after load.
        self._budgets: dict[str, int | None] = {}
        self._text = text
        # Examples whose load decision waits for the tool's manifest (_check_examples).
        self._held_examples: dict[int, PolicyError] = {}
        self._check_examples(text)

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def from_toml(cls, text: str, source: str = "<string>") -> Policy:
        return cls(parse_policy(text, source), source=source, text=text)

    @classmethod
    def load(cls, path: str | Path) -> Policy:
        p = Path(path)
        try:
            # Bounded: '--policy /dev/zero' (or a FIFO, a huge file) read until the process
            # was killed for its memory.
            with p.open("rb") as fh:
                data = fh.read(_MAX_POLICY_BYTES + 1)
            if len(data) > _MAX_POLICY_BYTES:
                raise PolicyError(
                    f"{p}: policy file is larger than {_MAX_POLICY_BYTES} bytes",
                    file=str(p),
                    line=None,
                    field=None,
                )
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise PolicyError(
                f"{p}: cannot read policy file: {exc}", file=str(p), line=None, field=None
            ) from exc
        return cls.from_toml(text, str(p))

    @classmethod
    def default(cls) -> Policy:
        return _default_policy()

    # -- simple accessors ------------------------------------------------------------------

    @property
    def sandbox_mode(self) -> Literal["strict", "best_effort"]:
        return self.document.sandbox.mode

    @property
    def redact_keys(self) -> frozenset[str]:
        return frozenset(self.document.audit.redact)

    @property
    def max_concurrent(self) -> int:
        return self.document.limits.max_concurrent

    @property
    def max_queued(self) -> int:
        return self.document.limits.max_queued

    @property
    def max_queued_total(self) -> int:
        return self.document.limits.max_queued_total

    @property
    def network(self) -> NetworkRules:
        return self.document.network

    def budget(self, tool: str) -> int | None:
        """Calls of ``tool`` allowed per session (``[tools.X] budget``); None = unlimited.
        The broker counts; the policy only says how many."""
        try:
            return self._budgets[tool]
        except KeyError:
            pass
        found: int | None = None
        for key, entry in self._tool_entries:
            if entry.budget is not None and fnmatchcase(tool, key):
                found = entry.budget  # exact entries come last and win
        if len(self._budgets) >= _PLAN_CACHE_SIZE:  # tool names are caller data: bound it
            self._budgets.clear()
        self._budgets[tool] = found
        return found

    def env(self, session_env: Mapping[str, str]) -> dict[str, str]:
        """The environment of a sandboxed tool: PATH/LANG/HOME, host variables named in
        ``[env] pass``, ``[env] set``, then the session's variables except ``[env] deny``.
        Nothing else of the broker's environment."""
        if self._env_pass_glob:
            return self._env_uncached(session_env)  # the key would be all of os.environ
        # Memoised on everything the answer depends on, read afresh on every call: the host
        # values of the passed names and the session's items (a dict the broker mutates in
        # place, so its identity is no key). A fresh copy each time: callers may edit it.
        try:
            key = (self._host_values(), tuple(session_env.items()))
            cached = self._env_cache.get(key)
        except TypeError:  # an unhashable session value: not cacheable, filtered out anyway
            return self._env_uncached(session_env)
        if cached is None:
            cached = self._env_uncached(session_env)
            if len(self._env_cache) >= _ENV_CACHE_SIZE:
                self._env_cache.clear()
            self._env_cache[key] = cached
        return dict(cached)

    def _host_values(self) -> tuple[Any, ...]:
        """The current host values of the ``[env] pass`` names, for the env memo's key.

        Read from ``os.environ``'s own dict (``_data``, keyed by the encoded names; CPython
        keeps it in step with every ``os.environ`` write): ``os.environ.get`` of a name that
        is not set raises and catches a KeyError in Python, which was most of a decision's
        environment cost. The values are only compared (the memo's key), never used; another
        mapping type (not CPython's) takes ``os.environ.get``.
        """
        data = getattr(os.environ, "_data", None)
        keys = self._env_pass_keys
        if keys is not None and type(data) is dict:
            return tuple(map(data.get, keys))  # a C loop: no comprehension frame
        return tuple([os.environ.get(name) for name in self._env_pass_exact])

    def _env_uncached(self, session_env: Mapping[str, str]) -> dict[str, str]:
        sec = self.document.env
        out: dict[str, str] = dict(_BASE_ENV)
        for name in self._env_pass_exact:
            value = os.environ.get(name)
            if value is not None:
                out[name] = value
        if self._env_pass_glob:
            for name, value in os.environ.items():
                if any(fnmatchcase(name, g) for g in self._env_pass_glob):
                    out[name] = value
        out.update(sec.set)
        for name, value in session_env.items():
            if (
                isinstance(name, str)
                and isinstance(value, str)
                and not any(fnmatchcase(name, g) for g in sec.deny)
            ):
                out[name] = value
        return out

    def tool_visible(self, name: str, profile: str | None = None) -> bool:
        """Whether to list ``name``: False when it is denied outright (by its tool entry, its
        built-in category, an unconditional rule, the profile, or the default)."""
        category = CATALOGUE_HINTS.get(name, (None,))[0]
        return self._visible(name, category, profile)

    def tool_visible_spec(self, spec: ToolSpec, profile: str | None = None) -> bool:
        """Like :meth:`tool_visible`, with the category taken from the manifest."""
        return self._visible(spec.name, spec.category, profile)

    def _visible(self, name: str, category: str | None, profile: str | None) -> bool:
        static = self._static(name, category, profile)
        if any(c.action == "deny" for c in static):
            return False
        if static:
            return True
        if any(
            r.conditions and r.action != "deny" and r.applies_to(name, category)
            for r in self._rules
        ):
            return True
        return self.document.default != "deny"

    # -- decisions -------------------------------------------------------------------------

    def _static_uncached(
        self, tool: str, category: str | None, profile: str | None
    ) -> tuple[_Cand, ...]:
        doc = self.document
        out: list[_Cand] = []
        if profile is not None:
            prof = doc.profiles.get(profile)
            if prof is None:
                return (_Cand("deny", "profiles.unknown", f"unknown profile {profile!r}"),)
            if not (any(fnmatchcase(tool, t) for t in prof.tools) or category in prof.categories):
                out.append(
                    _Cand(
                        "deny",
                        f"profiles.{profile}",
                        f"tool {tool!r} is not in profile {profile!r}",
                    )
                )
        for key, entry in self._tool_entries:
            if entry.action is not None and fnmatchcase(tool, key):
                out.append(
                    _Cand(
                        entry.action,
                        f"tools.{key}",
                        entry.reason or f"[tools.{key}] says {entry.action}",
                    )
                )
        if category is not None and category in doc.categories:
            action = doc.categories[category]
            out.append(
                _Cand(action, f"categories.{category}", f"[categories] {category} = {action}")
            )
        for rule in self._rules:
            if not rule.conditions and rule.applies_to(tool, category):
                out.append(_Cand(rule.action, rule.id, rule.reason))
        return tuple(out)

    def _limits_uncached(
        self,
        tool: str,
        profile: str | None,
        network_tool: bool,
        caps: tuple[tuple[str, Any], ...],
    ) -> Limits:
        doc = self.document
        overrides = doc.limits.overrides()
        overrides.pop("max_concurrent", None)
        overrides.pop("max_queued", None)
        overrides.pop("max_queued_total", None)
        if network_tool and "timeout_s" not in overrides:
            overrides["timeout_s"] = doc.network.timeout_s
        for key, entry in self._tool_entries:
            if fnmatchcase(tool, key):
                overrides.update(entry.limits.overrides())
        limits = Limits().merged(**overrides)
        data = limits.model_dump()
        cap_sets = [dict(caps)]
        if profile is not None and profile in doc.profiles:
            cap_sets.append(doc.profiles[profile].limits.overrides())
        for cap in cap_sets:
            for k, v in cap.items():
                if k in _LIMIT_FIELDS and v < data[k]:
                    data[k] = v
        try:
            return Limits.model_validate(data)
        except ValidationError as exc:
            raise ManifestError(
                f"tool {tool!r}: its manifest limits are invalid: {exc.errors()[0]['msg']}",
                tool=tool,
                limits=dict(caps),
            ) from exc

    def decide(self, call: ToolCall, spec: ToolSpec, *, profile: str | None = None) -> Decision:
        """Decide one (schema-validated) call. ``profile`` defaults to
        ``call.context["profile"]``; ``call.context["env"]`` is the session's environment.
        Never raises for anything in ``call``; a manifest with invalid ``limits`` raises
        :class:`ManifestError`."""
        if profile is None:
            ctx_profile = call.context.get("profile")
            profile = ctx_profile if isinstance(ctx_profile, str) else None
        tool, args = call.tool, call.arguments
        plan = self._plan(tool, spec, profile)
        urls: list[dict[str, Any]] = []
        if plan.verdict is not None:
            # No conditional rule and no argument role: the arguments change nothing.
            action, rule_id, reasons = plan.verdict
        else:
            cands = list(plan.static)
            # Conditions judge what the tool will do: an argument left out is its schema
            # default ('mode' of write_file is "overwrite" when not given), so a rule on
            # the default's value cannot be bypassed by omitting the argument.
            seen = _with_defaults(args, plan.defaults) if plan.conditional else args
            for rule in plan.conditional:
                if all(c.holds(seen) for c in rule.conditions) or (
                    # Deny/ask conditions on a path also see its normal form (policy hunt).
                    rule.action != "allow"
                    and holds_on_paths(
                        rule.conditions,
                        seen,
                        [a for a, r in plan.roles if r in _PATH_ROLES],
                        self._paths.normal_form,
                    )
                ):
                    cands.append(_Cand(rule.action, rule.id, rule.reason))
            if not cands:
                cands.append(self._default_cand())
            if plan.roles and max(_SEVERITY[c.action] for c in cands) < 2:
                for arg, role in plan.roles:
                    # null is how JSON says "not given" for an optional argument.
                    if role in _ENV_ROLES:
                        self._check_env(args, arg, role, cands)
                    elif args.get(arg) is not None:
                        self._check_arg(args[arg], role, cands, urls)
            action, rule_id, reasons = _verdict(cands)
        network_tool = plan.network_tool
        network: dict[str, Any] = {}
        if network_tool:
            net = self.document.network
            network = {
                "allowed": action != "deny",
                "egress": True,
                "urls": urls,
                "schemes": list(net.schemes),
                "max_redirects": net.max_redirects,
                "timeout_s": net.timeout_s,
                "max_response_bytes": net.max_response_bytes,
                "retries": net.retries,
                "search_endpoint": net.search_endpoint,
            }
        session_env = call.context.get("env")
        return _trusted(
            Decision,
            {
                "action": action,
                "rule": rule_id,
                "reasons": list(reasons),
                "limits": _copy(plan.limits),
                "profile": profile,
                "network": network,
                "env": self.env(session_env if isinstance(session_env, Mapping) else {}),
            },
        )

    def _default_cand(self) -> _Cand:
        d = self.document.default
        return _Cand(d, "default", f"no rule matches; the default is {d}")

    def _plan(self, tool: str, spec: ToolSpec, profile: str | None) -> _Plan:
        """The argument-independent part of decide() for this tool, spec and profile.

        Keyed by the spec's identity (the plan holds the spec, so the id is not reused while
        the entry lives): the catalogue hands out one ToolSpec per tool. Hazard: a spec
        edited in place after its first decision keeps its old plan; specs are treated as
        immutable once registered.
        """
        key = (id(spec), tool, profile)
        plan = self._plans.get(key)
        if plan is not None and plan.spec is spec:
            return plan
        category = spec.category
        roles = spec.arg_roles
        static = self._static(tool, category, profile)
        conditional = tuple(r for r in self._rules if r.conditions and r.applies_to(tool, category))
        network_tool = bool(spec.sandbox.egress or category == "network" or "url" in roles.values())
        caps = tuple(
            sorted(
                (k, v)
                for k, v in spec.limits.items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            )
        )
        plan = _Plan(
            spec=spec,
            static=static,
            conditional=conditional,
            verdict=(
                None if conditional or roles else _verdict(list(static) or [self._default_cand()])
            ),
            roles=tuple(roles.items()),
            network_tool=network_tool,
            caps=caps,
            defaults=_schema_defaults(spec.parameters) if conditional else (),
            # Raises ManifestError for invalid manifest limits: no plan is kept, and every
            # decision of the tool raises it, as before plans held the limits.
            limits=self._limits(tool, profile, network_tool, caps),
        )
        if len(self._plans) >= _PLAN_CACHE_SIZE:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _check_arg(
        self,
        value: Any,
        role: str,
        cands: list[_Cand],
        urls: list[dict[str, Any]],
        *,
        nested: bool = False,
    ) -> None:
        if isinstance(value, list):
            # One level: a list of paths/URLs. Deeper nesting is not a path (and unbounded
            # recursion on attacker-shaped JSON is a crash).
            for item in value:
                if nested or isinstance(item, list):
                    cands.append(
                        _Cand(
                            "deny",
                            f"{_ROLE_PREFIX[role]}.invalid",
                            "nested list where a single value was expected",
                        )
                    )
                    return
                self._check_arg(item, role, cands, urls, nested=True)
            return
        if role in _PATH_ROLES:
            # read_write_path: a path the tool reads and changes (a move's source, an edit):
            # both checks, so that a write-only path cannot be read through it.
            for access in _ROLE_ACCESS[role]:
                v = self._paths.check(value, access, role=role)
                if not v.allowed:
                    cands.append(_Cand("deny", v.rule, v.reason))
                    break
        elif role == "command":
            for f in self._commands.check(value):
                cands.append(_Cand(f.action, f.rule, f.reason))
        elif role == "url":
            parts = url_parts(value)
            if isinstance(parts, str):
                cands.append(_Cand("deny", "network.invalid-url", parts))
                return
            verdict: NetworkVerdict = self.document.network.check(*parts)
            if not verdict.allowed:
                cands.append(_Cand("deny", verdict.rule, verdict.reason))
            else:
                scheme, host, port = parts
                urls.append(
                    {
                        "url": value,
                        "scheme": scheme,
                        "host": host,
                        "port": port,
                        "rule": verdict.rule,
                    }
                )

    def _check_env(self, args: Mapping[str, Any], arg: str, role: str, cands: list[_Cand]) -> None:
        """Variables a call sets, judged as the same assignments written in a command are:
        ``export NAME=VALUE`` through the command rules (a value a program runs as a command,
        LESSOPEN or EDITOR, is read as shell; a loader name asks...), so that a variable
        cannot do by ``set_env`` or ``shell_exec``'s ``env`` what the command line may not.
        ``session_env`` (set_env's ``key``, its value the argument ``value``: it is seen by
        every later call of the session) is also refused when ``[env] deny`` matches the
        name (rule ``env.deny``), instead of being set and then silently left out."""
        value = args.get(arg)
        if role == "env":
            if not isinstance(value, Mapping):
                return  # not given, or not an object: the schema's to refuse
            pairs = list(value.items())
        else:
            if not isinstance(value, str) or args.get("value") is None:
                return  # removing a variable sets nothing
            if any(fnmatchcase(value, g) for g in self.document.env.deny):
                cands.append(
                    _Cand(
                        "deny",
                        "env.deny",
                        f"{value} is in [env] deny: a session may not set it (its value "
                        "runs as code, or redirects where programs read their code or "
                        "configuration from)",
                    )
                )
                return
            pairs = [(value, args.get("value"))]
        words = [
            f"{name}={shlex.quote(text)}"
            for name, text in pairs
            if isinstance(name, str) and isinstance(text, str)
        ]
        if words:
            for f in self._commands.check("export " + " ".join(words)):
                cands.append(_Cand(f.action, f.rule, f.reason))

    # -- examples --------------------------------------------------------------------------

    def check_examples(self, manifest: Callable[[str], ToolSpec | None]) -> None:
        """Check the ``[[examples]]`` again, each with the manifest ``manifest(tool)`` gives
        (None: not in the catalogue) instead of the built-in hints: at load the policy knows
        only the built-in tools, and an example naming a folder tool was decided with an
        invented spec (category ``custom``, no argument roles, no parameter defaults), so it
        could pass while the real tool goes the other way. The real manifest wins over an
        example's own ``spec`` (which only stands in for it at load). An example whose load
        decision was held (see :meth:`_check_examples`) fails here when ``manifest`` does not
        know its tool either. Raises PolicyError as a failing example does at load. The
        broker calls it with its catalogue when it is made."""
        self._check_examples(self._text, manifest)

    def _check_examples(
        self, text: str, manifest: Callable[[str], ToolSpec | None] | None = None
    ) -> None:
        """Decide every example, at load (``manifest`` None: built-in tools with their real
        parameters, others with a stand-in) or again with the catalogue's manifests.

        At load, an example about a tool that is not built-in, that fails, and that leaves
        out an argument a ``[[rules]]`` condition for the tool reads, is held instead of
        raised: conditions see a left-out argument as its schema default, which only the
        tool's manifest knows, so the example may be right ('greeting' defaults to "hi").
        The re-check decides it with the manifest; when the catalogue has no such tool, the
        held failure is raised then."""
        for i, ex in enumerate(self.document.examples):
            label = f"example {i}" + (f" ({ex.name})" if ex.name else "")
            line = locate(text, ("examples", i)) if text else None
            real = manifest(ex.tool) if manifest is not None else None
            if manifest is not None and real is None:
                held = self._held_examples.get(i)
                if held is not None:
                    raise held
                continue  # decided at load already, with the same hints
            spec = real or self._example_stand_in(ex, i, label, line)
            params = real.parameters if real is not None else builtin_parameters(ex.tool)
            if params is not None:
                self._check_example_arguments(text, i, ex, label, params)
            failure = self._example_failure(ex, spec, i, label, line)
            if failure is None:
                continue
            if real is None and self._defaults_unknown(ex):
                self._held_examples[i] = PolicyError(
                    f"{failure.message} ({ex.tool!r} is neither built in nor in the "
                    "catalogue: the arguments the example leaves out were decided without "
                    "their schema defaults)",
                    **failure.details,
                )
                continue
            raise failure

    def _example_stand_in(self, ex: Example, i: int, label: str, line: int | None) -> ToolSpec:
        """The spec an example is decided with at load: a built-in's hints and its real
        parameters (so that conditions see its argument defaults, as the broker's decision
        does), else the example's ``spec`` over category ``custom``."""
        hint = CATALOGUE_HINTS.get(ex.tool, ("custom", {}, False))
        try:
            return ToolSpec(
                name=ex.tool,
                description="policy example",
                category=ex.spec.category or hint[0],
                parameters=builtin_parameters(ex.tool) or {"type": "object"},
                backend=BackendKind.MOCK,
                arg_roles=ex.spec.arg_roles if ex.spec.arg_roles is not None else hint[1],
                sandbox=SandboxNeeds(
                    egress=ex.spec.egress if ex.spec.egress is not None else hint[2]
                ),
            )
        except ValueError as exc:
            raise PolicyError(
                f"{self.source}:{line or '?'}: {label}: {exc}",
                file=self.source,
                line=line,
                field=f"examples.{i}",
            ) from exc

    def _example_failure(
        self, ex: Example, spec: ToolSpec, i: int, label: str, line: int | None
    ) -> PolicyError | None:
        """The error for an example whose decision with ``spec`` is not the expected one."""
        d = self.decide(ToolCall(tool=ex.tool, arguments=ex.arguments), spec, profile=ex.profile)
        problem = None
        if ex.match is not None and d.action != ex.match:
            problem = f"expected {ex.match}, got {d.action} (rule {d.rule})"
        elif ex.match is not None and ex.rule is not None and d.rule != ex.rule:
            problem = f"expected rule {ex.rule}, got {d.rule} ({d.action})"
        elif ex.not_match is not None and d.action == ex.not_match:
            problem = f"must not be {ex.not_match}, got it (rule {d.rule})"
        if problem is None:
            return None
        return PolicyError(
            f"{self.source}:{line or '?'}: {label} fails: {problem}",
            file=self.source,
            line=line,
            field=f"examples.{i}",
            example=ex.name or i,
            decision={"action": d.action, "rule": d.rule, "reasons": d.reasons},
        )

    def _defaults_unknown(self, ex: Example) -> bool:
        """Whether a schema default the policy cannot know at load could change the
        example's decision: it is not about a built-in tool, and a condition of a rule that
        names the tool (categories aside: the real one may differ from the stand-in's) reads
        a top-level argument the example leaves out."""
        if builtin_parameters(ex.tool) is not None:
            return False
        return any(
            c.arg.split(".", 1)[0] not in ex.arguments
            for r in self._rules
            if not r.tools or any(fnmatchcase(ex.tool, t) for t in r.tools)
            for c in r.conditions
        )

    def _check_example_arguments(
        self,
        text: str,
        i: int,
        ex: Example,
        label: str,
        parameters: dict[str, Any],
    ) -> None:
        """An example's arguments must be a call the tool accepts: one it would refuse as
        invalid_arguments ('{paht = "x"}' for read_file) is never decided, so its
        expectation held vacuously (no path, so no path rule, so 'deny' by default)."""
        from runtime.validation import compile_schema  # only when there are examples

        tool = ex.tool
        errors = compile_schema(parameters, where=f"{tool}: parameters").errors(ex.arguments)
        if not errors:
            return
        first = errors[0]
        line = locate(text, ("examples", i, "arguments")) if text else None
        raise PolicyError(
            f"{self.source}:{line or '?'}: {label}: its arguments are not a valid {tool} "
            f"call: {first['path']}: {first['message']} [{first['rule']}]",
            file=self.source,
            line=line,
            field=f"examples.{i}.arguments",
            example=ex.name or i,
            argument_errors=errors,
        )


@functools.cache
def _default_policy() -> Policy:
    return Policy.load(default_policy_path())
