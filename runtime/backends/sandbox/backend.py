"""The broker side of the Linux sandbox: starts the zygote, runs calls, maps every outcome.

One zygote per backend. For each call the backend makes a socketpair, hands the child end to
the zygote (SCM_RIGHTS), and then talks to the sandboxed child directly: it writes the call
frame, answers the child's broker requests, reads one result frame with the size capped
while reading, and waits for the zygote's exit report (after a result, a short while only:
``_EXIT_AFTER_FRAME_S``; a result read by the deadline is the outcome, not a timeout). The
child is hostile: anything but a well-formed result becomes a typed :mod:`runtime.errors`
exception, and the broker lives on.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.lowlevel

from runtime import _speedups
from runtime.backends.base import ExecOutcome, ExecRequest, Fingerprint
from runtime.backends.sandbox import pid1, walls
from runtime.backends.sandbox._binds import check_read_only, unreadable_code
from runtime.backends.sandbox._channels import (
    CallChannel,
    ControlChannel,
    DeadlinePassed,
    Oversized,
    Unsendable,
    loop_waker,
)
from runtime.backends.sandbox._outcome import denied_write, outcome, workspace_problem
from runtime.backends.sandbox._outcome import details as _details  # noqa: F401 (tests use it)
from runtime.backends.sandbox._outcome import usage as call_usage
from runtime.backends.sandbox._prespawn import PrespawnedZygote, spawn_zygote
from runtime.backends.sandbox._profile import plan_profile
from runtime.backends.sandbox.masks import MaskSpec
from runtime.backends.sandbox.newroot import WORKSPACE
from runtime.errors import (
    ExecutionError,
    ResourceLimitExceeded,
    RuntimeToolError,
    SandboxError,
    SandboxUnavailable,
    ToolFailed,
    ToolTimeout,
)
from runtime.frames import FrameError, result_frame_bound
from runtime.models import ToolSpec, WorkspaceAccess
from runtime.toolkit import builtin_tools_dir, is_builtin

__all__ = ["DISABLE_NAMES", "MAX_REFUSED_REQUESTS", "SANDBOX_UID", "SandboxBackend"]

log = logging.getLogger("runtime.sandbox")

#: Mechanisms a test may switch off (test-only: shows each wall matters on its own).
DISABLE_NAMES = frozenset(
    {
        "userns",
        "mountns",
        "pidns",
        "netns",
        "landlock",
        "seccomp",
        "rlimits",
        "cgroup",
        "capdrop",
        # The directories above masked entries bound onto themselves in writing calls
        # (``masks.MaskSpec.pin``): without them a rename carries a secret out of its glob.
        "mask_pins",
        # A call with narrowed write globs keeps a writable workspace (no read-only mount
        # under its write prefixes' binds, ``_narrow.write_binds``): Landlock alone confines
        # it, and metadata (chmod, chown, utimes) is not Landlock's.
        "narrow_mounts",
        # The tool process left dumpable: a program it runs may read its memory, a copy of
        # the zygote's heap (``child._tool``).
        "nondumpable",
    }
)
#: Host uid/gid the sandbox runs as when the broker is root (unprivileged, otherwise unused).
SANDBOX_UID = 2_000_000_000
_START_TIMEOUT_S = 60.0
_EXIT_WAIT_S = 30.0
#: How long a call's processes have to exit after its last frame (a result, an error)
#: before the broker ends them (still within the call's timeout): the frame is the call's
#: outcome, and a tool that sent it and then sleeps no longer holds the call until its
#: timeout. A tool exits right after its frame (``child._serve``); this is slack for a
#: loaded machine.
_EXIT_AFTER_FRAME_S = 2.0
_MAX_REFS = 1024
#: Distinct call profiles whose static plan part is kept (see ``_static_plan``).
_MAX_PLANS = 256
#: A fork-server found gone is started again by the next call, at most this many times in
#: ``_RESTART_WINDOW_S`` seconds; past that, calls fail until the window has room again (a
#: fork-server that dies at once would otherwise be restarted by every call).
_MAX_RESTARTS = 3
_RESTART_WINDOW_S = 60.0
#: Broker requests of one call that may be refused (by its handler: egress or ask_user not
#: granted, an op that does not exist; or malformed, or made with no channel to answer
#: them). Past it the broker answers no more and ends the call as a ``resource_limit``
#: (``limit: broker_requests``). A refusal costs the broker a decode of the request and a
#: check, and a tool refused this often is not doing its work: it is looping. Granted
#: requests are not counted: each is work done for the tool (a page fetched, a question
#: asked), bounded by the call's timeout.
MAX_REFUSED_REQUESTS = 256


@dataclass(slots=True)
class _Call:
    """One call in flight: what both drivers (``run`` and ``run_sync``) learn about it."""

    call_id: int
    channel: CallChannel
    theirs: socket.socket
    spawn: dict[str, Any]
    started: float
    terminal: dict[str, Any] | None = None
    #: The last broker request the handler refused (its error, no traceback: see
    #: ``_answer``), and how many were refused in all (those answered without the handler
    #: included). Nothing else of a request outlives its answer.
    refused: RuntimeToolError | None = None
    refused_count: int = 0
    #: Broker requests the child made, answered or not: after one, the tool was running.
    requests: int = 0
    #: The call was ended for making more than MAX_REFUSED_REQUESTS refused requests.
    flooded: bool = False
    frame_error: FrameError | None = None
    exit_report: dict[str, Any] | None = None
    #: No last frame (result, error, set-up error) by the call's deadline: a timeout. A
    #: call that sent one in time is not, whenever its processes exit (``_answered``).
    timed_out: bool = False


class SandboxBackend:
    """Linux subprocess sandbox.

    ``mode``: ``strict`` (default) refuses to start when user namespaces, Landlock or
    seccomp are missing; ``best_effort`` runs with what exists (see :meth:`fingerprint`).
    ``preload``: tool specs the zygote knows from its start. The built-in tools' modules
    are imported by the zygote then (others on first use), and every call is a copy of it;
    a folder tool's module is never imported there (the zygote has the broker's
    privileges, outside every wall), but by each of its calls, behind all of them, from its
    folder bound read-only (``child.FolderTool``).
    ``trusted_folders``: folders whose modules are the embedding program's own code, as
    trusted as the broker: imported by the zygote like the built-in tools (the sandbox
    tests' tools). Never a user's tool folder (``--tools-dir``). Default none.
    ``state_dirs``: workspace-relative directories hidden under an empty read-only mount.
    ``pool``: how many call profiles (workspace, access, exec, limits, env) keep one spare
    child pre-forked and fully walled, waiting for its single call; 0 disables. Default 8.
    ``grace_s``: seconds between SIGTERM and SIGKILL of a timed-out call. Default 0.5.
    ``sandbox_uid``: unprivileged host uid/gid the sandbox runs as when the broker is root.
    ``masks``: workspace paths the policy denies, masked by the kernel in every call (see
    ``runtime.backends.sandbox.masks``; built by ``runtime.policy.paths.mask_spec``). Default none.
    ``allow``: the policy's ``(read, write)`` allow globs, each None when it covers
    everything (``runtime.policy.paths.allow_globs``), handed to the file toolkit per call.
    ``prespawned``: a zygote process started ahead (``_prespawn``), adopted by :meth:`start`
    (or ended by :meth:`aclose` when never started). Default none: start() spawns one.
    ``disable`` is TEST-ONLY: it switches named mechanisms off (see :data:`DISABLE_NAMES`)
    so the escape suite can show that each one matters.

    A call runs either on the event loop (:meth:`run`) or blocking in the calling thread
    (:meth:`run_sync`, the ``SyncBroker`` fast path: no hop to the loop thread and back, and
    a thread woken by ``poll`` instead of a task by the loop). Both share the zygote and
    give the same outcomes; ``run_sync`` has no cancellation, only the call's timeout.
    """

    name = "subprocess"

    def __init__(
        self,
        *,
        mode: Literal["strict", "best_effort"] = "strict",
        preload: Iterable[ToolSpec] = (),
        state_dirs: Iterable[str] = (".runtime",),
        disable: frozenset[str] = frozenset(),
        sandbox_uid: int = SANDBOX_UID,
        grace_s: float = 0.5,
        pool: int = 8,
        masks: MaskSpec | None = None,
        prespawned: PrespawnedZygote | None = None,
        allow: tuple[Sequence[str] | None, Sequence[str] | None] = (None, None),
        trusted_folders: Iterable[Path] = (),
    ) -> None:
        unknown = set(disable) - DISABLE_NAMES
        if unknown:
            raise ValueError(f"unknown mechanisms to disable: {sorted(unknown)}")
        if mode not in ("strict", "best_effort"):
            raise ValueError(f"mode must be 'strict' or 'best_effort', not {mode!r}")
        for name in state_dirs:
            parts = Path(name).parts
            if not parts or Path(name).is_absolute() or ".." in parts or "/" in name:
                raise ValueError(f"state_dirs entries are plain names in the workspace: {name!r}")
        self.mode = mode
        self._preload = list(preload)
        self._state_dirs = tuple(state_dirs)
        self._disable = frozenset(disable)
        self._uid = sandbox_uid
        self._grace_s = grace_s
        self._pool = pool
        self._masks = masks or MaskSpec()
        self._allow = allow
        self._trusted = tuple(Path(t).resolve() for t in trusted_folders)
        # A zygote process spawned ahead of start() (see _prespawn): adopted there.
        self._prespawned = prespawned
        self._ids = itertools.count(1)
        self._refs: dict[tuple[str | None, Path | None], tuple[str, str, str, str]] = {}
        self._plans: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._profiles: dict[tuple[Any, ...], str] = {}
        self._options: dict[tuple[str, ...], dict[str, Any]] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        # The event loop the zygote was started on (run_sync hands broker requests to it).
        self._token: Any = None
        self._loop_thread: int | None = None
        self._ctl: ControlChannel | None = None
        self._caps: dict[str, Any] = {}
        self._fingerprint = Fingerprint(backend=self.name, mode=mode)
        self.load_errors: dict[str, str] = {}
        # Restarts of a fork-server found gone (see _revive): when, the lock that makes one
        # caller restart it, whether it ever started, and whether aclose() ended it for good.
        self._restarts: list[float] = []
        self._restart_lock: anyio.Lock | None = None
        self._was_started = False
        self._ended = False

    # -- lifecycle ----------------------------------------------------------------------

    @staticmethod
    def _tool_ref(spec: ToolSpec) -> tuple[str, str, str, str]:
        """(key, entry, base, tool_dir): ``tool_dir`` is "" for a tool whose code the
        fork-server may import (a built-in one, or the package's own runner of command
        templates), else the folder tool's resolved folder, bound read-only into its calls
        (``child.FolderTool``). Raises SandboxError for a folder that may never be bound."""
        if not spec.entry:
            raise ToolFailed(f"tool {spec.name!r} has no entry point for the subprocess backend")
        base = spec.source.parent if spec.source is not None else builtin_tools_dir()
        resolved = base.resolve()
        base_s = str(resolved)
        key = f"{base_s}::{spec.entry}"
        if spec.entry.startswith("runtime.") or resolved.is_relative_to(builtin_tools_dir()):
            return key, spec.entry, base_s, ""
        if not resolved.is_dir():
            raise SandboxError(
                f"tool {spec.name!r}: its folder {base_s} is not a directory", path=base_s
            )
        try:
            _carried(check_read_only(base_s))
        except SandboxError as exc:
            raise SandboxError(
                f"tool {spec.name!r}: its folder cannot be bound into its sandbox: {exc.message}",
                path=base_s,
            ) from exc
        return key, spec.entry, base_s, base_s

    def _ref(self, spec: ToolSpec) -> tuple[str, str, str, str]:
        """``_tool_ref`` once per tool (resolving its folder is ~0.1 ms of path look-ups a
        call). The zygote keeps the loaded function under this key for its lifetime anyway;
        a relative folder depends on the cwd, so it is resolved every time."""
        source = spec.source
        if source is not None and not source.is_absolute():
            found = self._trust(self._tool_ref(spec))
            self._check_readable(spec, found)
            return found
        key = (spec.entry, source)
        ref = self._refs.get(key)
        if ref is None:
            if len(self._refs) >= _MAX_REFS:
                self._refs.clear()
            ref = self._trust(self._tool_ref(spec))
            self._check_readable(spec, ref)  # raises: not kept, each call says why
            self._refs[key] = ref
        return ref

    def _check_readable(self, spec: ToolSpec, ref: tuple[str, str, str, str]) -> None:
        """Refuse a folder tool whose code its sandbox's user may not read (``_binds.
        unreadable_code``), naming the files: its import, inside the call, would fail. The
        sandbox reads the folder itself, as that user (the broker hands it no code): a
        broker running as root sees files that user does not."""
        _, entry, _, tool_dir = ref
        if not tool_dir:
            return
        uid = self._uid if os.geteuid() == 0 else os.geteuid()
        gid = self._uid if os.geteuid() == 0 else os.getegid()
        bad = unreadable_code(tool_dir, entry.partition(":")[0], uid, gid)
        if bad:
            raise SandboxError(
                f"tool {spec.name!r}: its sandbox's user (uid {uid}) may not read "
                f"{', '.join(bad)}: make the folder's code readable to it (chmod o+r, "
                "directories o+rx) or owned by it",
                path=bad[0],
                unreadable=bad,
            )

    def _trust(self, ref: tuple[str, str, str, str]) -> tuple[str, str, str, str]:
        """``ref`` of a tool in one of ``trusted_folders``: pre-imported, as a built-in."""
        tool_dir = ref[3]
        if tool_dir and any(Path(tool_dir).is_relative_to(t) for t in self._trusted):
            return (*ref[:3], "")
        return ref

    def _spawn_zygote(self) -> socket.socket:
        parts = self._prespawned.take() if self._prespawned is not None else None
        self._prespawned = None
        ours, self._proc = parts if parts is not None else spawn_zygote()
        return ours

    async def start(self) -> None:
        """Start the zygote. Calling it again after the zygote died starts a new one."""
        if self._ctl is not None and not self._ctl.closed:
            return
        if self._restart_lock is None:
            self._restart_lock = anyio.Lock()
        self._ended = False
        if self._ctl is not None:
            await self._shutdown()
        try:
            # Cached after the first build; a failure leaves pid 1 to Python (slower).
            pid1_path = str(await anyio.to_thread.run_sync(pid1.build))
            pid1_error = None
        except SandboxError as exc:
            pid1_path, pid1_error = "", str(exc)
        # The zygote loads exactly the accelerator this process loaded, from the cache the
        # broker judged (``broker/_hostpaths.py``), or none; never one of its own finding.
        # Named by its real path (``loaded_path``): not the cache's path as the user wrote
        # it, which the zygote would resolve again, later.
        speedups = await anyio.to_thread.run_sync(_speedups.loaded_path)
        try:
            bpf_python, bpf_exec = await anyio.to_thread.run_sync(_seccomp_programs)
            bpf_error = None
        except (ImportError, OSError) as exc:
            # No usable libseccomp: the zygote reports "seccomp" missing (strict refuses).
            bpf_python, bpf_exec, bpf_error = b"", b"", f"{type(exc).__name__}: {exc}"
        token = _loop_token()
        waker = loop_waker(token) if token is not None else None
        adopted = self._prespawned is not None
        self._ctl = ControlChannel(self._spawn_zygote(), waker)
        self._token, self._loop_thread = token, threading.get_ident()
        # The built-in tools only: a folder tool's module is imported in its own calls,
        # behind their walls, never in the fork-server (``child.FolderTool``).
        tools = []
        for spec in self._preload:
            if spec.entry:
                try:
                    key, entry, base, tool_dir = self._ref(spec)
                except SandboxError:
                    continue  # each call of it says why
                if not tool_dir:
                    tools.append([key, entry, base])
        init = {
            "type": "init",
            "tools": tools,
            "disable": sorted(self._disable),
            "sandbox_uid": self._uid,
            "sandbox_gid": self._uid,
            "state_dirs": list(self._state_dirs),
            "grace_s": self._grace_s,
            "pool_size": self._pool,
            "pid1": pid1_path,
            "speedups": str(speedups) if speedups is not None else "",
            "bpf_python": bpf_python,
            "bpf_exec": bpf_exec,
            "seccomp_error": bpf_error,
        }
        try:
            await self._ctl.send(init)
            with anyio.fail_after(_START_TIMEOUT_S):
                ready = await self._ctl.receive()
        except (SandboxError, TimeoutError) as exc:
            await self._shutdown()
            if adopted:
                # Spawned ahead and gone before its init (killed, or exited between its
                # check in take() and now): once more with a zygote spawned here, whose
                # failure, if any, is reported as always.
                await self.start()
                return
            raise SandboxUnavailable(f"the sandbox fork-server did not start: {exc}") from exc
        self._caps = dict(ready.get("caps", {}))
        self.load_errors = dict(ready.get("errors", {}))
        if pid1_error is not None:
            self.load_errors["pid1"] = pid1_error
        missing = list(self._caps.get("missing_required", []))
        if "seccomp" in self.load_errors and "seccomp" not in missing:
            missing.append("seccomp")
        if missing and self.mode == "strict":
            await self._shutdown()
            raise SandboxUnavailable(
                f"strict mode: missing isolation mechanism(s): {', '.join(missing)}",
                missing=missing,
                capabilities=self._caps,
            )
        self._fingerprint = self._make_fingerprint(missing, ready.get("cgroups", []))
        self._was_started = True

    def _make_fingerprint(self, missing: list[str], cgroups: list[str]) -> Fingerprint:
        caps, off = self._caps, set(self._disable)
        if "userns" in off or "userns" in missing:
            off |= {"userns", "mountns", "pidns", "netns"}
        abi = int(caps.get("landlock_abi", 0))
        candidates = {
            "userns": "userns" not in off,
            "mountns": "mountns" not in off,
            "pidns": "pidns" not in off,
            "netns": "netns" not in off,
            "ipcns": "userns" not in off,
            "utsns": "userns" not in off,
            # The idmapped workspace mount maps the workspace's owner to the sandbox uid for
            # a root broker only; an unprivileged broker's calls run as its own uid and need
            # none: there it is neither a mechanism nor missing.
            **({"idmap": "mountns" not in off} if caps.get("is_root") else {}),
            "no_new_privs": True,
            "capdrop": "capdrop" not in off,
            "rlimits": "rlimits" not in off,
            "cgroup_memory": "memory" in cgroups,
            "cgroup_pids": "pids" in cgroups,
            "landlock": abi > 0 and "landlock" not in off,
            "landlock_net": abi >= 4 and "landlock" not in off,
            "landlock_scope": abi >= 6 and "landlock" not in off,
            "seccomp": "seccomp" not in missing and "seccomp" not in off,
            # Policy-denied paths masked by mounts: needs a mount namespace, and a policy
            # that denies something (best_effort without one says so in every record).
            "path_masks": bool(self._masks) and "mountns" not in off,
        }
        active = tuple(name for name, on in candidates.items() if on)
        unmasked = {"path_masks"} if not self._masks else set()  # nothing to mask: not missing
        absent = tuple(
            sorted(set(missing) | {n for n, on in candidates.items() if not on} - unmasked)
        )
        return Fingerprint(backend=self.name, mechanisms=active, missing=absent, mode=self.mode)

    async def aclose(self) -> None:
        """End the zygote and every call for good: no later call starts it again."""
        self._ended = True
        await self._shutdown()

    async def _shutdown(self) -> None:
        """End the zygote (EOF on its control socket; SIGKILL if it has not exited within
        5 s) and every call of it."""
        if self._prespawned is not None:  # never started: the process was never adopted
            self._prespawned.close()
            self._prespawned = None
        ctl, proc = self._ctl, self._proc
        self._ctl = self._proc = None
        if ctl is not None:
            # EOF on the control socket makes the zygote SIGKILL every call and exit.
            ctl.close()
        if proc is not None:
            with anyio.CancelScope(shield=True):
                # The zygote exits as soon as its calls are reaped; wait without blocking
                # the event loop, then make sure.
                try:
                    await anyio.to_thread.run_sync(proc.wait, 5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def fingerprint(self) -> Fingerprint:
        return self._fingerprint

    def capabilities(self) -> dict[str, Any]:
        """What the zygote's probe found (the same data as ``probe_host().as_dict()``)."""
        return dict(self._caps)

    @property
    def zygote_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def sync_capable(self) -> bool:
        """Whether :meth:`run_sync` may run a call in this thread: the zygote was started
        on an event loop that can answer the tool's broker requests (anyio >= 4.11), and
        this is not that loop's thread (blocking it would stall the very loop a broker
        request or the control socket's other readers need)."""
        return self._token is not None and threading.get_ident() != self._loop_thread

    def _gone(self) -> bool:
        """Whether the fork-server this backend started is gone: its control channel failed
        (or was closed), or its process exited. False before the first start."""
        if not self._was_started:
            return False
        ctl, proc = self._ctl, self._proc
        return ctl is None or ctl.closed or (proc is not None and proc.poll() is not None)

    async def _revive(self) -> dict[str, Any] | None:
        """Start the fork-server again when it is gone (None when it is not); the note the
        call that restarted it carries in its usage (and so its audit record). Bounded:
        :data:`_MAX_RESTARTS` in :data:`_RESTART_WINDOW_S`, then SandboxError until the
        window has room. The old process is ended first (EOF, then SIGKILL): one that
        lives on behind a failed channel is not left behind."""
        if not self._gone():
            return None
        if self._ended:
            raise SandboxError("the sandbox backend is closed")
        assert self._restart_lock is not None  # made by start(), which _was_started says ran
        async with self._restart_lock:
            if not self._gone():
                return None  # another call restarted it while this one waited
            proc = self._proc
            status = proc.poll() if proc is not None else None
            why = (
                f"the sandbox fork-server had exited (status {status})"
                if status is not None
                else "the sandbox fork-server's control channel had failed"
            )
            now = time.monotonic()
            self._restarts = [t for t in self._restarts if now - t < _RESTART_WINDOW_S]
            if len(self._restarts) >= _MAX_RESTARTS:
                wait = _RESTART_WINDOW_S - (now - self._restarts[0])
                raise SandboxError(
                    f"{why}; it was restarted {len(self._restarts)} times in the last "
                    f"{_RESTART_WINDOW_S:g} s, and is not restarted again for {wait:.0f} s",
                    reason="fork_server_restarts",
                    restarts=len(self._restarts),
                )
            self._restarts.append(now)
            log.warning("%s: starting it again", why)
            await self._shutdown()
            await self.start()
            return {"reason": why, "restarts": len(self._restarts)}

    def _revive_from_thread(self) -> dict[str, Any] | None:
        """:meth:`_revive` for :meth:`run_sync`: the start belongs to the event loop."""
        try:
            return anyio.from_thread.run(self._revive, token=self._token)
        except (anyio.RunFinishedError, concurrent.futures.CancelledError) as exc:
            raise SandboxError("the broker's event loop has ended") from exc

    # -- one call -----------------------------------------------------------------------

    def _plan(self, request: ExecRequest, key: tuple[Any, ...] | None = None) -> dict[str, Any]:
        """``key``: :meth:`_plan_key` of ``request`` when the caller has it already."""
        env = dict(request.env)
        if request.spec.sandbox.exec:  # the policy's environment wins over the hints
            env = {**walls.runtime_hints(request.limits.memory_mb), **env}
        plan = {
            "call_id": request.call_id,
            **self._static_plan(request, key),
            "env": env,
        }
        prune = _removed_whole(request)
        if prune and plan["masks"]:
            plan["masks"] = {**plan["masks"], "prune": list(prune)}
        return plan

    def _profile(self, request: ExecRequest, plan: dict[str, Any], key: tuple[Any, ...]) -> str:
        """The zygote's key for ``plan``'s spares (its ``_profile``: the plan without the
        call id, as sorted JSON), made here once per profile and environment instead of by
        the zygote on every spawn, where it sat between the call and its spare. The
        environment is in it as a digest: the plan carries it already, and the spawn
        message went whole into one control packet, so twice over it halved the
        environment a call could carry (a send past the packet bound is refused)."""
        with_env = (key, tuple(sorted(request.env.items())))
        profile = self._profiles.get(with_env)
        if profile is None:
            if len(self._profiles) >= _MAX_PLANS:
                self._profiles.clear()
            profile = self._profiles[with_env] = plan_profile(plan)
        return profile

    def _plan_key(self, request: ExecRequest, tool_dir: str = "") -> tuple[Any, ...]:
        needs = request.spec.sandbox
        limits = request.limits
        key: tuple[Any, ...] = (
            request.workspace,
            needs.workspace,
            bool(needs.exec),
            tool_dir,
            *limits.__dict__.values(),
        )
        if self._allow != (None, None):
            # Narrowed by Landlock or not: a profile of its own (its rules differ).
            key = (*key, self._narrowed(request.spec))
        prune = _removed_whole(request)
        # A call that removes a subtree has a profile of its own (its masks' walk differs).
        return (*key, prune) if prune else key

    def _narrowed(self, spec: ToolSpec) -> bool:
        """Whether Landlock confines this tool's calls to the policy's narrow ``[paths]``
        globs (``walls.landlock_rules``): it runs programs, or its code is not the built-in
        toolkit. The toolkit applies the globs itself, exactly, and lists the workspace's
        root to show what they allow; a program or a folder tool's code applies nothing."""
        return self._allow != (None, None) and (spec.sandbox.exec or not is_builtin(spec))

    def _static_plan(
        self, request: ExecRequest, key: tuple[Any, ...] | None = None
    ) -> dict[str, Any]:
        """The part of a call's plan that is the same for every call of one profile, built
        once per profile: resolving the workspace is a walk of syscalls, dumping the limits
        and masks a few dozen µs a call. Keyed by the limits' values (``Limits`` is mutable
        and unhashable). The workspace is resolved when its profile is first seen (the
        broker resolved it already when it opened; the zygote opens that path per call and
        stamps its identity for the spares)."""
        needs = request.spec.sandbox
        limits = request.limits
        if key is None:
            key = self._plan_key(request, self._ref(request.spec)[3])
        static = self._plans.get(key)
        if static is None:
            access = needs.workspace
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            workspace = None
            if access != WorkspaceAccess.NONE:
                workspace = _carried(str(request.workspace.resolve()))
            tool_dir = self._ref(request.spec)[3]
            _check_tool_dir(tool_dir, workspace)
            static = {
                "workspace": workspace,
                "access": str(access),
                "exec": bool(needs.exec),
                "limits": limits.model_dump(),
                "masks": self._mask_plan(access),
            }
            if self._narrowed(request.spec):
                read, write = self._allow
                static["narrow"] = {
                    "read": None if read is None else list(read),
                    "write": None if write is None else list(write),
                }
                if "narrow_mounts" in self._disable:
                    static["narrow"]["mounts"] = False
            if tool_dir:
                static["tool_dir"] = tool_dir
            self._plans[key] = static
        return static

    def _mask_plan(self, access: WorkspaceAccess) -> dict[str, Any]:
        """The masks of a call with ``access``: a call that may write the workspace also
        pins the directories a rename would carry a protected entry out of its glob through
        (``_pins``); a read-only one cannot rename anything (EROFS)."""
        if not self._masks:
            return {}
        pin = access == WorkspaceAccess.WRITE and "mask_pins" not in self._disable
        return replace(self._masks, pin=pin).as_plan()

    def _open(self, request: ExecRequest) -> _Call:
        """Everything a call needs before the zygote hears of it: its ids, its socketpair
        (``theirs`` goes to the zygote, then closes here), the spawn message."""
        key, entry, base, tool_dir = self._ref(request.spec)
        call_id = next(self._ids)
        plan_key = self._plan_key(request, tool_dir)  # once: the plan's cache and the profile's
        plan = self._plan(request, plan_key)
        spawn = {
            "type": "spawn",
            "id": call_id,
            "tool": key,
            "entry": entry,
            "base": base,
            "folder": bool(tool_dir),
            "plan": plan,
            "profile": self._profile(request, plan, plan_key),
        }
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        channel = CallChannel(ours, max_frame=result_frame_bound(request.limits.output_bytes))
        return _Call(call_id, channel, theirs, spawn, time.monotonic())

    async def run(self, request: ExecRequest) -> ExecOutcome:
        note = await self._revive()
        try:
            try:
                outcome = await self._run_once(request)
            except _NotDelivered:
                # Gone before it took the spawn: nothing of this call ran; once more on a
                # fork-server started again (a second failure is the call's error).
                note = await self._revive() or note
                outcome = await self._run_once(request)
        except ExecutionError as exc:
            _noted(exc.usage, note)
            raise
        _noted(outcome.usage, note)
        return outcome

    async def _run_once(self, request: ExecRequest) -> ExecOutcome:
        ctl = self._ctl
        if ctl is None or ctl.closed:
            raise SandboxError("the sandbox backend is not started")
        call = self._open(request)
        call.channel.begin(self._call_frame(request))
        try:
            try:
                await ctl.send(call.spawn, call.theirs.fileno())
            except (Unsendable, Oversized) as exc:
                call.exit_report = {}  # nothing was sent: no call to end or wait for
                raise _unsent(exc, request) from exc
            except SandboxError as exc:
                call.exit_report = {}
                raise _NotDelivered(exc.message) from exc
            finally:
                call.theirs.close()
            with anyio.move_on_after(request.limits.timeout_s) as scope:
                try:
                    call.terminal = await self._converse(call, request)
                except FrameError as exc:
                    # A child that breaks the protocol gets no second chance.
                    call.frame_error = exc
                    await ctl.send({"type": "kill", "id": call.call_id, "grace_s": 0.0})
                except _Flooded:
                    call.flooded = True  # nor does one that floods the broker
                    await ctl.send({"type": "kill", "id": call.call_id, "grace_s": 0.0})
                if _answered(call):
                    # Its outcome is known: its exit is waited for a short while only.
                    scope.deadline = min(scope.deadline, anyio.current_time() + _EXIT_AFTER_FRAME_S)
                call.exit_report = await ctl.wait_for(call.call_id)
            if scope.cancelled_caught:
                call.timed_out = not _answered(call) and not _last_look(call)
        finally:
            call.channel.close()
            if call.exit_report is None:
                # Timeout, cancellation, or a broken conversation: end the namespace and
                # reap it before returning, so nothing of this call outlives it.
                with anyio.CancelScope(shield=True), anyio.move_on_after(_EXIT_WAIT_S):
                    await ctl.send({"type": "kill", "id": call.call_id, "grace_s": self._grace_s})
                    call.exit_report = await ctl.wait_for(call.call_id)
        return self._conclude(call, request)

    def run_sync(self, request: ExecRequest) -> ExecOutcome:
        """:meth:`run` in the calling thread, blocking (see :attr:`sync_capable`). The
        timeout is a deadline on every wait; an exception in this thread (a
        KeyboardInterrupt) still ends and reaps the call before it propagates."""
        note = self._revive_from_thread() if self._gone() else None
        try:
            try:
                outcome = self._run_sync_once(request)
            except _NotDelivered:
                note = self._revive_from_thread() or note
                outcome = self._run_sync_once(request)
        except ExecutionError as exc:
            _noted(exc.usage, note)
            raise
        _noted(outcome.usage, note)
        return outcome

    def _run_sync_once(self, request: ExecRequest) -> ExecOutcome:
        ctl = self._ctl
        if ctl is None or ctl.closed:
            raise SandboxError("the sandbox backend is not started")
        call = self._open(request)
        call.channel.begin(self._call_frame(request))
        deadline = call.started + request.limits.timeout_s
        try:
            try:
                ctl.send_sync(call.spawn, call.theirs.fileno(), deadline)
            except (Unsendable, Oversized) as exc:
                call.exit_report = {}  # nothing was sent: no call to end or wait for
                raise _unsent(exc, request) from exc
            except SandboxError as exc:
                call.exit_report = {}
                raise _NotDelivered(exc.message) from exc
            finally:
                call.theirs.close()
            try:
                call.terminal = self._converse_sync(call, request, deadline)
            except FrameError as exc:
                call.frame_error = exc
                ctl.send_sync({"type": "kill", "id": call.call_id, "grace_s": 0.0}, None, deadline)
            except _Flooded:
                call.flooded = True
                ctl.send_sync({"type": "kill", "id": call.call_id, "grace_s": 0.0}, None, deadline)
            if _answered(call):
                deadline = min(deadline, time.monotonic() + _EXIT_AFTER_FRAME_S)
            call.exit_report = ctl.wait_for_sync(call.call_id, deadline)
        except DeadlinePassed:
            # (A frame already in the socket at the deadline was read: ``wait_fd``.)
            call.timed_out = not _answered(call)
        finally:
            call.channel.close()
            if call.exit_report is None:
                until = time.monotonic() + _EXIT_WAIT_S
                kill = {"type": "kill", "id": call.call_id, "grace_s": self._grace_s}
                try:
                    ctl.send_sync(kill, None, until)
                    call.exit_report = ctl.wait_for_sync(call.call_id, until)
                except DeadlinePassed:
                    pass  # as run(): the outcome says what is known
        return self._conclude(call, request)

    def _conclude(self, call: _Call, request: ExecRequest) -> ExecOutcome:
        limits = request.limits
        usage = call_usage(call.exit_report, call.started)
        if call.refused_count:
            usage["broker_refused"] = call.refused_count
        denied = denied_write(call.exit_report, usage, call.terminal)
        if denied is not None:
            raise denied
        if call.timed_out:
            raise _timeout(request, usage)
        if call.flooded:
            raise _flood_error(request, call, usage)
        terminal = call.terminal
        refused = call.refused
        if refused is not None and terminal is not None and terminal.get("type") == "error":
            if isinstance(refused, ExecutionError):
                refused.usage = usage
            raise refused
        try:
            result = outcome(
                terminal,
                call.frame_error,
                call.exit_report or {},
                limits,
                usage,
                requests=call.requests,
                tool=request.spec.name,
            )
        except SandboxError as exc:
            # Looked at only when a call failed: a workspace removed, or replaced by a file,
            # since the broker opened it fails the set-up in words of its internals.
            why = workspace_problem(request.workspace)
            if why is None:
                raise
            raise SandboxError(why, usage=usage, workspace=str(request.workspace)) from exc
        return ExecOutcome(result=result, usage=usage, fingerprint=self._fingerprint)

    def _call_frame(self, request: ExecRequest) -> dict[str, Any]:
        return {
            "type": "call",
            "arguments": request.arguments,
            "broker": request.broker_requests is not None,
            "options": self._call_options(request.spec),
        }

    def _call_options(self, spec: ToolSpec) -> dict[str, Any]:
        """The call frame's options, the same for every call of a command (most tools have
        none): built once, not per call."""
        command = tuple(spec.command or ())
        options = self._options.get(command)
        if options is None:
            options = {}
            if command:
                options["command"] = list(command)
            if self._masks.hide:
                # The file toolkit refuses a denied path it resolved to (through a symlink)
                # with a clear error rather than the mask's empty content.
                options["path_deny"] = list(self._masks.hide)
            read, write = self._allow
            if read is not None:
                # Narrower than everything: walks show only these, and a path that resolved
                # (through a symlink) outside them is refused (runtime.toolkit_fs).
                options["path_read"] = list(read)
            if write is not None:
                options["path_write"] = list(write)
            if len(self._options) >= _MAX_PLANS:
                self._options.clear()
            self._options[command] = options
        return options

    async def _converse(self, call: _Call, request: ExecRequest) -> dict[str, Any] | None:
        channel = call.channel
        await channel.flush()  # the call frame, begun before the spawn (``CallChannel.begin``)
        while True:
            frame = await channel.receive()
            if _is_terminal(frame):
                return frame
            call.requests += 1
            assert frame is not None
            reply = _reply_without_handler(frame, request)
            if reply is None:
                reply = await self._answer(frame, request, call)
            _count_refusal(call, reply)
            del frame  # nothing of a request outlives its answer
            await channel.send(reply)

    def _converse_sync(
        self, call: _Call, request: ExecRequest, deadline: float
    ) -> dict[str, Any] | None:
        channel = call.channel
        channel.flush_sync(deadline)  # the call frame, begun before the spawn
        while True:
            frame = channel.receive_sync(deadline)
            if _is_terminal(frame):
                return frame
            call.requests += 1
            assert frame is not None
            reply = _reply_without_handler(frame, request)
            if reply is None:
                reply = self._answer_from_thread(frame, request, call, deadline)
            _count_refusal(call, reply)
            del frame
            channel.send_sync(reply, deadline)

    def _answer_from_thread(
        self,
        frame: dict[str, Any],
        request: ExecRequest,
        call: _Call,
        deadline: float,
    ) -> dict[str, Any]:
        """A broker request of a call run by :meth:`run_sync`: the handler (egress through
        the gateway, ask_user) is async and belongs to the event loop, so it runs there,
        bounded by the call's deadline as on the loop."""

        async def bounded() -> dict[str, Any] | None:
            with anyio.move_on_after(deadline - time.monotonic()):
                return await self._answer(frame, request, call)
            return None

        try:
            reply = anyio.from_thread.run(bounded, token=self._token)
        except (anyio.RunFinishedError, concurrent.futures.CancelledError) as exc:
            # The loop ended (or cancelled the task at its end: the broker is closing).
            raise SandboxError("the broker's event loop has ended") from exc
        if reply is None:
            raise DeadlinePassed("a broker request outlived the call's timeout")
        return reply

    @staticmethod
    async def _answer(frame: dict[str, Any], request: ExecRequest, call: _Call) -> dict[str, Any]:
        """The handler's reply (``_reply_without_handler`` said there is one to ask)."""
        handler = request.broker_requests
        assert handler is not None
        try:
            value = await handler(frame["op"], frame["payload"])
        except RuntimeToolError as exc:
            # Kept on the broker side: if the tool then fails, this refusal (e.g. egress
            # denied by the policy) is the call's error, whatever the child claims. Only
            # the last one, and without its traceback: that pins the frames of this
            # function and the handler's, and with them the whole request (a tool asking
            # thousands of times for what it may not have filled the broker's memory).
            call.refused = _bare(exc)
            refusal = {
                "type": "reply",
                "ok": False,
                "message": exc.message,
                "error_type": str(exc.error_type),
            }
            # The machine-readable why (an egress failure's connect_failed, tls_error...):
            # a tool that carries on after it (web_fetch's batch) can report it.
            reason = exc.details.get("reason")
            if isinstance(reason, str):
                refusal["reason"] = reason
            return refusal
        return {"type": "reply", "ok": True, "value": value}


def _answered(call: _Call) -> bool:
    """Whether the child sent its last frame (a result, an error, a set-up error): that
    frame is the call's outcome, whenever its processes exit (they are ended
    ``_EXIT_AFTER_FRAME_S`` after it at the latest, and at the call's deadline)."""
    return call.terminal is not None and call.frame_error is None and not call.flooded


def _last_look(call: _Call) -> bool:
    """For a call of :meth:`SandboxBackend.run` cancelled at its deadline before it read a
    last frame: read one the socket holds already, complete, without waiting (the loop
    may not have run the call's task since it came), as ``run_sync`` does (``wait_fd``
    looks once more at the deadline). True if that was the call's last frame."""
    if call.terminal is not None or call.frame_error is not None or call.flooded:
        return False
    frame = call.channel.received()
    if frame is None or frame.get("type") not in _TERMINAL:
        return False  # nothing complete, or a broker request: it had not finished
    call.terminal = frame
    return True


def _timeout(request: ExecRequest, usage: dict[str, Any]) -> ToolTimeout:
    """The error of a call with no last frame by its deadline (its processes ended then).
    A tool that may write the workspace may have done part or all of its work: the
    message says so, and ``details.effect`` is ``unknown`` (a retried append, say, may
    then be applied twice)."""
    limit = request.limits.timeout_s
    if request.spec.sandbox.workspace != WorkspaceAccess.WRITE:
        return ToolTimeout(f"the call exceeded its {limit:g} s timeout", usage=usage, limit_s=limit)
    return ToolTimeout(
        f"the call exceeded its {limit:g} s timeout and was ended before it sent its result; "
        "the tool may write the workspace, and its changes may or may not have been applied "
        "(look before retrying it)",
        usage=usage,
        limit_s=limit,
        effect="unknown",
    )


class _Flooded(Exception):
    """A call made more than :data:`MAX_REFUSED_REQUESTS` refused broker requests: it is
    answered no more, and ended."""


def _count_refusal(call: _Call, reply: dict[str, Any]) -> None:
    """Count a refused request of ``call``; :class:`_Flooded` past the bound (the request
    that crossed it is not answered)."""
    if reply.get("ok"):
        return
    call.refused_count += 1
    if call.refused_count > MAX_REFUSED_REQUESTS:
        raise _Flooded


def _bare(exc: RuntimeToolError) -> RuntimeToolError:
    """``exc`` as a call keeps it: without the traceback (and the chained exceptions'),
    which would keep every frame it went through alive, with their locals."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return exc


def _flood_error(request: ExecRequest, call: _Call, usage: dict[str, Any]) -> ResourceLimitExceeded:
    """The error of a call ended for its refused broker requests (``_count_refusal``),
    naming the last refusal's rule and message."""
    refused = call.refused
    extra: dict[str, Any] = {}
    last = ""
    if refused is not None:
        last = f"; the last: {refused.message[:300]}"
        rule = refused.details.get("rule")
        if isinstance(rule, str):
            extra["rule"] = rule
    return ResourceLimitExceeded(
        f"{request.spec.name}: the tool made more than {MAX_REFUSED_REQUESTS} broker requests "
        f"that were refused, and was ended{last}",
        usage=usage,
        limit="broker_requests",
        refused=call.refused_count,
        max_refused=MAX_REFUSED_REQUESTS,
        **extra,
    )


class _NotDelivered(SandboxError):
    """The fork-server was gone when a call's spawn was sent: nothing of the call ran, so
    it may be tried again on a fork-server started anew (once: ``run``)."""


def _unsent(exc: SandboxError | ResourceLimitExceeded, request: ExecRequest) -> RuntimeToolError:
    """The error of a call whose spawn message was refused before anything of it was sent:
    ``exc`` itself, or for one too large for the control socket, a resource_limit naming the
    call's environment (what makes a spawn large; the session's is bounded by set_env)."""
    if not isinstance(exc, Oversized):
        return exc
    from runtime.toolkit_env import env_bytes

    env = request.env
    return ResourceLimitExceeded(
        f"{request.spec.name}: the call cannot be handed to the sandbox: its spawn message "
        f"is {exc.size} bytes, more than the fork-server's control socket takes in one "
        f"packet; its environment is {len(env)} variables, {env_bytes(env)} bytes "
        "(shorten or remove session variables with set_env, or pass large values in a file)",
        reason="env_too_large",
        limit="control_packet",
        message_bytes=exc.size,
        env_variables=len(env),
        env_bytes=env_bytes(env),
    )


def _noted(usage: dict[str, Any], note: dict[str, Any] | None) -> None:
    """Put a restart of the fork-server in the usage of the call that made it."""
    if note is not None:
        usage["sandbox_restarted"] = note


def _removed_whole(request: ExecRequest) -> tuple[str, ...]:
    """The workspace-relative components of the directory a recursive ``delete_file``
    removes (``masks.MaskSpec.prune``: the mask walk may stop short inside it), () for any
    other call. Lexical, from the validated arguments; a path the toolkit resolves
    elsewhere through a symlink only makes the walk refuse as before. Only the built-in
    tool's manifest: what makes the walk's short stop safe is its implementation (it
    removes, never opens a file), not its name, which a catalogue built without the
    built-ins could give another tool."""
    spec = request.spec
    if spec.name != "delete_file" or request.arguments.get("recursive") is not True:
        return ()
    if not is_builtin(spec):
        return ()
    path = request.arguments.get("path")
    if not isinstance(path, str):
        return ()
    if path == WORKSPACE or path.startswith(WORKSPACE + "/"):
        path = path[len(WORKSPACE) :]
    elif path.startswith("/"):
        return ()
    parts = tuple(c for c in path.split("/") if c not in ("", "."))
    return () if ".." in parts else parts


def _check_tool_dir(tool_dir: str, workspace: str | None) -> None:
    """A folder tool's folder is bound read-only beside the workspace, past its masks: it
    may not hold the workspace, nor lie inside it (what the policy denies there would be
    readable through the folder's bind)."""
    if not tool_dir or workspace is None:
        return
    if workspace == tool_dir or workspace.startswith(tool_dir.rstrip("/") + "/"):
        raise SandboxError(
            f"the tool folder {tool_dir} holds the workspace {workspace}: binding it into "
            "the call would show the workspace past the policy's masks; keep tool folders "
            "outside the workspace",
            path=tool_dir,
        )
    if tool_dir.startswith(workspace.rstrip("/") + "/"):
        raise SandboxError(
            f"the tool folder {tool_dir} is inside the workspace {workspace}: a call could "
            "rewrite the tool, and its bind would show the folder past the policy's masks; "
            "keep tool folders outside the workspace",
            path=tool_dir,
        )


def _loop_token() -> Any:
    """The running event loop's anyio token, or None before anyio 4.11 (which added
    ``current_token`` and ``from_thread.run(token=)``: without them, no ``run_sync``)."""
    current_token = getattr(anyio.lowlevel, "current_token", None)
    return current_token() if current_token is not None else None


_TERMINAL = frozenset({"result", "error", "setup_error"})


def _is_terminal(frame: dict[str, Any] | None) -> bool:
    """True for the frame that ends the conversation (None is EOF); False for a broker
    request; FrameError for anything else."""
    if frame is None:
        return True
    kind = frame.get("type")
    if kind in _TERMINAL:
        return True
    if kind != "request":
        raise FrameError(f"unexpected frame type {kind!r:.64} from the child")
    return False


def _reply_without_handler(frame: dict[str, Any], request: ExecRequest) -> dict[str, Any] | None:
    """The reply to a broker request that needs no handler (none to ask, or a malformed
    request), or None when the handler must answer."""
    op, payload = frame.get("op"), frame.get("payload")
    if request.broker_requests is None:
        return {
            "type": "reply",
            "ok": False,
            "message": f"this call has no channel to the broker for {op!r}",
        }
    if not isinstance(op, str) or not isinstance(payload, dict):
        return {"type": "reply", "ok": False, "message": "malformed broker request"}
    return None


def _seccomp_programs() -> tuple[bytes, bytes]:
    """The seccomp programs, compiled here in the broker (imported on first start only: a
    broker that never starts a sandbox does not load libseccomp)."""
    from runtime.backends.sandbox import seccomp

    return seccomp.programs()


def _carried(workspace: str) -> str:
    """``workspace`` as a call's plan carries it (msgpack text: UTF-8 only). A directory
    name need not be UTF-8; such a workspace cannot reach the fork-server, so its calls are
    refused here, saying why, instead of failing to encode inside the send."""
    try:
        workspace.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = os.fsencode(workspace).decode("utf-8", "backslashreplace")
        raise SandboxError(
            f"the workspace path '{shown}' is not valid UTF-8, which the sandbox cannot "
            "carry to its fork-server; rename the directory (or open the broker on "
            "another one)",
            workspace=shown,
        ) from exc
    return workspace
