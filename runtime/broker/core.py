"""The broker: the one place that decides whether a call may run, runs it, and records it.

Pipeline of one call (DESIGN §2)::

    normalise → catalogue lookup → schema validation → policy decision (allow | ask | deny)
      → budget → approval → audit write-ahead record → backend (under the limiter)
      → result schema + size cap → audit completion record → events

Errors are results: every :class:`~runtime.errors.RuntimeToolError` becomes a ``ToolResult``
with ``error.type`` at the one boundary in :meth:`Broker.call`; anything else is a bug and
becomes ``internal_error``. Cancellation is never swallowed: a cancelled call is recorded as
``cancelled`` (shielded) and the cancellation propagates.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import inspect
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio

from runtime import _forksafe, _speedups
from runtime._depth import RESULT_MAX_DEPTH, nests_deeper
from runtime.backends.base import (
    Backend,
    ExecOutcome,
    ExecRequest,
    Fingerprint,
    SyncBackend,
    fingerprint_for,
)
from runtime.broker import _fast
from runtime.broker._callables import close_awaitable, is_async_callable
from runtime.broker._channel import CallChannel
from runtime.broker._hostpaths import HostPath, check_workspace, runtime_paths
from runtime.broker._statedir import check_state_dir, default_audit_path
from runtime.broker.events import Event, EventBus, EventKind, check_callback
from runtime.broker.limiter import Slots
from runtime.catalogue import Catalogue
from runtime.catalogue.registry import CatalogueEntry
from runtime.errors import (
    ApprovalRequired,
    AuditError,
    CallCancelled,
    ConfigError,
    InternalError,
    OutputTooLarge,
    PolicyDenied,
    RuntimeToolError,
    SandboxError,
    ToolFailed,
    ToolNotFound,
    ToolTimeout,
)
from runtime.models import (
    BackendKind,
    Decision,
    ErrorInfo,
    Limits,
    ToolCall,
    ToolResult,
    ToolSpec,
    utcnow,
)
from runtime.shapes import CallLimits, call_text_too_deep, normalize_call, parse_call_bytes
from runtime.toolkit import PREVIEW_CHARS, is_builtin, too_large_message, unencodable_result
from runtime.toolkit_env import check_env_arguments, check_env_size
from runtime.validation import SchemaValidator

if TYPE_CHECKING:
    from runtime.audit import PreparedObject
    from runtime.audit._redact import Redactor
    from runtime.backends.sandbox._prespawn import PrespawnedZygote

__all__ = ["Approver", "AskUser", "Broker", "NeedsEventLoop"]

log = logging.getLogger("runtime.broker")

#: ``approver(call, decision) -> bool`` (sync or async): True runs an ``ask`` call, False
#: refuses it (policy_denied); an approver that raises or answers anything else leaves the
#: call unapproved and not run (approval_required, ``details.reason`` says which), except
#: that an ApprovalRequired or PolicyDenied it raises, its own typed answer, is the call's
#: error as raised. On the event loop a synchronous approver runs in a worker thread
#: (abandoned if the call is cancelled while it waits); SyncBroker's synchronous path calls
#: it in the caller's thread. KeyboardInterrupt or SystemExit out of it propagates, the call
#: recorded as cancelled. Every approver gets the same verdict on every path: an ``async
#: def`` one (a function, a partial of one, or an object whose ``__call__`` is ``async
#: def``) is awaited on the loop; a synchronous one that returns an awaitable has it awaited
#: on the loop as well, SyncBroker's synchronous path included (see _await_verdict).
Approver = Callable[[ToolCall, Decision], bool | Awaitable[bool]]
#: ``ask_user(question, options) -> answer`` for the ask_user tool.
AskUser = Callable[[str, list[str] | None], str]

#: Extra wall time the broker grants a backend beyond the call's own timeout before it gives
#: up on it: backends enforce timeouts themselves; this guard only catches a wedged backend.
_BACKEND_GRACE_S = 10.0
#: How long aclose() waits, after ending the backends, for the calls they ran to record their
#: completion before the audit log closes (seconds).
_DRAIN_S = 10.0
#: Every call that runs has both its audit records journaled (one ``write()`` each, as durable
#: against a broker crash as a WAL commit with synchronous=NORMAL; runtime/audit/_journal.py)
#: and inserted into SQLite in batches, whatever its backend. Failing closed holds as with a
#: commit per record: a write-ahead record that cannot be journaled refuses the call, a failed
#: batch insertion refuses every later call until the database takes the records again, and a
#: write-ahead record is refused while the log's file system is full (the journal's last page
#: could still take a few lines the database cannot). Calls refused before running are
#: committed one by one (rare; a reader in another process sees them at once).
_STATE_DIR = ".runtime"
#: Distinct decisions and fingerprints kept prepared for the audit log.
_PREPARED_MAX = 256
#: The environment of a session that has set none (read-only: never a store).
_NO_ENV: Mapping[str, str] = MappingProxyType({})


class _CallState:
    """What is known about one call so far; the finish step turns it into a result.

    A plain class whose unset fields read their class-level default: its ``__init__`` sets
    the three it is given, where a dataclass's set all fourteen (~40 opcodes a call).
    Hazard: every default is immutable (None, False), so instances never share a mutable."""

    tc: ToolCall | None = None
    spec: ToolSpec | None = None
    #: The tool's catalogue entry (spec, validators, backend name), looked up once.
    entry: CatalogueEntry | None = None
    decision: Decision | None = None
    fingerprint: Fingerprint | None = None
    outcome: ExecOutcome | None = None
    error: RuntimeToolError | None = None
    audited: bool = False
    cancelled: bool = False
    result_bytes: bytes | None = None
    #: ``spec.backend.value`` (the entry's), set with the write-ahead record.
    backend_name: str | None = None
    #: The session the call runs in, as its audit records show it.
    session: str | None = None
    #: The (session, tool) budget slot reserved at the decision; given back by the finish
    #: step when the call never reached its write-ahead record.
    budget_key: tuple[str, str] | None = None
    #: The call's channel back to the broker (its egress log goes in the usage).
    channel: CallChannel | None = None

    def __init__(self, raw: Any, started: Any, t0: float) -> None:
        self.raw = raw
        self.started = started
        self.t0 = t0


class NeedsEventLoop(Exception):
    """Raised by :meth:`Broker.call_sync` before any side effect: use the async path."""


def _trusted_paths(
    audit: str | Path | None,
    policy: Any,
    tool_folders: Iterable[str | Path],
    catalogue: Catalogue | None,
    backends: Mapping[str, Backend],
) -> list[HostPath]:
    """The host paths a broker made with these arguments trusts (``_hostpaths``): the
    runtime's, its audit log (the default one is in the hidden state directory), its policy
    file, the folders of its catalogue's own tools, a given backend's cache."""
    keep = "give it a place outside the workspace"
    paths = runtime_paths()
    if audit is not None:
        paths.append(HostPath(Path(audit), "the audit log", f"{keep} (--audit PATH)", tree=False))
    source = policy if isinstance(policy, (str, Path)) else getattr(policy, "source", None)
    if isinstance(source, (str, Path)) and Path(source).is_file():
        paths.append(HostPath(Path(source), "the policy file", keep, tree=False))
    folders = [Path(f) for f in tool_folders]
    if catalogue is not None:
        folders.extend(
            spec.source.parent
            for spec in catalogue.list()
            if spec.source is not None and not is_builtin(spec)
        )
    paths.extend(HostPath(f, "a tool folder of the catalogue", keep) for f in folders)
    for backend in backends.values():
        cache = getattr(backend, "cache_dir", None)
        if isinstance(cache, Path):
            paths.append(HostPath(cache, f"the {backend.name} backend's cache", keep))
    return paths


class Broker:
    """Async broker. Use as ``async with Broker(workspace=...) as broker``.

    ``prespawn_sandbox``: spawn the sandbox's fork-server process at construction, so that it
    boots while the policy, catalogue and audit log load, for a caller that knows a
    sandboxed call comes first (``runtime exec``). Default False: spawned by the first
    sandboxed call. Either way the broker may be made on any thread, one that ends soon
    after included: the fork-server lives as long as this process (see
    ``runtime/backends/sandbox/_spawner.py``).
    """

    def __init__(
        self,
        workspace: str | Path = "workspace",
        policy: Any = None,
        audit: str | Path | None = None,
        *,
        tool_folders: Iterable[str | Path] = (),
        catalogue: Catalogue | None = None,
        backends: Mapping[str, Backend] | None = None,
        approver: Approver | None = None,
        ask_user: AskUser | None = None,
        on_event: Callable[[Event], Any] | None = None,
        profile: str | None = None,
        session: str = "default",
        sandbox_mode: str | None = None,
        call_limits: CallLimits | None = None,
        prespawn_sandbox: bool = False,
    ) -> None:
        if on_event is not None:
            check_callback(on_event)  # before anything is opened or made (TypeError)
        # First: the fork-server's process boots on another core while the rest of this
        # set-up runs (imports included; see runtime/backends/sandbox/_prespawn.py); adopted
        # by the sandbox backend when a call starts it, ended by aclose() otherwise.
        # Before anything is loaded from the cache (the fork-server's helpers below, the C
        # accelerator at the policy's first canonical text) or made in the workspace: what
        # this broker loads or keeps must not be the calls' to write (_hostpaths).
        self.workspace = Path(workspace).resolve()
        check_workspace(
            self.workspace,
            _trusted_paths(audit, policy, tool_folders, catalogue, backends or {}),
            hidden=_STATE_DIR,
        )
        custom = BackendKind.SUBPROCESS.value in (backends or {})
        self._prespawned = _prespawn() if prespawn_sandbox and not custom else None
        try:
            from runtime.audit import AuditLog
            from runtime.policy import Policy

            state_dir = self.workspace / _STATE_DIR
            try:
                self.workspace.mkdir(parents=True, exist_ok=True)
                # One there already (a symlink, a file, someone else's) is check_state_dir's.
                with contextlib.suppress(FileExistsError):
                    state_dir.mkdir(mode=0o700)
            except OSError as exc:  # no permission, read-only file system, a file in the way
                # A workspace this user may only read (a read-only checkout, someone else's
                # tree) runs with the audit log elsewhere; only the state-keeping host tools
                # (snippets, memory) then fail, each call saying why.
                if not (audit is not None and _unwritable(exc) and self.workspace.is_dir()):
                    raise self._workspace_error(exc, audit) from exc
            #: The state directory (audit log, host tools' state), checked; None when the one
            #: there is unsafe and the audit log is elsewhere (see _statedir).
            self.state_dir = check_state_dir(state_dir, audit_elsewhere=audit is not None)
            if policy is None:
                self.policy = Policy.default()
            elif isinstance(policy, (str, Path)):
                self.policy = Policy.load(policy)
            elif callable(getattr(policy, "decide", None)):  # a Policy, or one that acts as one
                self.policy = policy
            else:  # a dict of the file's content is a natural guess; say what is accepted
                raise TypeError(
                    "policy must be a Policy (Policy.load, Policy.from_toml), a path to a TOML "
                    f"file, or None for the built-in default; got {type(policy).__name__}"
                )
            self.sandbox_mode = sandbox_mode or self.policy.sandbox_mode
            self.catalogue = catalogue if catalogue is not None else Catalogue(folders=tool_folders)
            # The policy's [[examples]] naming tools of this catalogue (folder tools), with
            # their real manifests: at load the policy knew only the built-in ones.
            check_examples = getattr(self.policy, "check_examples", None)
            if check_examples is not None:
                check_examples(self._manifest_or_none)
            audit_path = Path(audit) if audit is not None else default_audit_path(state_dir)
            self.audit = AuditLog(audit_path, redact_keys=self.policy.redact_keys)
            self.events = EventBus()
            if on_event is not None:
                self.events.add_callback(on_event)
            self.approver = approver
            self.ask_user = ask_user
            self.profile = profile
            self.session = session
            self.call_limits = call_limits or CallLimits()
            self._backends: dict[str, Backend] = dict(backends or {})
            self._started: set[str] = set()
            self._start_lock: anyio.Lock | None = None
            self._slots = Slots(self.policy.max_concurrent)
            self._session_env: dict[str, dict[str, str]] = {}
            self._budget_used: dict[tuple[str, str], int] = {}
            # Check-and-take of a budget is one step also across the threads of SyncBroker's
            # synchronous path (wasm and host calls run in their callers' threads).
            self._budget_lock = threading.Lock()
            # Decisions and fingerprints as the audit records show them (see _audit_decision).
            self._prepared: dict[Any, PreparedObject] = {}
            # The last fingerprint prepared and its audit form: backends hand out one
            # Fingerprint object per configuration, so an identity test skips hashing it (a
            # dataclass __hash__ in Python) twice per call. One tuple: read and replaced whole.
            self._last_sandbox: tuple[Fingerprint, PreparedObject] | None = None
            self._gateway: Any = None
            self._redactor: Redactor | None = None
            self._closed = False
            # In a child forked while this broker was open (see _forked_child).
            self._forked = False
            # Async calls between their start and their result; aclose() waits for them (after
            # ending the backends, which ends their work) so that each gets its completion record.
            self._in_flight = 0
            self._drained: anyio.Event | None = None
            #: Set by SyncBroker: awaits an awaitable on this broker's loop from the calling
            #: thread (call_sync's approver answering with a coroutine; see _await_verdict).
            self._await_from_thread: Callable[[Awaitable[Any]], Any] | None = None
        except BaseException:
            if self._prespawned is not None:
                self._prespawned.close()
            raise
        _forksafe.on_fork_in_child(self)

    def _forked_child(self) -> None:
        """In a child of ``os.fork()``: this broker is the parent's. Its event loop, backends
        (the fork-server) and audit log belong to the parent's threads and are the parent's
        to end, so the child's copy is closed without being torn down: every call is refused
        with an internal_error that says to open a new broker, and records nothing (the log
        marks itself forked too); :meth:`aclose` does nothing. The backends and the log
        release their own copies (their own hooks)."""
        self._forked = True
        self._closed = True
        self._await_from_thread = None  # the parent's loop thread is not in the child
        self._prespawned = None  # the parent's (PrespawnedZygote lets go of its copy)
        self.events.forked_child()

    def _closed_error(self) -> InternalError:
        if self._forked:
            return InternalError(
                "a broker does not survive fork(): open a new one in the child",
                reason="forked",
            )
        return InternalError("the broker is closed")

    def _workspace_error(self, exc: OSError, audit: str | Path | None) -> ConfigError:
        made = exc.filename or self.workspace
        message = f"workspace {self.workspace}: cannot create {made} as a directory"
        if audit is None and _unwritable(exc) and self.workspace.is_dir():
            message += (
                f" for the default audit log ({exc.strerror}: this user cannot write the "
                "workspace); give the audit log a place outside it: --audit PATH "
                "(Broker(audit=PATH))"
            )
        else:
            message += f": {exc.strerror or exc}"
        return ConfigError(message, path=str(self.workspace))

    # -- lifecycle ----------------------------------------------------------------------------
    async def __aenter__(self) -> Broker:
        if self._closed:
            # It opened as if new, and every call then failed as internal_error ("the
            # broker is closed"): its backends and audit log are gone for good.
            if self._forked:
                raise RuntimeError("a broker does not survive fork(): open a new one in the child")
            raise RuntimeError(
                "this Broker is closed (aclose(), or the end of its 'async with') and cannot "
                "be opened again: make a new Broker(...)"
            )
        if self._start_lock is not None:
            # A second enter was accepted, and the end of the inner block closed the broker
            # under the outer one (its calls: internal_error "the broker is closed"); it also
            # replaced the start lock, so a backend starting under the old one could be
            # started twice, the first copy (a fork-server) never closed.
            raise RuntimeError(
                "this Broker is already open: enter it once (the end of its 'async with' "
                "closes it), or make a second Broker(...)"
            )
        self._start_lock = anyio.Lock()
        try:
            # The audit encoder's C accelerator is built (1-2 s, once per machine) or loaded
            # on first use; decided here in a worker thread, not by the first call on the loop.
            await anyio.to_thread.run_sync(_speedups.module)
        except BaseException:
            self._start_lock = None  # not opened: an enter may be tried again
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """End every sandbox and backend (the zygote included) and close the audit log."""
        if self._closed:
            return
        self._closed = True
        if self._prespawned is not None:  # no sandboxed call was made
            self._prespawned.close()
            self._prespawned = None
        with anyio.CancelScope(shield=True):
            for name in list(self._started):
                try:
                    await self._backends[name].aclose()
                except Exception:
                    log.exception("closing backend %s failed", name)
            if self._gateway is not None:
                await self._gateway.aclose()
            if self._in_flight:
                self._drained = anyio.Event()
                with anyio.move_on_after(_DRAIN_S):
                    await self._drained.wait()
            self.events.close()
            self.audit.close()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[AsyncIterator[Event]]:
        async with self.events.subscribe() as stream:
            yield stream

    def session_env(self, session: str) -> dict[str, str]:
        """The environment of ``session`` (the store set_env writes), made on first use."""
        return self._session_env.setdefault(session, {})

    def end_session(self, session: str) -> None:
        """Forget ``session``'s environment: the MCP server calls it when one of its
        sessions ends, so that the store does not grow with every session ever served.
        Budgets are the broker session's and stay."""
        self._session_env.pop(session, None)

    # -- backends -----------------------------------------------------------------------------
    def _make_backend(self, kind: str) -> Backend:
        if kind == BackendKind.SUBPROCESS.value:
            from runtime.backends.sandbox import SandboxBackend

            mode: Literal["strict", "best_effort"] = (
                "best_effort" if self.sandbox_mode == "best_effort" else "strict"
            )
            from runtime.backends.sandbox.masks import MaskSpec
            from runtime.policy.paths import allow_globs, mask_globs

            preload = [s for s in self.catalogue.list() if s.backend is BackendKind.SUBPROCESS]
            paths = self.policy.document.paths
            hide, readonly = mask_globs(paths)
            masks = MaskSpec(hide=hide, readonly=readonly, max_entries=paths.mask_max_entries)
            prespawned, self._prespawned = self._prespawned, None
            return SandboxBackend(
                mode=mode,
                preload=preload,
                masks=masks,
                prespawned=prespawned,
                allow=allow_globs(paths),
            )
        if kind == BackendKind.WASM.value:
            from runtime.backends.wasm import WasmBackend

            return WasmBackend()
        if kind == BackendKind.HOST.value:
            from runtime.backends.host import HostBackend

            return HostBackend(
                state_dir=self.state_dir, session_env=self.session_env, ask_user=self._ask_now
            )
        raise SandboxError(f"no backend for kind {kind!r}", backend=kind)

    async def _backend(self, kind: str) -> Backend:
        if kind in self._started:
            return self._backends[kind]
        if self._start_lock is None:
            raise InternalError("the broker is not open: use 'async with Broker(...)'")
        # Hazard: aclose() ends only the backends started before it; one started by a call
        # made after it (a fork-server for the sandbox) would run until the process exits.
        if self._closed:
            raise self._closed_error()
        async with self._start_lock:
            if kind not in self._started:
                backend = self._backends.get(kind) or self._make_backend(kind)
                self._backends[kind] = backend
                await backend.start()
                if self._closed:  # aclose() ran while it started
                    await backend.aclose()
                    raise self._closed_error()
                self._started.add(kind)
        started: Backend = self._backends[kind]
        return started

    def _manifest_or_none(self, name: str) -> ToolSpec | None:
        try:
            return self.catalogue.get(name)
        except ToolNotFound:
            return None

    def _gateway_for_egress(self) -> Any:
        if self._gateway is None:
            from runtime.egress import EgressGateway

            self._gateway = EgressGateway(self.policy.network)
        return self._gateway

    def _ask_now(self, question: str, options: list[str] | None) -> str:
        """The host tools' ask_user hook: whichever ``ask_user`` the broker has at the call
        (the host backend is made once; a hook set after it started was never asked)."""
        hook = self.ask_user
        if hook is None:
            raise ToolFailed("no way to ask the user in this session", reason="no_user_channel")
        return hook(question, options)

    def _ask_user_hook(self) -> AskUser | None:
        return self.ask_user

    def _redact_url(self, url: str) -> str:
        """``url`` with its credentials hidden (``Redactor.redact_url``: the policy's
        redaction keys included): the egress log goes in the usage, which is not redacted."""
        redactor = self._redactor
        if redactor is None:
            from runtime.audit._redact import Redactor as _Redactor

            redactor = self._redactor = _Redactor(self.policy.redact_keys)
        return redactor.redact_url(url)

    # -- the pipeline -------------------------------------------------------------------------
    async def call(
        self,
        call: Any,
        *,
        session: str | None = None,
        profile: str | None = None,
        audit_session: str | None = None,
        on_run: Callable[[float], None] | None = None,
    ) -> ToolResult:
        """Run one call of any accepted shape; always returns a ToolResult.

        ``session`` scopes the per-session budgets, the session environment and the audit
        records. ``audit_session`` names the caller's own session within it (the MCP server
        passes each MCP session's id): the audit records and the session environment
        (set_env, get_env, the variables every later call of it sees) are then that
        session's, while budgets stay ``session``'s (not reset by opening a new MCP
        session). ``on_run`` is told the call's
        timeout (seconds) when its backend is about to run it: decided, approved and given
        a slot (the MCP server's progress heartbeats report it as their total).

        A ``session`` or ``audit_session`` that is not a str raises TypeError, one that is
        not Unicode text (a lone surrogate) ValueError: the caller's mistake, like an
        unknown keyword, raised before anything runs or is recorded."""
        _check_sessions(session, audit_session)
        st = _CallState(raw=call, started=utcnow(), t0=time.perf_counter())
        session = session or self.session
        st.session = audit_session or session
        self._in_flight += 1
        try:
            spec, decision = self._admit(st, session, profile or self.profile)
            if self._closed:
                raise self._closed_error()
            if decision.action == "ask":
                await self._approve(st, decision)
            assert st.entry is not None
            kind = st.entry.backend
            backend = self._backends[kind] if kind in self._started else await self._backend(kind)
            request = self._start(st, backend, session)
            slots = self._slots
            if not slots.try_acquire():
                await slots.wait_async()
            try:
                if on_run is not None:
                    on_run(request.limits.timeout_s)
                with anyio.move_on_after(request.limits.timeout_s + _BACKEND_GRACE_S) as scope:
                    st.outcome = await backend.run(request)
            finally:
                slots.release()
            if scope.cancelled_caught:
                raise ToolTimeout(
                    f"{spec.name}: the {backend.name} backend did not return in time",
                    limit_s=request.limits.timeout_s,
                )
            self._check_outcome(st)
        except SandboxError as exc:
            st.error = self._closed_under(st, exc)
        except RuntimeToolError as exc:
            st.error = exc
        except anyio.get_cancelled_exc_class():
            st.cancelled = True
            st.error = CallCancelled("the call was cancelled")
            raise
        except Exception as exc:
            st.error = self._internal(st, exc)
        except BaseException:
            # KeyboardInterrupt or SystemExit out of a hook (an approver's input() at Ctrl-C,
            # an ask_user hook calling sys.exit), a GeneratorExit: the call did not complete.
            # Its completion said "success" (the finally below ran with no error set).
            # Recorded as interrupted, as call_sync does, and never swallowed.
            st.cancelled = True
            st.error = CallCancelled("the call was interrupted")
            raise
        finally:
            try:
                result = self._finish(st)
            finally:
                self._in_flight -= 1
                if self._drained is not None and not self._in_flight:
                    self._drained.set()
        return result

    async def call_many(
        self,
        calls: Iterable[Any],
        *,
        session: str | None = None,
        profile: str | None = None,
    ) -> list[ToolResult]:
        """Run several calls at once and return their results in the order of ``calls``:
        an LLM turn with parallel tool calls (a chat message's ``tool_calls``; seed 001's
        ``executeMany``). Each call is decided, audited and answered on its own, so one
        failure is its own result and never the others'; the policy's ``max_concurrent``
        still bounds how many run at a time (the broker's one limiter), the rest wait."""
        batch = list(calls)
        results: list[ToolResult | None] = [None] * len(batch)

        async def one(i: int, call: Any) -> None:
            # call() turns every error into a result; only cancellation leaves it, and
            # then the task group cancels the rest and re-raises.
            results[i] = await self.call(call, session=session, profile=profile)

        async with anyio.create_task_group() as tg:
            for i, call in enumerate(batch):
                tg.start_soon(one, i, call)
        return cast("list[ToolResult]", results)  # every slot filled: the group ended normally

    def call_sync(
        self,
        call: Any,
        *,
        session: str | None = None,
        profile: str | None = None,
        audit_session: str | None = None,
    ) -> ToolResult:
        """The same pipeline, in the calling thread, for backends that run synchronously
        (wasm, host, mock) once started. Raises :class:`NeedsEventLoop` — before any side
        effect — when the call needs the event loop (a backend not started yet or without
        ``run_sync``, or an async approver); ``SyncBroker`` then takes the async path.
        ``session`` and ``audit_session`` as :meth:`call`."""
        _check_sessions(session, audit_session)
        st = _CallState(raw=call, started=utcnow(), t0=time.perf_counter())
        session = session or self.session
        st.session = audit_session or session
        st.tc, st.entry, backend = self._sync_backend_for(call)
        try:
            _, decision = self._admit(st, session, profile or self.profile)
            if self._closed:
                raise self._closed_error()
            if decision.action == "ask":
                self._approve_sync(st, decision)
            request = self._start(st, backend, session)
            slots = self._slots
            if not slots.try_acquire():
                slots.wait_sync()
            try:
                st.outcome = cast(SyncBackend, backend).run_sync(request)
            finally:
                slots.release()
            self._check_outcome(st)
        except SandboxError as exc:
            # As on the async path: a fork-server ended by close() while the call ran says
            # so (reason broker_closed), not "the sandbox fork-server is gone".
            st.error = self._closed_under(st, exc)
        except RuntimeToolError as exc:
            st.error = exc
        except Exception as exc:
            st.error = self._internal(st, exc)
        except BaseException:
            # Ctrl-C (KeyboardInterrupt from a signal handler), SystemExit, a GeneratorExit:
            # the call did not complete, and its record must not say "success" (the finally
            # below runs with no error set otherwise). Recorded as cancelled, as on the
            # async path, and never swallowed.
            st.cancelled = True
            st.error = CallCancelled("the call was interrupted")
            raise
        finally:
            result = self._finish(st)
        return result

    def _sync_backend_for(self, call: Any) -> tuple[ToolCall, CatalogueEntry, Backend]:
        """The normalised call and its tool's entry (so that _admit does not look them up
        twice) and its backend."""
        try:
            tc = self._normalize(call)
            entry = self.catalogue.entry(tc.tool)
        except RuntimeToolError as exc:
            raise NeedsEventLoop("the call is rejected on the async path") from exc
        kind = entry.backend
        backend = self._backends.get(kind)
        if (
            backend is None
            or kind not in self._started
            or not getattr(backend, "sync_capable", False)
        ):
            raise NeedsEventLoop(f"backend {kind!r} runs on the event loop")
        if self.approver is not None and is_async_callable(self.approver):
            raise NeedsEventLoop("the approver is async")
        return tc, entry, backend

    def _admit(
        self, st: _CallState, session: str, profile: str | None
    ) -> tuple[ToolSpec, Decision]:
        """Normalise and look up (unless call_sync already did), validate, decide. Raises on
        refusal. ``session`` is the budgets' session; the environment is ``st.session``'s
        (the caller's own: an MCP session's)."""
        st.tc = tc = st.tc or self._normalize(st.raw)
        # The policy derives the tool's environment from the session's (Decision.env). Read
        # without making a store: a session that never set a variable keeps none.
        env = self._session_env.get(st.session or session)
        tc.context["env"] = env if env is not None else _NO_ENV
        if env:
            # set_env keeps it within bounds; this holds them for a store changed through
            # the API too (every sandboxed call carries it in one bounded control packet).
            check_env_size(env)
        if self.events.active:
            # A copy: a subscriber holding the live dict could change the arguments after
            # the policy decided on them (a stream reader runs while the call goes on).
            data = {"arguments": copy.deepcopy(tc.arguments)}
            self.events.emit(Event("requested", tc.call_id, tc.tool, data))
        entry = st.entry
        if entry is None:
            try:
                entry = self.catalogue.entry(tc.tool)
            except ToolNotFound as exc:
                raise self._not_served(tc.tool, exc) from None
            st.entry = entry
        st.spec = spec = entry.spec
        entry.args.validate_arguments(spec.name, tc.arguments)
        check_env_arguments(spec.arg_roles, tc.arguments)  # a NUL: before the policy reads it
        st.decision = decision = self._reserve_budget(
            st, session, spec.name, self.policy.decide(tc, spec, profile=profile)
        )
        if decision.action == "deny":
            raise PolicyDenied(
                f"{spec.name}: denied by policy rule {decision.rule!r}"
                + (f": {'; '.join(decision.reasons)}" if decision.reasons else ""),
                rule=decision.rule,
                reasons=decision.reasons,
            )
        return spec, decision

    def _not_served(self, tool: str, exc: ToolNotFound) -> ToolNotFound:
        """``exc``, or when ``tool`` is one of the policy's ``[[mcp_servers]]`` (a
        ``<prefix>__<tool>`` name), a ToolNotFound saying where it is served: such tools are
        listed only while ``runtime serve --mcp`` runs their server, and a bare "no tool
        named" sent the user looking for a typo."""
        from runtime.mcp.external import SEPARATOR, placeholder_spec

        if BackendKind.MCP.value in self._backends:  # serve --mcp: its proxy lists them
            return exc
        document = getattr(self.policy, "document", None)
        servers = list(getattr(document, "mcp_servers", None) or ())
        if not servers or placeholder_spec(servers, tool) is None:
            return exc
        prefix = tool.partition(SEPARATOR)[0]
        server = next(s for s in servers if s.tool_prefix == prefix)
        return ToolNotFound(
            f"no tool named {tool!r} in this broker: it is a tool of the policy's MCP server "
            f"{server.name!r} ([[mcp_servers]]), which runs only under 'runtime serve --mcp "
            "--policy POLICY' (call it through that MCP server)",
            tool=tool,
            mcp_server=server.name,
        )

    def _start(self, st: _CallState, backend: Backend, session: str) -> ExecRequest:
        """Write the audit write-ahead record (fail closed) and build the backend request."""
        assert st.tc is not None and st.spec is not None and st.decision is not None
        tc, spec, decision = st.tc, st.spec, st.decision
        st.fingerprint = fingerprint_for(backend, spec)
        assert st.entry is not None
        st.backend_name = st.entry.backend
        arguments_json = self.audit.canonical_arguments(tc.arguments)
        self.audit.record_request(
            call_id=tc.call_id,
            tool=spec.name,
            arguments=tc.arguments,
            decision=self._audit_decision(decision),
            backend=st.backend_name,
            sandbox=self._audit_sandbox(st.fingerprint),
            returning=False,
            defer=True,
            arguments_bytes=arguments_json,
            session=st.session,
        )
        st.audited = True  # from here the call counts against its budget (reserved above)
        st.channel = channel = CallChannel(
            spec, decision, self._gateway_for_egress, self._ask_user_hook, self._redact_url
        )
        # decision.limits already has the manifest's own caps applied by the policy.
        limits = decision.limits
        return ExecRequest(
            call_id=tc.call_id,
            spec=spec,
            arguments=tc.arguments,
            workspace=self.workspace,
            limits=limits,
            decision=decision,
            env=decision.env,
            # The session whose environment the host tools (set_env, get_env) work on.
            session=st.session or session,
            # Only what the manifest declares and the decision grants (see _channel.py).
            broker_requests=channel,
            arguments_json=arguments_json,
        )

    def _audit_decision(self, decision: Decision) -> PreparedObject:
        """The decision as its audit records show it, prepared once per distinct value."""
        key = (decision.action, decision.rule, tuple(decision.reasons))
        prepared = self._prepared.get(key)
        if prepared is None:
            shown = {"action": decision.action, "rule": decision.rule, "reasons": decision.reasons}
            prepared = self._prepare("decision", shown, key)
        return prepared

    def _audit_sandbox(self, fingerprint: Fingerprint) -> PreparedObject | dict[str, Any]:
        last = self._last_sandbox
        if last is not None and last[0] is fingerprint:
            return last[1]
        try:
            prepared = self._prepared.get(fingerprint)
        except TypeError:  # a backend's own Fingerprint subclass with unhashable fields
            return fingerprint.as_dict()
        if prepared is None:
            prepared = self._prepare("sandbox", fingerprint.as_dict(), fingerprint)
        self._last_sandbox = (fingerprint, prepared)
        return prepared

    def _prepare(self, what: str, value: dict[str, Any], key: Any) -> PreparedObject:
        # Reasons can quote arguments (a refused command): bound the memo.
        if len(self._prepared) >= _PREPARED_MAX:
            self._prepared.clear()
        prepared = self._prepared[key] = self.audit.prepare(what, value)
        return prepared

    def _check_outcome(self, st: _CallState) -> None:
        assert st.outcome is not None and st.entry is not None and st.decision is not None
        if st.outcome.fingerprint is not None:
            st.fingerprint = st.outcome.fingerprint
        st.result_bytes = self._check_result(
            st.entry.spec, st.decision.limits, st.outcome.result, st.entry.result
        )

    def _closed_under(self, st: _CallState, exc: SandboxError) -> SandboxError:
        """A call whose backend was ended by :meth:`aclose` while it ran: the error type
        stays ``sandbox_error`` (DESIGN §7 has no ``cancelled`` type), but the message and
        ``details.reason`` say what happened and the audit records the outcome
        ``cancelled``."""
        if not self._closed or not st.audited:
            return exc
        st.cancelled = True
        closed = SandboxError(
            f"{st.tc.tool if st.tc else 'the call'}: the broker was closed while the call "
            f"ran ({exc.message})",
            usage=exc.usage,
            **{**exc.details, "reason": "broker_closed"},
        )
        closed.__cause__ = exc
        return closed

    def _internal(self, st: _CallState, exc: Exception) -> InternalError:
        log.exception("internal error in call %s", st.tc.call_id if st.tc else "?")
        return InternalError(f"internal error: {type(exc).__name__}: {exc}")

    def _normalize(self, call: Any) -> ToolCall:
        if isinstance(call, (bytes, str)):
            return parse_call_bytes(call, self.call_limits)
        return normalize_call(call, self.call_limits)

    def _reserve_budget(
        self, st: _CallState, session: str, tool: str, decision: Decision
    ) -> Decision:
        """Check the tool's per-session budget and take one call of it, in one step: the
        decision is denied (rule ``budget.TOOL``) when the calls run, running and waiting
        (for an approver, a backend start, a slot) already use it up. Checked here and
        counted only once the call ran, concurrent calls (``call_many``, an awaiting
        approver) all passed the check. A call that never reaches its write-ahead record
        (refused, not approved, its backend failed to start, the broker closed) gives its
        reservation back in :meth:`_finish`; one that ran keeps it whatever its outcome (a
        failed or cancelled call used the tool)."""
        if decision.action == "deny":
            return decision
        budget = self.policy.budget(tool)
        if budget is None:
            return decision
        key = (session, tool)
        with self._budget_lock:
            used = self._budget_used.get(key, 0)
            if used < budget:
                self._budget_used[key] = used + 1
                st.budget_key = key
                return decision
        return decision.model_copy(
            update={
                "action": "deny",
                "rule": f"budget.{tool}",
                "reasons": [f"{tool} may be called at most {budget} times per session"],
            }
        )

    def _release_budget(self, st: _CallState) -> None:
        key, st.budget_key = st.budget_key, None
        if key is not None and not st.audited:
            with self._budget_lock:
                self._budget_used[key] -= 1

    async def _approve(self, st: _CallState, decision: Decision) -> None:
        assert st.tc is not None
        tc = st.tc
        if self.approver is None:
            raise ApprovalRequired(
                f"{tc.tool}: policy rule {decision.rule!r} asks for approval and no approver "
                "is configured",
                rule=decision.rule,
                reasons=decision.reasons,
            )
        approver = self.approver
        try:
            if is_async_callable(approver):
                verdict = await approver(tc, decision)
            else:
                # A synchronous approver (a prompt at a terminal) blocks: run inline, it
                # stalled the loop, every other call and its timeout with it, and a
                # cancellation (SyncBroker's Ctrl-C or SIGTERM, the CLI's) waited for its
                # answer. In a worker thread, abandoned when the call is cancelled.
                verdict = await anyio.to_thread.run_sync(
                    approver, tc, decision, abandon_on_cancel=True
                )
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except _APPROVER_REFUSALS:
            raise
        except Exception as exc:
            raise _approver_failed(tc.tool, decision, exc) from exc
        _approval(tc.tool, decision, verdict)
        st.decision = decision.model_copy(update={"reasons": [*decision.reasons, "approved"]})

    def _approve_sync(self, st: _CallState, decision: Decision) -> None:
        assert st.tc is not None
        if self.approver is None:
            raise ApprovalRequired(
                f"{st.tc.tool}: policy rule {decision.rule!r} asks for approval and no "
                "approver is configured",
                rule=decision.rule,
                reasons=decision.reasons,
            )
        try:
            verdict = self.approver(st.tc, decision)
            if inspect.isawaitable(verdict):
                verdict = self._await_verdict(verdict)
        except _APPROVER_REFUSALS:
            raise
        except Exception as exc:
            raise _approver_failed(st.tc.tool, decision, exc) from exc
        _approval(st.tc.tool, decision, verdict)
        st.decision = decision.model_copy(update={"reasons": [*decision.reasons, "approved"]})

    def _await_verdict(self, verdict: Awaitable[Any]) -> Any:
        """The answer an awaitable verdict gives, awaited on the broker's loop as the async
        path awaits it: a synchronous approver may return one (a lambda returning a
        coroutine), which no check made before the call can tell. It was taken for the
        approver's answer (not True: the call refused, the coroutine never awaited), so the
        first call of such an approver (on the loop: its backend was not started) ran and
        the next ones (synchronous path) did not. Without a loop to await it (call_sync used
        without SyncBroker), it is closed and the approver counts as failed."""
        run = self._await_from_thread
        if run is None:
            close_awaitable(verdict)  # never started: no "never awaited" warning
            raise RuntimeError("it returned an awaitable, and no event loop can await it here")
        return run(verdict)

    def _check_result(
        self, spec: ToolSpec, limits: Limits, result: Any, validator: SchemaValidator | None
    ) -> bytes | None:
        """Size cap, JSON data, nesting, result schema; returns the result's canonical bytes
        (sized here, then digested by the completion record: one serialisation per call). A
        result that is not JSON data (a lone surrogate, NaN, bytes, a key that is not a
        string) is the tool's error: before, the audit log refused it at the completion
        record, and the call was left with no completion (listed as interrupted). One nested
        deeper than :data:`~runtime._depth.RESULT_MAX_DEPTH` is ``output_too_large``, here,
        for every backend (sandbox, host, wasm, MCP proxy)."""
        refused: str | None = None
        try:
            canonical: bytes | None = self.audit.canonical_result(result)
        except AuditError as exc:
            canonical, refused = None, exc.message.removeprefix("audit: ")
        except (ValueError, TypeError, RecursionError) as exc:  # an int past 4300 digits
            canonical, refused = None, str(exc)
        if canonical is not None:
            size = len(canonical)
            if size > limits.output_bytes:  # the preview only for the error (~1 µs a call)
                preview = canonical[:PREVIEW_CHARS].decode("utf-8", "replace")
        else:  # not even text: refused below
            size, preview = unencodable_result(result)
        if size > limits.output_bytes:
            raise OutputTooLarge(
                too_large_message(spec.name, size, limits.output_bytes),
                limit=limits.output_bytes,
                preview=preview,
            )
        # Fewer brackets than the limit (inside strings too) cannot nest deeper: most results
        # are never walked. A value too deep for the encoder's stack (refused) is walked.
        brackets = RESULT_MAX_DEPTH + 1
        if canonical is not None:
            brackets = canonical.count(b"[") + canonical.count(b"{")
        if brackets > RESULT_MAX_DEPTH and nests_deeper(result, RESULT_MAX_DEPTH):
            raise OutputTooLarge(
                f"{spec.name}: result nests arrays/objects deeper than {RESULT_MAX_DEPTH} "
                "levels, the limit of every result",
                reason="result_too_deep",
                max_depth=RESULT_MAX_DEPTH,
            )
        if refused is not None:
            raise ToolFailed(
                f"{spec.name}: the tool returned a result that is not JSON data ({refused})",
                reason="result_not_json",
            )
        if validator is not None:
            validator.validate_result(spec.name, result)
        return canonical

    def _finish(self, st: _CallState) -> ToolResult:
        if st.budget_key is not None:
            self._release_budget(st)
        tc, spec, decision, fingerprint = st.tc, st.spec, st.decision, st.fingerprint
        outcome, error, audited = st.outcome, st.error, st.audited
        # The completion of a call that ran follows its journaled write-ahead record.
        defer = audited
        duration_ms = (time.perf_counter() - st.t0) * 1000
        if tc is not None:
            call_id, tool = tc.call_id, tc.tool
        else:
            raw = _raw_object(st.raw, self.call_limits)
            call_id, tool = _raw_call_id(raw), _raw_tool(raw)
        backend_name = st.backend_name
        if backend_name is None and spec is not None:
            backend_name = spec.backend.value
        usage_data: dict[str, Any] = dict(outcome.usage) if outcome else {}
        if error is not None and isinstance(getattr(error, "usage", None), dict):
            usage_data.update(error.usage)  # type: ignore[attr-defined]
        if st.channel is not None:
            egress = st.channel.usage()
            if egress is not None:  # what the tool asked of the network, refusals included
                usage_data["egress"] = egress
        if error is None and outcome is None:
            # Fail safe: a call is a success only with the outcome its backend returned. One
            # that reached here with neither (a path that left an exception unrecorded) was
            # recorded as a success that never ran.
            error = st.error = InternalError("internal error: the call ended without an outcome")
        success = error is None
        if st.cancelled:
            outcome_name = "cancelled"
        elif success:
            outcome_name = "success"
        elif isinstance(error, (PolicyDenied, ApprovalRequired)):
            outcome_name = "denied"
        else:
            outcome_name = "error"
        result_value = outcome.result if (outcome is not None and success) else None
        # A call on a closed broker (or one that raced its close) was refused before it ran,
        # and its log is closed too: nothing can be recorded, and its result says why. It
        # tried, and logged "audit log ... is closed" as an error for every such call.
        unrecordable = not audited and self._closed and self.audit.closed
        try:
            # Audit writes are synchronous: a cancellation cannot interrupt them halfway.
            if unrecordable:
                pass
            elif not audited and not isinstance(error, AuditError):
                # Calls refused before running are recorded too: request + completion.
                self.audit.record_request(
                    call_id=call_id,
                    tool=tool,
                    arguments=tc.arguments if tc else None,
                    decision=_decision_dict(decision),
                    backend=backend_name,
                    sandbox=None,
                    returning=False,
                    session=st.session,
                )
                # Committed, not journaled: refusals are rare on a hot path, and a reader
                # in another process (an MCP client checking the log) sees them at once.
                audited = True
                defer = False
            if audited:
                self.audit.record_completion(
                    call_id=call_id,
                    tool=tool,
                    outcome=outcome_name,
                    error_type=str(error.error_type) if error else None,
                    duration_ms=duration_ms,
                    usage=usage_data or None,
                    result=result_value,
                    result_bytes=st.result_bytes if result_value is not None else None,
                    backend=backend_name,
                    sandbox=self._audit_sandbox(fingerprint) if fingerprint else None,
                    returning=False,
                    defer=defer,
                    session=st.session,
                )
        except (AuditError, ValueError, TypeError, RecursionError) as raised:
            # Hazard: a value the audit encoder cannot hold raised ValueError (an int past
            # CPython's 4300-digit text limit) out of Broker.call, with no result and no
            # record. The shapes walk refuses such arguments first; whatever else gets here
            # fails closed as an audit error, a result like any other.
            exc = (
                raised
                if isinstance(raised, AuditError)
                else AuditError(f"audit: the call could not be recorded: {raised}")
            )
            log.error("audit log write failed for %s: %s", call_id, exc)
            if error is None and outcome is None:
                error = exc
            elif error is None:
                # The tool ran; its completion could not be recorded. The request record
                # stands, so the call reads as interrupted; report the failure loudly.
                error = exc
                success = False
                result_value = None
        error_info = None
        error_type = None
        if error is not None:
            error_type = str(error.error_type)
            details = {k: v for k, v in error.details.items() if _jsonable(v)}
            if isinstance(error, AuditError):
                details["fail_closed"] = True
            error_info = ErrorInfo(type=error.error_type, message=error.message, details=details)
        result = _fast.tool_result(
            call_id=call_id,
            tool=tool,
            success=success,
            result=result_value,
            error=error_info,
            started_at=st.started,
            completed_at=utcnow(),
            duration_ms=duration_ms,
            backend=backend_name,
            usage=_fast.usage(usage_data),
            decision={"action": decision.action, "rule": decision.rule} if decision else None,
        )
        if spec is not None:
            self.catalogue.record_call(spec.name, success=success, duration_ms=duration_ms)
        if self.events.active:
            kind: EventKind = "completed" if success else "failed"
            if outcome_name == "denied":
                kind = "denied"
            info: dict[str, Any] = {"error_type": error_type, "duration_ms": duration_ms}
            if success:
                info["result"] = copy.deepcopy(result_value)  # the caller's is its own
            else:
                info["error"] = error_info.message if error_info is not None else None
            self.events.emit(Event(kind, call_id, tool, info))
        return result


def _prespawn() -> PrespawnedZygote | None:
    """A fork-server process spawned now; None when it cannot be (the first sandboxed call
    then starts one as usual, and says why it cannot)."""
    from runtime.backends.sandbox._prespawn import PrespawnedZygote

    try:
        return PrespawnedZygote()
    except SandboxError:
        return None


def _unwritable(exc: OSError) -> bool:
    """The directory could not be made for lack of write access (not a file in its way)."""
    return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


def _decision_dict(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    return {"action": decision.action, "rule": decision.rule, "reasons": decision.reasons}


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def _raw_object(raw: Any, limits: CallLimits) -> Any:
    """The decoded call behind ``raw`` when it is call text (the CLI and raw-text API callers
    hand the broker bytes), so that a call refused before it was normalised (broken
    arguments, schema of the shape) still answers to its provider's id and tool name: an
    agent loop posts the result back under that id. Text that is not a JSON object within
    the call caps gives None (the caller then draws a fresh id)."""
    if not isinstance(raw, (bytes, str)):
        return raw
    if len(raw) > limits.max_bytes:
        return None
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        if call_text_too_deep(text, limits):
            return None
        return json.loads(text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None


def _raw_call_id(raw: Any) -> str:
    from runtime.models import new_call_id

    if isinstance(raw, dict):
        for key in ("call_id", "id"):
            value = raw.get(key)
            if isinstance(value, str) and 0 < len(value) <= 256 and _is_text(value):
                return value
    return new_call_id()


def _check_sessions(*sessions: object) -> None:
    """TypeError or ValueError for a session argument that no audit record can hold (it was
    an internal_error result, with the session name lost)."""
    for session in sessions:
        if session is None or (type(session) is str and session.isascii()):
            continue
        if not isinstance(session, str):
            raise TypeError(f"session must be a str or None, not {type(session).__name__}")
        if not _is_text(session):
            raise ValueError("session must be Unicode text (it holds a lone surrogate)")


def _is_text(value: str) -> bool:
    """False for a string with a lone surrogate (valid JSON, not Unicode text): no audit
    record or result can carry it as an id."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _raw_tool(raw: Any) -> str:
    if isinstance(raw, dict):
        for value in (
            raw.get("tool"),
            raw.get("name"),
            (raw.get("function") or {}).get("name")
            if isinstance(raw.get("function"), dict)
            else None,
            raw["params"].get("name") if isinstance(raw.get("params"), dict) else None,
        ):
            if isinstance(value, str) and value and _is_text(value[:64]):
                return value[:64]
    return "<invalid>"


def _approval(tool: str, decision: Decision, verdict: object) -> None:
    """Only ``True`` approves. ``False`` (or ``None``) is a refusal; anything else is an
    approver bug, and the call does not run: a truthy answer such as ``"no"`` or a
    non-empty dict approved the call before."""
    if verdict is True:
        return
    if verdict is False or verdict is None:
        raise PolicyDenied(
            f"{tool}: the approver refused the call", rule=decision.rule, approved=False
        )
    raise ApprovalRequired(
        f"{tool}: the approver answered {type(verdict).__name__} {verdict!r:.80}, not True or "
        "False: the call did not run",
        rule=decision.rule,
        reasons=decision.reasons,
        reason="approver_answer",
    )


#: What an approver raises on purpose: its own answer, typed, with its message and details
#: (the MCP approver's "the client cannot be asked", "waiting for the client's approval").
#: They pass through unchanged, neither wrapped as "the approver failed" nor logged with a
#: traceback. Only the outcomes of an approval are: another RuntimeToolError raised by an
#: approver (a timeout, a sandbox error) would claim a call that never started ran or broke,
#: so it stays an approver failure, as any other exception does.
_APPROVER_REFUSALS = (ApprovalRequired, PolicyDenied)


def _approver_failed(tool: str, decision: Decision, exc: Exception) -> ApprovalRequired:
    """An approver that raised: nothing approved the call, so it does not run (it was an
    internal_error, which names the runtime; the approver is the embedding application's)."""
    log.warning("approver raised for %s", tool, exc_info=exc)
    return ApprovalRequired(
        f"{tool}: the approver failed ({type(exc).__name__}: {exc}); the call did not run",
        rule=decision.rule,
        reasons=decision.reasons,
        reason="approver_failed",
    )
