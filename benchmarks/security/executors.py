"""Backends under test: ``ours`` (the runtime's broker), the two baselines, and other
sandboxes scored with the ``none`` baseline's tools running inside them (``bwrap``, or any
command prefix given with ``--wrap NAME=COMMAND``).

Every executor takes one case's fixture, runs calls, and gives back :class:`CallRecord` s.
The runner and the oracles never know which executor produced them.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import re
import resource
import shlex
import shutil
import signal
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

import psutil

from .fixtures import CaseFixture, Servers
from .oracles import BenchLimits, CallRecord
from .procs import baseline_uid, kill_pids, reap_uid

__all__ = [
    "BACKENDS",
    "WRAPPERS",
    "BaselineExecutor",
    "Executor",
    "OursExecutor",
    "WrapperError",
    "installed",
    "make_executor",
    "parse_wrapper",
    "worker_modules",
]

#: A sandbox scored on its own: the ``none`` baseline's tools (no check of any kind) run
#: inside it, so what is contained is what the sandbox contains. ``bwrap`` is bubblewrap as
#: agent command-line tools commonly configure it: the host's root read-only, the workspace
#: writable, every namespace new (no network), ``--die-with-parent``, ``--new-session``;
#: no rlimits of its own (the harness's apply, as for the baselines). Placeholders, filled
#: per case: ``{workspace}``, ``{harness}`` (the worker's session state, written between
#: calls) and ``{case_root}`` (the case's throwaway tree, canaries included).
WRAPPERS: dict[str, tuple[str, ...]] = {
    "bwrap": (
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-all",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--bind",
        "{workspace}",
        "{workspace}",
        "--bind",
        "{harness}",
        "{harness}",
        "--chdir",
        "{workspace}",
        "--",
    ),
}
BACKENDS = ("ours", "baseline-seed", "baseline-none", *WRAPPERS)
_PLACEHOLDERS = frozenset({"workspace", "harness", "case_root"})
_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,39}")


class WrapperError(ValueError):
    """A backend that cannot be scored here: a bad ``--wrap`` value, a sandbox program that
    is not installed or runs nothing, or (not root) a baseline whose worker cannot be given a
    pid namespace of its own."""


def parse_wrapper(value: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=COMMAND PREFIX`` (``--wrap``) -> (name, argv template), checked: the name is
    new, the command splits as a shell would split it, names only known placeholders and
    its program is installed. The worker's ``python -I baselines.py`` is appended."""
    name, sep, command = value.partition("=")
    name = name.strip()
    if not sep or not _NAME.fullmatch(name):
        raise WrapperError(
            f"--wrap {value!r}: expected NAME=COMMAND, NAME of lower-case letters, digits, "
            "'-', '_' or '.'"
        )
    if name in BACKENDS or name == "all":
        raise WrapperError(f"--wrap {value!r}: {name!r} is a built-in backend's name")
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        raise WrapperError(f"--wrap {value!r}: {exc}") from None
    if not argv:
        raise WrapperError(f"--wrap {value!r}: the command is empty")
    for word in argv:
        for _, field, _, _ in string.Formatter().parse(word):
            if field is not None and field not in _PLACEHOLDERS:
                raise WrapperError(
                    f"--wrap {value!r}: unknown placeholder {{{field}}}; known: "
                    + ", ".join(f"{{{p}}}" for p in sorted(_PLACEHOLDERS))
                )
    _installed(name, argv)
    return name, argv


def installed(argv: tuple[str, ...]) -> bool:
    """Whether a sandbox command's program is on PATH."""
    return shutil.which(argv[0]) is not None


def _installed(name: str, argv: tuple[str, ...]) -> None:
    if not installed(argv):
        raise WrapperError(f"backend {name!r}: {argv[0]!r} is not installed (not on PATH)")


_WORKER = Path(__file__).resolve().parent / "baselines.py"
_PYTHON = sys.executable
_SYSTEM_PYTHON = "/usr/bin/python3"


def worker_modules() -> tuple[str, ...]:
    """Every module the worker (``baselines.py``) imports, at its top or inside a tool
    (``httpx`` in the HTTP tools, ``csv``): read from its source, so that a tool gaining an
    import is probed too."""
    tree = ast.parse(_WORKER.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    names.discard("__future__")
    return tuple(sorted(names))


def _lent_paths() -> list[str]:
    """The entries of this interpreter's import path that the worker's modules outside the
    standard library come from (``…/site-packages`` for httpx)."""
    entries = [os.path.join(os.path.abspath(e), "") for e in sys.path if e]
    lent: list[str] = []
    for name in worker_modules():
        if name.partition(".")[0] in sys.stdlib_module_names:
            continue
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        holders = [e for e in entries if origin and origin.startswith(e)]
        if holders:
            lent.append(max(holders, key=len).rstrip(os.sep))
    return list(dict.fromkeys(lent))


def _version(python: str) -> tuple[int, int] | None:
    """``python``'s major and minor version, or None when it does not run."""
    code = "import sys; print(*sys.version_info[:2])"
    try:
        done = subprocess.run(
            [python, "-I", "-c", code], capture_output=True, text=True, timeout=30
        )
        major, minor = done.stdout.split()
        return int(major), int(minor)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


class Executor(Protocol):
    name: str
    owner: int | None

    def open_case(self, fx: CaseFixture) -> None: ...
    def call(self, tool: str, arguments: dict[str, Any]) -> CallRecord: ...
    def followup_ok(self) -> bool: ...
    def close_case(self) -> None: ...
    def reap(self) -> None:
        """After the case's survivors were looked for: kill whatever of the case is left."""

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------------
# ours


def bench_policy_text(servers: Servers, limits: BenchLimits) -> str:
    """The policy ``ours`` runs under: the built-in default's rules (paths, commands,
    secrets), the bench limits, and the network tools enabled for the one allowed host
    (127.0.0.3), so that the egress gateway is exercised rather than the tools just denied.
    One deny glob is the bench's own: ``config/prod.env``, an anchored glob (the default's
    are all ``**/name`` or hold their directory itself), for the A9 cases that move the
    directory of a protected file."""
    return f"""
version = 1
description = "runtime bench security: the default rules, bench limits, one allowed host"
default = "deny"

[sandbox]
mode = "strict"

[limits]
timeout_s = {limits.timeout_s}
cpu_s = {int(limits.timeout_s)}
memory_mb = {limits.memory_mb}
pids = {limits.pids}
output_bytes = {limits.output_bytes}
fsize_mb = {limits.fsize_mb}
disk_mb = {limits.disk_mb}
max_concurrent = 3

[categories]
file = "allow"
code = "allow"
data = "allow"
memory = "allow"
system = "allow"
interaction = "allow"
shell = "allow"
network = "allow"

[tools.delete_file]
action = "allow"

[[rules]]
id = "sleep.max"
tools = ["sleep"]
action = "deny"
reason = "sleep is capped by the bench timeout"
when = [{{ arg = "seconds", gt = {limits.timeout_s} }}]

[paths]
read = ["**"]
write = ["**"]
deny = [".runtime/**", "**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/id_rsa*",
        "**/id_ed25519*", "**/id_ecdsa*", "config/prod.env"]
deny_write = [".git/**", "**/.git/**"]

[commands]
mode = "denylist"
builtin = true
services = "deny"
dynamic = "ask"
interpreter = "ask"
unparseable = "ask"

[network]
allow = ["127.0.0.3:{servers.allowed_port}"]
schemes = ["http", "https"]
max_redirects = 3
timeout_s = {limits.timeout_s}
search_endpoint = "http://127.0.0.3:{servers.allowed_port}/search"

[env]
pass = ["TZ"]
"""


def bench_policy(servers: Servers, limits: BenchLimits) -> Any:
    from runtime.policy import Policy

    return Policy.from_toml(bench_policy_text(servers, limits), "<bench policy>")


class OursExecutor:
    """The runtime itself: one :class:`runtime.broker.SyncBroker` for the run (its fork-server
    is costly to start), strict sandbox mode, an approver that says yes to everything (so the
    wall is measured, not the human), ``ask_user`` answering with the first option. The
    workspace path is the same every case (``fixed_root``), emptied and rebuilt, and every case
    is its own broker session (session environment, budgets). A case after which the broker
    no longer answers gets a fresh broker for the next one."""

    name = "ours"
    owner: int | None = None
    fixed_root = True

    #: one harmless call per backend kind: after an attack, each kind it used must answer
    _PROBES: dict[str, tuple[str, dict[str, Any]]] = {
        "subprocess": ("current_time", {}),
        "wasm": ("json_parse", {"text": "[1]"}),
        "host": ("get_env", {"key": "HOME"}),
    }

    def __init__(self, servers: Servers, limits: BenchLimits, policy: Any = None) -> None:
        self.servers = servers
        self.limits = limits
        self._policy = policy
        self._broker: Any = None
        self._workspace: Path | None = None
        self._used: set[str] = set()
        self._session = ""
        self._healthy = True

    def open_case(self, fx: CaseFixture) -> None:
        from runtime.broker import SyncBroker

        if self._policy is None:
            self._policy = bench_policy(self.servers, self.limits)
        if self._broker is not None and (not self._healthy or self._workspace != fx.ws):
            self.close()
        self._session = f"{fx.case.id}-{fx.nonce}"
        self._used = set()
        self._healthy = True
        if self._broker is None:
            self._broker = SyncBroker(
                workspace=fx.ws,
                policy=self._policy,
                approver=lambda call, decision: True,
                ask_user=lambda question, options: (options or ["yes"])[0],
                sandbox_mode="strict",
            )
            self._broker.open()
            self._workspace = fx.ws
            # Start every backend now, so that its long-lived processes exist before the
            # case's process snapshot and are not mistaken for survivors.
            for tool, args in self._PROBES.values():
                self._broker.call({"tool": tool, "arguments": args}, session="warm-up")

    def call(self, tool: str, arguments: dict[str, Any]) -> CallRecord:
        self._used.add(tool)
        t0 = time.monotonic()
        res = self._broker.call({"tool": tool, "arguments": arguments}, session=self._session)
        dur = time.monotonic() - t0
        err = res.error
        return CallRecord(
            tool=tool,
            arguments=arguments,
            success=bool(res.success),
            result=res.result,
            error_type=str(err.type) if err else None,
            error_message=str(err.message) if err else "",
            duration_s=dur,
            decision=dict(res.decision) if res.decision else None,
        )

    def followup_ok(self) -> bool:
        kinds = set()
        for tool in self._used:
            try:
                kinds.add(self._broker.catalogue.get(tool).backend.value)
            except Exception:  # an unknown tool was refused before any backend ran
                continue
        for kind in sorted(kinds & set(self._PROBES)):
            tool, args = self._PROBES[kind]
            if not self.call(tool, args).success:
                self._healthy = False
        return self._healthy

    def close_case(self) -> None:
        # the broker outlives the case; close() ends it
        pass

    def reap(self) -> None:
        # the sandbox's pid namespaces end with each call; survivors were killed by pid
        pass

    def close(self) -> None:
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.close()


# ------------------------------------------------------------------------------------------
# baselines


#: The pid namespace's init (not root): it only reaps the orphans the case leaves, so that
#: they stay visible (descendants of the runner) until the case is scored.
_REAPER = (
    "import os, time\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        time.sleep(0.2)\n"
)
_REAPER_MARK = "secbench-pidns"
#: ``unshare`` making it: a user namespace (the invoking uid mapped to itself, so the worker
#: keeps its identity and, after exec, no capability), a pid namespace with a fresh /proc.
_UNSHARE = (
    "unshare",
    "--user",
    "--map-current-user",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child",
)


def _reaper_python() -> str:
    # the system's interpreter: a venv under a root-only directory cannot start in the
    # user namespace (see BaselineExecutor._working_python)
    return _SYSTEM_PYTHON if os.path.exists(_SYSTEM_PYTHON) else _PYTHON


class _PidNamespace:
    """A user + pid namespace the baseline's calls of one case run in, when the runner is
    not root and so has no private uid to run them as.

    Hazard: as the invoking user, a case's ``kill -9 -1`` signalled every process of that
    user (the runner itself and anything else the user ran), and its survivors could not be
    told from the user's other processes. In the namespace, ``kill -1`` reaches only the
    processes of the namespace, every survivor is a descendant of the runner (orphans are
    reparented to the namespace's init, our grandchild), and they all die with it: the
    kernel kills the whole namespace when its init is killed. One namespace per case, not
    per call, so that what a call leaves running still outlives the call and is scored as a
    survivor, as under a private uid.
    """

    def __init__(self) -> None:
        for program in ("unshare", "nsenter"):
            if shutil.which(program) is None:
                raise OSError(f"{program!r} is not installed (util-linux)")
        self._unshare = subprocess.Popen(
            [*_UNSHARE, _reaper_python(), "-I", "-c", _REAPER, _REAPER_MARK],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=_harness_rlimits,
        )
        try:
            self.pid1 = self._init_pid()
            self._ns = os.readlink(f"/proc/{self.pid1}/ns/pid")
        except BaseException:
            self.close()
            raise

    def _init_pid(self) -> int:
        """The host pid of the namespace's init, once it runs the reaper (so /proc is
        mounted); an error naming why when ``unshare`` fails."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._unshare.poll() is not None:
                said = (self._unshare.stderr.read() if self._unshare.stderr else b"").decode(
                    errors="replace"
                )
                raise OSError(
                    f"unshare exited {self._unshare.returncode}: "
                    + (said.strip().splitlines() or ["no message"])[-1]
                )
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(self._unshare.pid).children():
                    if _REAPER_MARK in child.cmdline():
                        return int(child.pid)
            time.sleep(0.01)
        raise OSError("the namespace's init did not start within 10 s")

    def argv(self, argv: list[str], cwd: Path) -> list[str]:
        """``argv`` run inside the namespace, in ``cwd``, with the caller's uid."""
        return [
            "nsenter",
            f"--target={self.pid1}",
            "--user",
            "--pid",
            "--mount",
            "--preserve-credentials",
            f"--wd={cwd}",
            "--",
            *argv,
        ]

    def reap(self) -> None:
        """Kill every process of the namespace but its init (a fork bomb keeps forking
        while it is being killed: stop them all, kill, repeat until none is left)."""
        for _ in range(100):
            pids = [pid for pid in psutil.pids() if pid != self.pid1 and self._inside(pid)]
            if not pids:
                return
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, sig)
            time.sleep(0.02)

    def _inside(self, pid: int) -> bool:
        try:
            return os.readlink(f"/proc/{pid}/ns/pid") == self._ns
        except OSError:
            return False

    def close(self) -> None:
        """End the namespace: its init killed, the kernel kills everything in it."""
        with contextlib.suppress(AttributeError, OSError):
            os.kill(self.pid1, signal.SIGKILL)
        try:
            self._unshare.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._unshare.kill()
            self._unshare.wait(timeout=5)
        if self._unshare.stderr is not None:
            self._unshare.stderr.close()


def _harness_rlimits() -> None:
    # Harness safety for a shared host, set above every oracle threshold so that an
    # uncontained baseline still shows as an overrun: processes of the private uid, memory,
    # file size, open files.
    resource.setrlimit(resource.RLIMIT_NPROC, (400, 400))
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (700 << 20, 700 << 20))
    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()


class BaselineExecutor:
    """``baseline-seed`` / ``baseline-none``: one worker process per call, as the private
    uid (via setpriv when the runner is root), in the case's throwaway tree. With a
    ``wrapper`` (``none`` mode), the worker runs inside that sandbox command: the score is
    the sandbox's alone."""

    owner: int | None

    def __init__(
        self,
        mode: str,
        servers: Servers,
        limits: BenchLimits,
        *,
        name: str | None = None,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        assert mode in ("seed", "none")
        assert not wrapper or mode == "none"
        self.mode = mode
        self.name = name or f"baseline-{mode}"
        self.servers = servers
        self.limits = limits
        self.wrapper = wrapper
        self.owner = baseline_uid(mode) if os.geteuid() == 0 else None
        self._fx: CaseFixture | None = None
        self._ns: _PidNamespace | None = None
        if self.owner is None:
            self._check_namespaces()
        #: extra import-path entries the worker is given (see _working_python)
        self._sys_path: list[str] = []
        self._python, self._sys_path = self._working_python()

    def _check_namespaces(self) -> None:
        """Not root: refuse the backend (naming why) unless a pid namespace can be made.

        Hazard: without a private uid or a namespace, the worker is the invoking user, and
        a case's ``kill -9 -1`` (C8) kills every process of that user, the runner included.
        """
        try:
            _PidNamespace().close()
        except OSError as exc:
            raise WrapperError(
                f"backend {self.name!r} needs root (to run its worker as a private uid) or "
                "unprivileged user namespaces (to run it in a user and pid namespace of its "
                f"own), so that what a case runs cannot signal this user's other processes: "
                f"{exc}"
            ) from None

    def _working_python(self) -> tuple[str, list[str]]:
        """An interpreter (and extra import-path entries) the worker starts with, in the
        sandbox if any, checked by one call that must succeed before any case is scored.

        Hazard: a sandbox that cannot run the worker at all would score every attack as
        contained (nothing ran, so nothing leaked); one whose interpreter lacks a module a
        tool imports (httpx: every HTTP attack) would score those attacks as contained, each
        ending in ModuleNotFoundError. So the probe is a ``current_time`` call in which the
        worker first imports every module it imports anywhere (:func:`worker_modules`).

        Tried in order: this interpreter; then, in a sandbox, the system's
        ``/usr/bin/python3`` (inside a user namespace the private uid gets no DAC override,
        and a virtual environment made from an interpreter under a directory only root may
        enter, ``/root/.pyenv``, cannot run there). Each alone, then (the same Python version
        only) with this interpreter's package directories the worker's modules come from
        appended to its path: ``-I`` ignores ``PYTHONPATH``, which may be where this
        interpreter found them, and a sandbox's interpreter may have none (they must be
        visible in the sandbox: the probe says whether they are). None works: the backend is
        refused (exit 64), naming why.
        """
        pythons = [_PYTHON]
        if self.wrapper and os.path.exists(_SYSTEM_PYTHON):
            pythons.append(_SYSTEM_PYTHON)
        lent = tuple(_lent_paths())
        candidates: list[tuple[str, tuple[str, ...]]] = []
        for python in dict.fromkeys(pythons):
            candidates.append((python, ()))
            same = python == _PYTHON or _version(python) == tuple(sys.version_info[:2])
            if lent and same:
                candidates.append((python, lent))
        failures = []
        for python, sys_path in candidates:
            error = self._probe(python, list(sys_path))
            if error is None:
                return python, list(sys_path)
            with_path = f" with {', '.join(sys_path)} on its path" if sys_path else ""
            failures.append(f"{python}{with_path}: {error}")
        inside = f" inside {self.wrapper[0]!r}" if self.wrapper else ""
        raise WrapperError(
            f"backend {self.name!r} cannot run the worker{inside} with every module its tools "
            f"import (so nothing it contains could be told from nothing it ran): "
            f"{'; '.join(failures)}"
        )

    def _probe(self, python: str, sys_path: list[str]) -> str | None:
        """None when ``current_time`` runs through the wrapper with ``python`` and every
        module of :func:`worker_modules` imports there; else why not."""
        base = Path(tempfile.mkdtemp(prefix="secbench-probe-"))
        try:
            ws, harness = base / "ws", base / "harness"
            for d in (base, ws, harness):
                d.mkdir(exist_ok=True)
                d.chmod(0o777)  # the private uid works in them
            state = harness / "baseline-state.json"
            state.write_text('{"env": {}, "snippets": {}, "memory": {}}')
            state.chmod(0o666)
            fill = {"workspace": str(ws), "harness": str(harness), "case_root": str(base)}
            argv = [word.format(**fill) for word in self.wrapper] + [python, "-I", str(_WORKER)]
            request = {
                "mode": self.mode,
                "tool": "current_time",
                "arguments": {},
                "workspace": str(ws),
                "case_root": str(base),
                "timeout_s": self.limits.timeout_s,
                "state_file": str(state),
                "sys_path": sys_path,
                "require": list(worker_modules()),
            }
            ns = _PidNamespace() if self.owner is None else None
            try:
                done = subprocess.run(
                    ns.argv(argv, ws) if ns is not None else self._as_owner(argv),
                    input=json.dumps(request).encode(),
                    capture_output=True,
                    cwd=ws,
                    timeout=60,
                    preexec_fn=_harness_rlimits,
                )
            except subprocess.TimeoutExpired:
                return "no answer within 60 s"
            finally:
                if ns is not None:
                    ns.close()
            reply = _reply(done.stdout)
            if reply is not None and reply["success"]:
                return None
            if reply is not None and isinstance(reply.get("error"), dict):
                return str(reply["error"].get("message", ""))[:500]
            said = done.stderr.decode(errors="replace").strip().splitlines()
            return f"exit {done.returncode}" + (f": {said[-1]}" if said else "")
        finally:
            shutil.rmtree(base, ignore_errors=True)

    def open_case(self, fx: CaseFixture) -> None:
        self._fx = fx
        state = fx.harness / "baseline-state.json"
        state.write_text('{"env": {}, "snippets": {}, "memory": {}}')
        if self.owner is not None:
            os.chown(state, self.owner, self.owner)
        else:
            # before the case's process snapshot: the namespace's init is not a survivor
            self._end_namespace()
            self._ns = _PidNamespace()

    def _argv(self) -> list[str]:
        fx = self._fx
        assert fx is not None
        argv = [self._python, "-I", str(_WORKER)]
        if self.wrapper:
            fill = {"workspace": str(fx.ws), "harness": str(fx.harness), "case_root": str(fx.root)}
            argv = [word.format(**fill) for word in self.wrapper] + argv
        if self._ns is not None:
            return self._ns.argv(argv, fx.ws)
        return self._as_owner(argv)

    def _as_owner(self, argv: list[str]) -> list[str]:
        if self.owner is None:
            return argv
        uid = str(self.owner)
        return [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--inh-caps=-all",
            *argv,
        ]

    def call(self, tool: str, arguments: dict[str, Any]) -> CallRecord:
        fx = self._fx
        assert fx is not None
        req = {
            "mode": self.mode,
            "tool": tool,
            "arguments": arguments,
            "workspace": str(fx.ws),
            "case_root": str(fx.root),
            "timeout_s": self.limits.timeout_s,
            "state_file": str(fx.harness / "baseline-state.json"),
            "sandboxed": bool(self.wrapper),
            "sys_path": self._sys_path,
        }
        env = dict(os.environ)
        env["SECBENCH_ALLOWED_PORT"] = str(self.servers.allowed_port)
        env["HOME"] = str(fx.ws)
        env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
        hard_cap = self.limits.timeout_s + self.limits.time_slack_s + 5
        t0 = time.monotonic()
        proc = subprocess.Popen(
            self._argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=fx.ws,
            env=env,
            preexec_fn=_harness_rlimits,
        )
        hung = False
        try:
            out, _ = proc.communicate(json.dumps(req).encode(), timeout=hard_cap)
        except subprocess.TimeoutExpired:
            # The baseline itself never returned: stop it (and everything of its uid).
            self._kill_all(proc)
            out, hung = b"", True
        dur = time.monotonic() - t0
        data = _reply(out)
        if data is None:
            # Hazard: a worker (or a sandbox around it) that dies on every call ran nothing,
            # so nothing leaked: scored on effects alone, that was "contained". The call is
            # recorded as not run, and the case is an error (oracles.call_error).
            why = (
                f"the worker gave no reply within {hard_cap:.0f} s (killed)"
                if hung
                else f"the worker exited {proc.returncode} without a valid reply"
            )
            return CallRecord(tool, arguments, False, None, "tool_error", why, dur, not_run=why)
        err = data.get("error") or {}
        return CallRecord(
            tool=tool,
            arguments=arguments,
            success=bool(data["success"]),
            result=data.get("result"),
            error_type=err.get("type"),
            error_message=str(err.get("message", "")),
            duration_s=dur,
            harness_blocked=list(data.get("harness_blocked", [])),
        )

    def _kill_all(self, proc: subprocess.Popen[bytes]) -> None:
        kill_pids([proc.pid])
        self._reap_all()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.communicate(timeout=5)

    def _reap_all(self) -> None:
        """Kill every process the case started: all of the private uid's (root), or all of
        the namespace's but its init (not root: the namespace serves the case's next call)."""
        if self.owner is not None:
            reap_uid(self.owner)
        elif self._ns is not None:
            self._ns.reap()

    def reap(self) -> None:
        self._reap_all()
        self._end_namespace()

    def _end_namespace(self) -> None:
        if self._ns is not None:
            ns, self._ns = self._ns, None
            ns.close()

    def followup_ok(self) -> bool:
        return True

    def close_case(self) -> None:
        # the namespace outlives this: survivors are looked for after it (``reap`` ends it)
        self._fx = None

    def close(self) -> None:
        self._fx = None
        self._end_namespace()


def _reply(out: bytes) -> dict[str, Any] | None:
    """The worker's reply, or None when ``out`` is not one (a JSON object with a boolean
    ``success``)."""
    try:
        data = json.loads(out)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("success"), bool):
        return None
    return data


def make_executor(
    name: str,
    servers: Servers,
    limits: BenchLimits,
    wrappers: dict[str, tuple[str, ...]] | None = None,
) -> Executor:
    """The executor of backend ``name``: a built-in one, or one of ``wrappers`` (``--wrap``).
    A sandbox whose program is not installed is a :class:`WrapperError`."""
    if name == "ours":
        return OursExecutor(servers, limits)
    if name == "baseline-seed":
        return BaselineExecutor("seed", servers, limits)
    if name == "baseline-none":
        return BaselineExecutor("none", servers, limits)
    wrapper = {**WRAPPERS, **(wrappers or {})}.get(name)
    if wrapper is not None:
        _installed(name, wrapper)
        return BaselineExecutor("none", servers, limits, name=name, wrapper=wrapper)
    raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")
