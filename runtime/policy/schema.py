"""The policy file's schema: pydantic models that reject unknown keys.

``policy/policy.schema.json`` is generated from :class:`PolicyFile` (``python -m
runtime.policy.schema``); a test keeps the two equal. Every field names its unit and default.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from fnmatch import fnmatchcase
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runtime._bindable import refusal as bindable_refusal
from runtime.models import Action, ToolCategory
from runtime.policy._glob_syntax import refuse_braces, refuse_leading_bang
from runtime.policy._located import LocatedError
from runtime.policy._workspace_globs import SANDBOX_ROOT, workspace_glob
from runtime.policy.network import NetworkRules

__all__ = [
    "AuditSection",
    "CommandRule",
    "CommandsSection",
    "Condition",
    "EnvSection",
    "Example",
    "ExampleSpec",
    "LimitsSection",
    "LocatedError",
    "McpServerEntry",
    "PathsSection",
    "PolicyFile",
    "ProfileSection",
    "Rule",
    "SandboxSection",
    "ToolEntry",
    "check_mcp_servers",
    "json_schema",
    "schema_text",
]

RULE_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
HazardAction = Literal["ask", "deny"]
_RESERVED_PREFIXES = (
    "paths.",
    "commands.",
    "network.",
    "profiles.",
    "tools.",
    "categories.",
    "default.",
)


def _check_rule_id(v: str) -> str:
    if not RULE_ID_RE.match(v):
        raise ValueError(f"rule id {v!r} must match {RULE_ID_RE.pattern}")
    return v


class _Section(BaseModel):
    # Strict: TOML gives ints, floats, bools and dates typed, so a string where a number or
    # a bool belongs is a mistake to refuse, not to coerce (builtin = "off" was false).
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)


def _check_regexes(values: list[str]) -> list[str]:
    for v in values:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"bad regex {v!r}: {exc}") from exc
    return values


def _plain_globs(v: list[str], where: str, *, names: bool) -> list[str]:
    """``v``, refused (LocatedError at the item) when a glob has shell braces, or, for
    ``names`` (fields whose values never start with '!'), a leading '!': neither is glob
    syntax in a policy, and either made the entry match nothing (``_glob_syntax``)."""
    for i, glob in enumerate(v):
        try:
            # An argument word may well hold a literal brace ('{print $1}', a JSON body):
            # the message leads with that spelling there.
            refuse_braces(glob, where, literal_first=not names)
            if names:
                refuse_leading_bang(glob, where)
        except ValueError as exc:
            raise LocatedError(str(exc), (i,)) from None
    return v


class LimitsSection(_Section):
    """Resource limits; unset fields keep the runtime default named in each description."""

    timeout_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        description="Wall clock, seconds. Default 30 (network tools: [network] timeout_s, 60).",
    )
    cpu_s: int | None = Field(
        None,
        gt=0,
        le=3600,
        description="CPU seconds of each process of a call (RLIMIT_CPU, per process: a call "
        "running several processes may use more in all, within timeout_s). Default 30.",
    )
    memory_mb: int | None = Field(
        None,
        gt=0,
        le=65536,
        description="Memory, MiB: what each process of a call may allocate (RLIMIT_DATA) "
        "and, where the host gives a memory cgroup, what the whole call may hold. Default 512.",
    )
    pids: int | None = Field(
        None,
        gt=0,
        le=4096,
        description="Processes+threads of a call (its pids cgroup where the host gives one, "
        "else RLIMIT_NPROC, counted in the call's own user namespace). Default 64.",
    )
    nofile: int | None = Field(None, gt=3, le=65536, description="Open files. Default 256.")
    fsize_mb: int | None = Field(
        None, gt=0, le=65536, description="Largest file, MiB. Default 256."
    )
    output_bytes: int | None = Field(
        None, gt=0, le=256 * 1_048_576, description="Largest result, bytes. Default 1 MiB."
    )
    disk_mb: int | None = Field(
        None,
        gt=0,
        le=16 * 1_048_576,
        description="How much the workspace's file system may fill during a writing call, "
        "MiB (a file or directory made counts as 4 KiB). Default 2048.",
    )
    wasm_fuel: int | None = Field(None, gt=0, description="Wasm fuel units. Default 2e9.")
    wasm_memory_mb: int | None = Field(
        None, gt=0, le=4096, description="Wasm linear memory, MiB. Default 64."
    )

    def overrides(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class GlobalLimits(LimitsSection):
    max_concurrent: int = Field(
        3, ge=1, le=1024, description="Calls running at once per broker. Default 3."
    )
    max_queued: int = Field(
        32,
        ge=0,
        le=4096,
        description="Calls of one MCP session (of one peer address for stateless HTTP "
        "requests) that may wait for a slot while max_concurrent calls run; one more fails "
        "at once (resource_limit). Sessions are served in turn. Default 32.",
    )
    max_queued_total: int = Field(
        256,
        ge=0,
        le=65536,
        description="Calls of all MCP sessions together that may wait for a slot; one more "
        "fails at once (resource_limit), so many sessions cannot queue without bound. "
        "Default 256.",
    )


class SandboxSection(_Section):
    mode: Literal["strict", "best_effort"] = Field(
        "strict",
        description="strict: refuse to run when an isolation mechanism is missing; "
        "best_effort: run with what the host offers and record it. Default strict.",
    )


class ToolEntry(_Section):
    action: Action | None = Field(None, description="allow | ask | deny. Default: not set.")
    reason: str | None = Field(None, description="Shown when this entry denies or asks.")
    limits: LimitsSection = Field(
        default_factory=LimitsSection, description="Limits of this tool (override [limits])."
    )
    budget: int | None = Field(
        None, ge=0, description="Calls of this tool per session; unset = unlimited."
    )


class Condition(_Section):
    """A test on one argument; every operator given must hold. An argument the call leaves
    out is seen as its default in the tool's parameter schema (top-level properties)."""

    arg: str = Field(description="Argument name; 'a.b' reaches into nested objects.")
    equals: Any = Field(None, description="Equal to this value.")
    not_equals: Any = Field(None, description="Not equal to this value.")
    glob: str | None = Field(None, description="A string matching this glob (fnmatch).")
    regex: str | None = Field(None, description="A string in which this regex is found.")
    in_: list[Any] | None = Field(None, alias="in", description="One of these values.")
    not_in: list[Any] | None = Field(None, description="None of these values.")
    gt: float | None = Field(None, description="A number greater than this.")
    ge: float | None = Field(None, description="A number at least this.")
    lt: float | None = Field(None, description="A number less than this.")
    le: float | None = Field(None, description="A number at most this.")
    exists: bool | None = Field(None, description="The argument is present (true) or not.")

    @field_validator("glob")
    @classmethod
    def _glob_ok(cls, v: str | None) -> str | None:
        # Argument values may start with '!': only braces are refused.
        if v is not None:
            # A rule's conditions must all hold: one glob per rule, or a regex, instead.
            refuse_braces(
                v,
                "[[rules]] glob conditions",
                instead="write a rule for each glob, or a regex condition",
                literal_first=True,
            )
        return v

    @model_validator(mode="after")
    def _has_operator(self) -> Condition:
        ops = self.model_dump(exclude={"arg"}, exclude_none=True)
        if not ops:
            raise ValueError(f"condition on {self.arg!r} has no operator")
        if self.regex is not None:
            _check_regexes([self.regex])
        return self


class Rule(_Section):
    """A tool-level rule: applies to matching tools when all ``when`` conditions hold."""

    id: str = Field(description="Unique id, named by every decision this rule makes.")
    action: Action
    tools: list[str] = Field(
        default_factory=list, description="Tool names or fnmatch globs. Default: any tool."
    )
    categories: list[ToolCategory] = Field(
        default_factory=list,
        description="Tool categories (file, shell, code, network, system, data, memory, "
        "interaction, custom, mcp). Default: any category.",
    )
    when: list[Condition] = Field(
        default_factory=list, description="Conditions on arguments, all must hold."
    )
    reason: str | None = None

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        return _check_rule_id(v)

    @field_validator("tools")
    @classmethod
    def _tool_globs(cls, v: list[str]) -> list[str]:
        return _plain_globs(v, "[[rules]] tools", names=True)


class PathsSection(_Section):
    """Path rules for arguments with role read_path / write_path / cwd. Globs are relative to
    the workspace: '*' stays within a name, '**' spans directories, 'a/**' includes 'a'. A
    write path (a delete, either end of a move) is refused when a deny or deny_write glob
    could match below it through its names ('config' with 'config/prod.env' denied). Each
    glob is normalised when the policy loads ('./out/**', '/workspace/out/**' and
    'out//./**' are 'out/**'); one that names no path inside the workspace ('..' segments,
    other absolute paths, '', '.', a trailing '/') is refused, and so is one with shell
    braces ('*.{pem,key}': list the globs separately; '[{]' is a literal brace) or a
    leading '!' (no negation: deny wins)."""

    workspace_root: str = Field(
        SANDBOX_ROOT,
        description="Where the sandbox shows the workspace: always '/workspace', the only "
        "value accepted (kept for older policy files). Absolute paths are accepted only "
        "under it. Default '/workspace'.",
        json_schema_extra={"enum": [SANDBOX_ROOT, SANDBOX_ROOT + "/"]},
    )
    read: list[str] = Field(
        default_factory=lambda: ["**"], description="Readable globs. Default ['**']."
    )
    write: list[str] = Field(
        default_factory=lambda: ["**"], description="Writable globs. Default ['**']."
    )
    deny: list[str] = Field(
        default_factory=list, description="Neither readable nor writable. Deny wins. Default []."
    )
    deny_read: list[str] = Field(default_factory=list, description="Not readable. Default [].")
    deny_write: list[str] = Field(default_factory=list, description="Not writable. Default [].")
    mask_max_entries: int = Field(
        1_000_000,
        ge=1,
        le=10_000_000,
        description="Bound on the directory entries each sandboxed call's walk for deny / "
        "deny_read / deny_write matches may look at (unchanged directories count as their "
        "last listing); past it the call fails closed with a sandbox_error, never unmasked. "
        "Raise it for a larger workspace. Default 1000000.",
    )

    @field_validator("workspace_root")
    @classmethod
    def _sandbox_root(cls, v: str) -> str:
        # The tools and the sandbox show the workspace at /workspace, always: another root
        # was read by the policy alone, so '/proj/x' passed the path rules and failed in the
        # tool, while '/workspace/...' (what the shell really reaches) escaped the command
        # rules ('rm -rf /workspace/*' was allowed).
        if v.rstrip("/") != SANDBOX_ROOT:
            raise ValueError(
                f"workspace_root {v[:200]!r} is not supported: the sandbox always shows the "
                f"workspace at {SANDBOX_ROOT!r}; remove the key or set it to {SANDBOX_ROOT!r}"
            )
        return SANDBOX_ROOT

    @field_validator("read", "write", "deny", "deny_read", "deny_write")
    @classmethod
    def _workspace_globs(cls, v: list[str]) -> list[str]:
        # A glob spelled otherwise than the normalised paths it is matched against matched
        # none of them, and the sandbox's write binds read it as "anywhere" (_workspace_globs).
        return [workspace_glob(glob) for glob in v]


class CommandRule(_Section):
    """A rule on one simple command after wrappers are seen through. All fields given must
    match; lists of alternatives match when any item does."""

    id: str = Field(
        description="Unique id; decisions this rule makes name it as it is (rule = '<id>'), "
        "as [[rules]] ids are."
    )
    action: Action
    program: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Program base names or globs ('rm', 'mkfs.*', 'python*'). Default any.",
    )
    flags: list[list[str]] = Field(
        default_factory=list,
        description="Groups of flags; each group needs one of its flags present. '-r' also "
        "matches clusters ('-rf'), '--recursive' also matches unambiguous prefixes ('--rec').",
    )
    args: list[str] = Field(
        default_factory=list,
        description="Some argument, lexically normalised ('//x/.' -> '/x'), matches one of "
        "these path globs ('[*]' is a literal star).",
    )
    args_regex: list[str] = Field(
        default_factory=list, description="Some argument contains a match of one of these."
    )
    args_seq: list[list[str]] = Field(
        default_factory=list,
        description="One of these word sequences (globs) appears consecutively in the "
        "arguments ('run', 'dev').",
    )
    unless_args: list[str] = Field(
        default_factory=list, description="The rule does not apply if an argument matches."
    )
    piped_from: list[str] = Field(
        default_factory=list,
        description="The command's input (pipe, or code substituted in) comes from one of "
        "these programs ('curl').",
    )
    redirect_to: list[str] = Field(
        default_factory=list, description="An output redirection targets one of these globs."
    )
    writes_to: list[str] = Field(
        default_factory=list,
        description="A file the program names as one it writes matches one of these globs "
        "(tee/truncate/shred operands, cp/mv/install/ln destinations, dd of=, sort -o, "
        "sed -i files...; the shell's own redirections are redirect_to). Only these are "
        "judged, not the files it reads ('cp \"$f\" backup/' writes backup/).",
    )
    assigns: list[str] = Field(
        default_factory=list,
        description="The command sets a variable whose name matches one of these globs: "
        "'NAME=V cmd', 'env NAME=V', export/declare/typeset/readonly/local NAME=V, "
        "'export NAME' and 'declare -x NAME', the builtins that assign (read, printf -v, "
        "mapfile, getopts, let), 'for NAME in ...', arithmetic ('$((NAME=1))', '((NAME++))', "
        "'a[NAME=1]') and '${NAME:=V}' (a tool's env argument and set_env are judged as "
        "'export NAME=V'). Default [].",
    )
    modes_regex: list[str] = Field(
        default_factory=list,
        description="A permission mode the command gives files contains a match of one of "
        "these, each spelled as chmod's ('777', 'o+w'): chmod's MODE, the -m/--mode of "
        "mkdir/install/mkfifo/mknod, the mode a umask lets files have ('umask 0' is '777'), "
        "rsync --chmod clauses, a setfacl entry for others, the mask or a named user or "
        "group ('o=rwx'), git's shared-repository mode; a mode copied from a file (chmod "
        "--reference, cp -p/-a or rsync -a of /tmp) is that file's when known ('/tmp': "
        "'1777', '/dev/null': '666'); chmod --reference to another file outside the "
        "workspace may match.",
    )
    literal_only: bool = Field(
        False,
        description="Match on literal words only: a word known only at run time never "
        "makes the rule match (by default it may, and a deny rule then asks). For harms "
        "the sandbox's kernel walls stop as well (a block device: the sandbox's /dev has "
        "none, and a tool never runs as root), where asking would refuse every ordinary "
        "command with a variable in it. Default false.",
    )
    reason: str | None = None

    @field_validator("id")
    @classmethod
    def _id_ok(cls, v: str) -> str:
        return _check_rule_id(v)

    @field_validator("args_regex", "modes_regex")
    @classmethod
    def _regex_ok(cls, v: list[str]) -> list[str]:
        return _check_regexes(v)

    @field_validator("program", "piped_from", "redirect_to", "writes_to", "assigns")
    @classmethod
    def _name_globs(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return _plain_globs(v, f"command-rule {info.field_name} globs", names=True)

    @field_validator("args", "unless_args")
    @classmethod
    def _arg_globs(cls, v: list[str], info: ValidationInfo) -> list[str]:
        # A word may be '!' (find's and test's negation): only braces are refused.
        return _plain_globs(v, f"command-rule {info.field_name} globs", names=False)

    @field_validator("args_seq")
    @classmethod
    def _seq_globs(cls, v: list[list[str]]) -> list[list[str]]:
        for i, seq in enumerate(v):
            try:
                _plain_globs(seq, "command-rule args_seq globs", names=False)
            except LocatedError as exc:
                raise LocatedError(str(exc), (i, *exc.loc)) from None
        return v


class CommandsSection(_Section):
    """Rules for arguments with role 'command' (shell strings)."""

    mode: Literal["denylist", "allowlist"] = Field(
        "denylist",
        description="denylist: any program not denied runs; allowlist: only programs in "
        "'allow' (or matched by an allow rule). Default denylist.",
    )
    allow: list[str] = Field(
        default_factory=list, description="Programs (globs) of allowlist mode. Default []."
    )
    builtin: bool = Field(
        True,
        description="Apply the built-in deny rules (rm -rf /, mkfs, ...); the dev-server "
        "rules follow 'services' either way. Default true.",
    )
    disable: list[str] = Field(
        default_factory=list, description="Ids of built-in rules to drop. Default []."
    )
    services: Action = Field(
        "deny",
        description="Action for long-running dev servers (npm run dev, vite, uvicorn...) that "
        "would block the call. Default deny.",
    )
    dynamic: HazardAction = Field(
        "ask",
        description="Command names built at run time ($x, $(...), eval, ${IFS}). Default ask.",
    )
    interpreter: HazardAction = Field(
        "ask",
        description="Interpreters fed code (python -c, perl -e, base64 -d | sh). Default ask.",
    )
    unparseable: HazardAction = Field(
        "ask", description="Commands the shell parser cannot read. Default ask."
    )
    rules: list[CommandRule] = Field(default_factory=list, description="Your own rules.")

    @field_validator("disable")
    @classmethod
    def _known_ids(cls, v: list[str]) -> list[str]:
        from runtime.policy.commands import builtin_rules  # the rules import this module

        deny, services = builtin_rules()
        known = {r.id for r in (*deny, *services)}
        unknown = [i for i in v if i not in known]
        if unknown:
            raise ValueError(f"no built-in command rule with id {unknown[0]!r}")
        return v

    @field_validator("allow")
    @classmethod
    def _allow_globs(cls, v: list[str]) -> list[str]:
        return _plain_globs(v, "[commands] allow globs", names=True)

    @model_validator(mode="after")
    def _allow_needs_allowlist(self) -> CommandsSection:
        if self.allow and self.mode != "allowlist":
            raise ValueError("'allow' lists programs for mode = 'allowlist' only")
        return self


class ProfileSection(_Section):
    """A named tool subset for one agent (least privilege)."""

    description: str | None = None
    tools: list[str] = Field(default_factory=list, description="Tool names or globs.")
    categories: list[ToolCategory] = Field(
        default_factory=list,
        description="Whole categories (file, shell, code, network, system, data, memory, "
        "interaction, custom, mcp). Default [].",
    )
    limits: LimitsSection = Field(
        default_factory=LimitsSection, description="Caps on this profile's limits."
    )

    @field_validator("tools")
    @classmethod
    def _tool_globs(cls, v: list[str]) -> list[str]:
        return _plain_globs(v, "profile tools", names=True)


class EnvSection(_Section):
    pass_: list[str] = Field(
        default_factory=list,
        alias="pass",
        description="Host variables (names or globs) passed to sandboxed tools. Default [].",
    )
    set: dict[str, str] = Field(
        default_factory=dict,
        description="Variables set for sandboxed tools, on top of PATH="
        "/usr/local/bin:/usr/bin:/bin and LANG=C.UTF-8 (which they may override). Default {}.",
    )
    deny: list[str] = Field(
        default_factory=lambda: [
            # Loaders and shells: what they load or run before the command.
            "LD_*",
            "GLIBC_TUNABLES",
            "GCONV_PATH",
            "BASH_ENV",
            "ENV",
            "BASH_FUNC_*",
            "PATH",
            "IFS",
            "PROMPT_COMMAND",
            "SHELLOPTS",
            "BASHOPTS",
            "PS4",
            # Interpreters: options, start-up code and module search paths.
            "PYTHONSTARTUP",
            "PYTHONPATH",
            "PYTHONHOME",
            "PYTHONUSERBASE",
            "PYTHONWARNINGS",
            "PYTHONBREAKPOINT",
            "PYTHONPYCACHEPREFIX",
            "NODE_OPTIONS",
            "NODE_PATH",
            "npm_config_*",
            "NPM_CONFIG_*",
            "PERL5OPT",
            "PERL5LIB",
            "PERLLIB",
            "PERL5DB",
            "RUBYOPT",
            "RUBYLIB",
            # Values a program runs as a shell command (wrappers.COMMAND_ENV; GIT_* below).
            "EDITOR",
            "VISUAL",
            "PAGER",
            "MANPAGER",
            "SYSTEMD_PAGER",
            "LESSOPEN",
            "LESSCLOSE",
            "BROWSER",
            "SHELL",
            "SSH_ASKPASS",
            "RSYNC_RSH",
            "CVS_RSH",
            "FCEDIT",
            "RUSTC",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "RUSTDOC",
            # A program's options that can run a command, data programs trust
            # (toolkit_env.OPTION_HOOK_ENV), prompt strings an interactive bash expands.
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
            "CARGO_BUILD_*",
            "CARGO_HOME",
            "JAVA_TOOL_OPTIONS",
            "_JAVA_OPTIONS",
            "JDK_JAVA_OPTIONS",
            "PS0",
            "PS1",
            "PS2",
            "PS3",
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
            # Where programs read their configuration (and the commands in it) from.
            "HOME",
            "ZDOTDIR",
            "XDG_CONFIG_HOME",
            "XDG_CONFIG_DIRS",
            "GIT_*",
            "LESS",
            "LESSKEY*",
            "VIMINIT",
            "GVIMINIT",
            "EXINIT",
            "MYVIMRC",
            "VIM",
            "VIMRUNTIME",
            "MANOPT",
            "MAKEFILES",
            "OPENSSL_CONF",
            "OPENSSL_ENGINES",
            "OPENSSL_MODULES",
            "CURL_HOME",
            "WGETRC",
        ],
        description="Session variables (globs) a session may not set (set_env is refused, "
        "rule env.deny) and never passed to tools: loader, shell and interpreter hooks, "
        "values programs run as commands, and the variables that move where programs read "
        "their configuration from. Default: LD_*, BASH_ENV, PATH, PYTHONPATH, NODE_OPTIONS, "
        "EDITOR, PAGER, LESSOPEN, TAR_OPTIONS, ZIPOPT, MAKEFLAGS, PS1, HOME, XDG_CONFIG_HOME, "
        "GIT_* and similar.",
    )

    @field_validator("pass_", "deny")
    @classmethod
    def _name_globs(cls, v: list[str], info: ValidationInfo) -> list[str]:
        where = "[env] " + ("pass" if info.field_name == "pass_" else "deny") + " globs"
        return _plain_globs(v, where, names=True)


class AuditSection(_Section):
    redact: list[str] = Field(
        default_factory=list,
        description=(
            "Extra argument/header keys whose values the audit log redacts: as object keys and "
            "as name=value / name: value pairs inside strings (query strings, shell "
            "assignments). Names compare by words: 'X-Tenant-Id' also covers x_tenant_id. "
            "Default []."
        ),
    )


class ExampleSpec(_Section):
    """How an example's tool looks to the policy, when it is not a built-in catalogue tool."""

    category: ToolCategory | None = None
    arg_roles: (
        dict[
            str,
            Literal[
                "read_path",
                "write_path",
                "read_write_path",
                "command",
                "cwd",
                "url",
                "env",
                "session_env",
            ],
        ]
        | None
    ) = None
    egress: bool | None = None


def _not_json(value: Any, loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], str] | None:
    """The place and kind of the first value in ``value`` that a JSON call cannot hold (a
    TOML date or time, a NaN or infinite float), or None when it is all JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            found = _not_json(item, (*loc, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _not_json(item, (*loc, i))
            if found is not None:
                return found
    elif isinstance(value, datetime.date | datetime.time):  # datetime is a date
        return loc, (
            f"a TOML {type(value).__name__} ({value.isoformat()}) is no JSON value: a call's "
            "arguments are JSON, write it as a string"
        )
    elif isinstance(value, float) and not math.isfinite(value):
        return loc, f"{value} is no JSON number: a call's arguments are JSON"
    return None


class Example(_Section):
    """A call and the decision the policy must make for it; checked when the policy loads.
    Its arguments must be valid for the tool's parameters schema (a built-in's at load, a
    folder tool's when the broker or 'runtime policy check --tools-dir' checks again), and
    JSON values: no TOML date or time, no nan or inf."""

    name: str | None = None
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    profile: str | None = None
    spec: ExampleSpec = Field(default_factory=ExampleSpec)
    match: Action | None = Field(None, description="Expected action.")
    rule: str | None = Field(None, description="Expected rule id (with match).")
    not_match: Action | None = Field(None, description="An action the decision must not be.")

    @field_validator("arguments")
    @classmethod
    def _json_arguments(cls, v: dict[str, Any]) -> dict[str, Any]:
        # A call's arguments are JSON: a TOML datetime made the schema check raise a bare
        # ValueError (a traceback), and nan was reported as null, naming the wrong value.
        found = _not_json(v, ())
        if found is not None:
            raise LocatedError(found[1], found[0])
        return v

    @model_validator(mode="after")
    def _one_expectation(self) -> Example:
        if (self.match is None) == (self.not_match is None):
            raise ValueError("an example needs exactly one of 'match' or 'not_match'")
        if self.rule is not None and self.match is None:
            raise ValueError("'rule' goes with 'match'")
        return self


_MCP_IDENT = r"^[a-zA-Z0-9_-]{1,32}$"


#: Header names the client sets itself (framing, session, content negotiation): an entry
#: that set them could smuggle a second request or break the session the client keeps.
_RESERVED_HEADERS = frozenset(
    {
        "accept",
        "connection",
        "content-encoding",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "mcp-protocol-version",
        "mcp-session-id",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HEADER_VALUE_RE = re.compile(r"^[\t\x20-\x7e]{0,8192}$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: Prefix of a header value read from the broker's environment when the server is reached.
ENV_REFERENCE = "env:"
#: Fields that only a started (stdio) server has.
_COMMAND_ONLY = ("env", "network", "read_only", "memory_mb", "pids")


class McpServerEntry(_Section):
    """One ``[[mcp_servers]]`` entry: an external MCP server, either started by the broker
    inside the Linux sandbox (``command``, stdio; untrusted code) or reached by URL
    (``url``, Streamable HTTP through the egress gateway). Its tools are listed as
    ``<prefix>__<tool>``."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        json_schema_extra={"oneOf": [{"required": ["command"]}, {"required": ["url"]}]},
    )

    name: str = Field(pattern=_MCP_IDENT, description="Identifier of the server. Required.")
    url: Annotated[str, Field(pattern=r"^[hH][tT][tT][pP][sS]?://")] | None = Field(
        None,
        description="Streamable HTTP endpoint of a server reached over the network "
        "('https://mcp.example.com/mcp'); http or https only, no user info or fragment. "
        "Reached by the broker through the egress gateway under the [network] rules (deny, "
        "schemes, ports, private addresses, address pinning, redirects); the entry itself "
        "names this one origin (scheme, host, port) for this server's connection only, never "
        "for the network tools. Exactly one of command and url. Default: none.",
    )
    command: Annotated[list[str], Field(min_length=1)] | None = Field(
        None,
        description="argv of a stdio MCP server the broker starts in the sandbox: program "
        "then arguments; never run through a shell. Exactly one of command and url. "
        "Default: none.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with every request to a url server (Authorization, "
        "an API key). A value 'env:NAME' is read from the broker's environment when the "
        "server is reached, so secrets stay out of the policy file; the variable may not be "
        "one that [env] pass hands to sandboxed tools. Never written to the audit log. Only "
        "with url. Default: none.",
    )
    transport: Literal["streamable-http", "sse", "auto"] | None = Field(
        None,
        description="How a url server is spoken to: 'streamable-http' (MCP 2025-03-26 and "
        "later: one POST per message, answers as JSON or an SSE stream), 'sse' (the legacy "
        "HTTP+SSE transport of 2024-11-05: a GET stream held open, and the endpoint it names "
        "for POSTs, which must be on the server's own origin), or 'auto' (Streamable HTTP, "
        "then 'sse' when the server answers the first initialize POST with 400, 404 or 405, "
        "the spec's backwards-compatibility procedure). Only with url. "
        "Default: 'streamable-http'.",
    )
    prefix: str | None = Field(
        None,
        pattern=_MCP_IDENT,
        description="Tool name prefix: tools are listed as <prefix>__<tool>; it may not "
        "contain '__' or end with '_' (a name splits at its first '__'). Default: name.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment variables the server sees, beyond a minimal PATH, HOME, "
        "TMPDIR and LANG. Default: none.",
    )
    network: bool = Field(
        False,
        description="Share the host network (TCP/UDP sockets allowed). Default false: an "
        "empty network namespace.",
    )
    tools: list[str] | None = Field(
        None, description="Only import these tools of the server (remote names). Default: all."
    )
    read_only: list[str] = Field(
        default_factory=list,
        description="Host paths (absolute) bound read-only into the server's sandbox, beyond "
        "the system directories, its program's installation prefix and the absolute paths "
        "in its command and PYTHONPATH. Never /, a top-level or home directory, nor under "
        "/proc, /sys, /dev, /run, /var/run or /var/lib (refused at load); a path that does "
        "not exist or holds runtime state is refused when the server starts. Default: none.",
    )
    memory_mb: int = Field(
        2048, gt=0, le=65536, description="Address space and cgroup memory, MiB. Default 2048."
    )
    pids: int = Field(128, gt=0, le=4096, description="Processes+threads. Default 128.")
    start_timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Start-up, handshake and tool listing must finish within this, seconds. "
        "Default 30.",
    )
    enabled: bool = Field(
        True,
        description="Start this server and list its tools. false keeps the entry (validated, "
        "its name and prefix reserved) without starting it: its tools do not exist. "
        "Default true.",
    )

    @field_validator("url")
    @classmethod
    def _url_ok(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            parts = urlsplit(v)
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"url {v[:200]!r} is not a valid URL: {exc}") from exc
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError(f"url must be http or https, not {parts.scheme!r}")
        if not parts.hostname:
            raise ValueError("url needs a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("url may not carry user info: put credentials in headers")
        if parts.fragment or "#" in v:
            raise ValueError("url may not have a fragment")
        if port == 0:
            raise ValueError("url port 0 is not a port")
        if any(ord(c) < 0x21 or ord(c) == 0x7F for c in v):
            raise ValueError("url may not contain spaces or control characters")
        return v

    @field_validator("command")
    @classmethod
    def _not_both(cls, v: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if v is not None and info.data.get("url") is not None:
            raise ValueError(
                "'command' and 'url' exclude each other: a server is started (command) or "
                "reached (url), not both"
            )
        return v

    @field_validator(*_COMMAND_ONLY)
    @classmethod
    def _stdio_only(cls, v: Any, info: ValidationInfo) -> Any:
        # Field validators run only on values the file gave: a default never trips this.
        if info.data.get("url") is not None:
            raise ValueError(f"'{info.field_name}' applies to a started (command) server only")
        return v

    @field_validator("headers")
    @classmethod
    def _headers_ok(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if v and info.data.get("url") is None:
            raise ValueError("'headers' applies to a server reached by url only")
        for name, value in v.items():
            if not _HEADER_NAME_RE.match(name):
                raise ValueError(f"bad header name {name!r}")
            if name.lower() in _RESERVED_HEADERS:
                raise ValueError(f"header {name!r} is set by the client itself")
            if not _HEADER_VALUE_RE.match(value):
                # CR/LF would split the request; non-ASCII has no agreed wire encoding.
                raise ValueError(f"value of header {name!r} must be printable ASCII")
            if value.startswith(ENV_REFERENCE) and not _ENV_NAME_RE.match(
                value[len(ENV_REFERENCE) :]
            ):
                raise ValueError(f"header {name!r}: {value!r} names no environment variable")
        return v

    @field_validator("transport")
    @classmethod
    def _transport_ok(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and info.data.get("url") is None:
            raise ValueError("'transport' applies to a server reached by url only")
        return v

    @model_validator(mode="after")
    def _command_or_url(self) -> McpServerEntry:
        if self.command is None and self.url is None:
            raise ValueError("an mcp server needs 'command' (started) or 'url' (reached)")
        return self

    def header_variables(self) -> list[str]:
        """Names of the environment variables its headers are read from."""
        return [
            v[len(ENV_REFERENCE) :] for v in self.headers.values() if v.startswith(ENV_REFERENCE)
        ]

    @field_validator("command")
    @classmethod
    def _argv_ok(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return v
        if not v[0]:
            raise ValueError("command[0] must name a program")
        if any("\0" in part for part in v):
            raise ValueError("command items may not contain NUL")
        return v

    @field_validator("env")
    @classmethod
    def _env_ok(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not key or "=" in key or "\0" in key or "\0" in value:
                raise ValueError(f"invalid environment variable {key!r}")
        return v

    @field_validator("read_only")
    @classmethod
    def _paths_ok(cls, v: list[str]) -> list[str]:
        # The sandbox's own rule (runtime._bindable), its host-independent part: a path it
        # would never bind ('/', '/etc', '/home/x', '/proc/1') made the server fail when it
        # started, after the policy had loaded and checked. Existence and holding runtime
        # state depend on the host when the server starts, so they stay the sandbox's.
        for path in v:
            why = bindable_refusal(path)
            if why is not None:
                raise ValueError(f"read_only path {path[:200]!r} is never bound: {why}")
        return v

    @property
    def tool_prefix(self) -> str:
        return self.prefix or self.name


def check_mcp_servers(servers: list[McpServerEntry]) -> None:
    """Names and tool prefixes are unique, and a prefix neither contains the separator
    ``__`` nor ends with ``_`` (raises ValueError): a tool's name ``<prefix>__<tool>`` then
    splits at its first ``__`` into one prefix only (the proxy refuses remote tool names
    with ``__``), so no server can list a name that is another's (prefix ``a`` with a tool
    ``b__echo`` was ``a__b__echo`` of the server with prefix ``a__b``). The error is a
    LocatedError naming the later entry's field (``(i, "name")`` or ``(i, "prefix")``): the
    entry to change is the second one, not the first."""
    names: set[str] = set()
    prefixes: set[str] = set()
    for i, server in enumerate(servers):
        if server.name in names:
            raise LocatedError(f"mcp server {server.name!r} is defined twice", (i, "name"))
        prefix = server.tool_prefix
        # The prefix is the name when none is given: the field to change is the one set.
        prefix_field = "prefix" if server.prefix is not None else "name"
        if "__" in prefix or prefix.endswith("_"):
            what = "prefix" if server.prefix is not None else "name (its default prefix)"
            raise LocatedError(
                f"mcp server {server.name!r}: the {what} {prefix!r} contains '__' or ends "
                "with '_'; tools are named <prefix>__<tool>, split at the first '__'"
                + ("" if server.prefix is not None else ": set a prefix"),
                (i, prefix_field),
            )
        if prefix in prefixes:
            raise LocatedError(
                f"mcp prefix {server.tool_prefix!r} is used twice", (i, prefix_field)
            )
        names.add(server.name)
        prefixes.add(server.tool_prefix)


class PolicyFile(_Section):
    """A policy file (TOML). Default deny: a call no rule allows is refused."""

    version: Literal[1] = Field(1, description="Schema version. Default 1.")
    description: str | None = None
    default: Action = Field("deny", description="Action when no rule matches. Default deny.")
    sandbox: SandboxSection = Field(default_factory=SandboxSection)
    limits: GlobalLimits = Field(default_factory=GlobalLimits)
    tools: dict[str, Action | ToolEntry] = Field(
        default_factory=dict,
        description="Per tool (name or glob): an action, or a table with action, limits, budget.",
    )
    categories: dict[ToolCategory, Action] = Field(
        default_factory=dict,
        description="Action per tool category (file, shell, code, network, system, data, "
        "memory, interaction, custom, mcp); another name is refused. Default: none.",
    )
    rules: list[Rule] = Field(default_factory=list, description="Conditional tool rules.")
    paths: PathsSection = Field(default_factory=PathsSection)
    commands: CommandsSection = Field(default_factory=CommandsSection)
    network: NetworkRules = Field(default_factory=NetworkRules)
    profiles: dict[str, ProfileSection] = Field(default_factory=dict)
    env: EnvSection = Field(default_factory=EnvSection)
    audit: AuditSection = Field(default_factory=AuditSection)
    examples: list[Example] = Field(default_factory=list)
    mcp_servers: list[McpServerEntry] = Field(
        default_factory=list,
        description="External MCP servers: started inside the Linux sandbox (command, stdio) "
        "or reached by URL through the egress gateway (url, Streamable HTTP); their tools are "
        "decided, validated and audited like built-ins. Default: none.",
    )

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, v: dict[str, Action | ToolEntry]) -> dict[str, Action | ToolEntry]:
        for name in v:
            try:
                refuse_braces(name, "[tools] names")
                refuse_leading_bang(name, "[tools] names")
            except ValueError as exc:
                raise LocatedError(str(exc), (name,)) from None
        return v

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, v: list[McpServerEntry]) -> list[McpServerEntry]:
        check_mcp_servers(v)
        return v

    @model_validator(mode="after")
    def _header_secrets_stay(self) -> PolicyFile:
        # A header read from the broker's environment (a bearer token) must not also be
        # handed to every sandboxed tool through [env] pass: the tool could send it anywhere
        # the network rules allow, or print it into its result.
        for i, server in enumerate(self.mcp_servers):
            for name in server.header_variables():
                if any(fnmatchcase(name, d) for d in self.env.deny):
                    continue
                if any(fnmatchcase(name, p) for p in self.env.pass_):
                    raise LocatedError(
                        f"mcp_servers.{i}.headers reads {name!r} from the environment, and "
                        f"[env] pass hands {name!r} to sandboxed tools: add it to [env] deny "
                        "or rename the variable",
                        ("mcp_servers", i, "headers"),
                    )
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> PolicyFile:
        seen: set[str] = set()
        ids: list[tuple[str, tuple[str | int, ...]]] = [
            (r.id, ("rules", i, "id")) for i, r in enumerate(self.rules)
        ] + [(r.id, ("commands", "rules", i, "id")) for i, r in enumerate(self.commands.rules)]
        for rule_id, loc in ids:
            if rule_id == "default" or rule_id.startswith(_RESERVED_PREFIXES):
                raise LocatedError(f"rule id {rule_id!r} uses a reserved built-in prefix", loc)
            if rule_id in seen:
                raise LocatedError(f"duplicate rule id {rule_id!r}", loc)
            seen.add(rule_id)
        return self


def schema_text() -> str:
    """The text of ``policy/policy.schema.json``."""
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def json_schema() -> dict[str, Any]:
    schema = PolicyFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://github.com/runtime/policy.schema.json"
    return schema
