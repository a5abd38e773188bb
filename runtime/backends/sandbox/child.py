"""The per-call child: one linear set-up, phase by phase, then the tool. Runs after a clone.

Process tree of one call (bubblewrap's ``main`` → ``setup_newroot`` is the model), for a
tool that runs programs (``plan.exec``)::

    zygote ── I  pid 1 of the call's namespaces (one raw clone making its user and pid
              │  namespaces): maps ids, drops to the sandbox uid, unshares the mount, net,
              │  ipc and uts namespaces, forks T, execs pid1.c (the reaper)
              └── T  the new root, pivot_root, then no_new_privs, rlimits, Landlock,
                     seccomp LAST, then the tool

and for a Python tool that runs no programs, one copy of the zygote per call::

    zygote ── I  pid 1 of the call's namespaces, and the tool process itself: the same
                 steps as I, then T's, without the fork and the exec

The single process needs no reaper for what it may fork: its orphans are its own children
(zombies until it exits, bounded by the pids cgroup and RLIMIT_NPROC), and its exit, being
pid 1's, makes the kernel SIGKILL the rest of the namespace before the zygote can reap it.
Being init it would drop the signals it has no handler for (the zygote's SIGTERM, a self
sent SIGSEGV, RLIMIT_CPU's SIGXCPU): ``sigexit.c`` handles each fatal one by exiting with
128 + its number, as pid1.c reports a killed tool. Without that library every call keeps
the reaper.

Any failing step sends one ``setup_error`` frame naming the phase and errno on the call
socket and exits with :data:`EXIT_SETUP`: set-up never limps on with half a wall. A
MemoryError in the tool process outside the tool function (the call's memory limit is in
force: its cgroup, its rlimits) sends the tool's memory error frame and exits with
:data:`EXIT_MEMORY` (``_out_of_memory``). Nothing in this module returns to the zygote's
loop: every path ends in ``os._exit``.

Hazards: this code runs in a forked copy of a Python process, so it must not touch the
zygote's sockets (closed first thing) and must not take locks other threads held (the zygote
has no threads). Exit statuses travel as data: a child killed by signal ``n`` is reported by
its parent as exit code ``128 + n``.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stub: the C half of signal
import contextlib
import os
import shutil
import signal
import socket
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from runtime.backends.sandbox import _linux, landlock, newroot, walls
from runtime.backends.sandbox._setup import Phase, SetupFailed, exit_code, write
from runtime.backends.sandbox.newroot import WORKSPACE
from runtime.errors import RuntimeToolError, ToolFailed
from runtime.frames import (
    HEADER,
    FrameDecoder,
    FrameError,
    decode_body,
    encode_frame,
    result_frame_bound,
)
from runtime.toolkit import (
    PREVIEW_CHARS,
    ToolContext,
    load_entry,
    result_json,
    unencodable_result,
    warm_up,
)

if TYPE_CHECKING:
    from runtime.models import Limits

__all__ = [
    "CALL_NAME",
    "EXIT_MEMORY",
    "EXIT_PROTOCOL",
    "EXIT_SETUP",
    "PID1_ARGV0",
    "CallPlan",
    "ChildConfig",
    "ChildLimits",
    "FolderTool",
    "SpareTools",
    "call_workspace",
    "clone_flags",
    "first_steps",
    "identity_ops",
    "python_trees",
    "run_call",
    "single_process",
    "stream_detail",
    "unshare_flags",
    "wall_ops",
]

#: Exit code after a ``setup_error`` frame was sent.
EXIT_SETUP = 125
#: Exit code when the call frame from the broker was missing or invalid.
EXIT_PROTOCOL = 126
#: Exit code of a call's tool process that ran out of memory outside its tool function
#: (reading its call frame, the last set-up steps, sending its result: ``_out_of_memory``),
#: after it sent the frame that says so if it could. The broker reports either as
#: ``resource_limit`` (``memory_mb``). A tool may exit with it, or send that frame, itself:
#: either way it claims only that it ran out of memory.
EXIT_MEMORY = 124

SANDBOX_UID = walls.SANDBOX_UID  # the tool's uid/gid *inside* its user namespace
_REAPER_SIGNALS = frozenset({signal.SIGTERM, signal.SIGCHLD})
#: A call's process name (``comm``) until it runs a program (pid1.c or the tool's own).
CALL_NAME = b"runtime-call"
#: The tiny pid 1's command line starts with this (process listings tell it from a tool's).
PID1_ARGV0 = "runtime.backends.sandbox.pid1"
# Signal calls on the set-up path go to ``_signal``, the C module under ``signal``: the
# wrappers convert every number they return to an enum member, and on a fresh copy of the
# zygote that first Enum call costs ~0.3 ms of page faults (pid 1 and the tool each).
# Hazard: the C function takes SIG_DFL only as a plain int (the enum member is refused).
_SIG_DFL = int(signal.SIG_DFL)
_AT_SYMLINK_NOFOLLOW = 0x100
ToolFunc = Callable[[dict[str, Any], ToolContext], Any]


@dataclass(frozen=True, slots=True)
class ChildConfig:
    """What the zygote decided once: identity, host features, test-only switches."""

    host_uid: int  # unprivileged host uid the sandbox runs as
    host_gid: int
    drop_root: bool  # the zygote is root: setresuid to host_uid before unsharing
    landlock_abi: int
    bpf_python: bytes
    bpf_exec: bytes
    state_dirs: tuple[str, ...] = (".runtime",)
    disable: frozenset[str] = frozenset()
    pid1_fd: int = -1  # sealed memfd of the tiny pid 1 (``pid1.c``), -1 if not built
    #: ``sigexit.c``'s installer (``pid1.load_sigexit``), None if not built: then a Python
    #: tool that is pid 1 could not die of a signal, and every call keeps a reaper.
    sigexit: Callable[[], int] | None = None
    #: ``pid1.self_kill_filter()``: loaded by a tool that is pid 1, beside the main filter.
    bpf_self_kill: bytes = b""
    #: ``mountops.c``'s runner of the new root's operations (``pid1.load_mount_ops``), None
    #: if not built: then ``newroot.build`` runs the same operations in Python.
    mount_ops: newroot.MountOps | None = None
    #: Every call is in a pids cgroup (the zygote made its base): RLIMIT_NPROC is then set
    #: above ``pids`` so that the cgroup refuses first and counts it (``walls.nproc_rlimit``).
    pids_cgroup: bool = False


@dataclass(frozen=True, slots=True)
class ChildLimits:
    """The call's limits as the child reads them: the fields of ``runtime.models.Limits``.

    A plain dataclass on purpose: the child path must not import pydantic, whose heap every
    fork-server copy would otherwise carry (and pay for on fork and exit). The broker sent a
    validated ``Limits.model_dump()``; unknown keys are ignored, missing ones default."""

    timeout_s: float = 30.0
    cpu_s: int = 30
    memory_mb: int = 512
    pids: int = 64
    nofile: int = 256
    fsize_mb: int = 256
    output_bytes: int = 1_048_576
    disk_mb: int = 2048  # read by the zygote's disk watch, not by the child
    wasm_fuel: int = 2_000_000_000
    wasm_memory_mb: int = 64

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChildLimits:
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


@dataclass(frozen=True, slots=True)
class CallPlan:
    """One call's sandbox profile, sent by the broker (trusted: decided by the policy)."""

    call_id: str
    workspace: str | None
    access: str  # none | ro | rw
    exec: bool
    limits: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    #: Policy-denied paths to mask in the workspace (``masks.MaskSpec.as_plan``); {} = none.
    masks: dict[str, Any] = field(default_factory=dict)
    #: The policy's narrow ``[paths]`` globs ({"read": [...] | None, "write": [...] | None})
    #: that Landlock applies to this call (``walls.landlock_rules``), and the mounts too for
    #: narrowed write globs (``_narrow.write_binds``: the workspace read-only, the write
    #: prefixes writable; ``"mounts": False`` only when TEST-ONLY switched off); {} = the
    #: whole workspace.
    narrow: dict[str, Any] = field(default_factory=dict)
    #: A folder tool's folder (resolved host path; "" for none): bound read-only at the same
    #: path, readable through Landlock, so that the call imports the tool there (FolderTool).
    tool_dir: str = ""


def _send(fd: int, message: dict[str, Any]) -> None:
    data = encode_frame(message)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


#: The tool's error frame for a MemoryError (``_serve``), encoded once, here: where it is
#: sent for want of memory there may be none left to encode it.
_MEMORY_ERROR = {"type": "error", "kind": "memory", "message": "memory limit reached"}
_MEMORY_FRAME = encode_frame(_MEMORY_ERROR)


def _out_of_memory(call_fd: int) -> NoReturn:
    """End a call's tool process after a MemoryError outside its tool function: past its
    limits (its cgroup, and from the rlimits phase on RLIMIT_AS for ``memory_mb``), a copy
    of the zygote may not even decode a large call frame (a 900 KB write_file under
    ``memory_mb = 24``). That escaped to the zygote's last resort, exit with
    :data:`EXIT_SETUP`: a "set-up failure" for a memory limit that was too small. Now the
    memory error frame goes to the broker (``call_fd``; -1 for none: a spare before its
    call) when it can, and the exit status says it too (:data:`EXIT_MEMORY`)."""
    if call_fd >= 0:
        with contextlib.suppress(BaseException):
            view = memoryview(_MEMORY_FRAME)
            while view:
                view = view[os.write(call_fd, view) :]
    os._exit(EXIT_MEMORY)


def _fail(call_fd: int, exc: SetupFailed) -> NoReturn:
    """Report a failed set-up step and exit. The broker takes the frame for a set-up
    failure only from a child that made no broker request and exits with this status
    (``_outcome.setup_error``): the tool, once it runs, can send the same frame."""
    try:
        _send(
            call_fd,
            {"type": "setup_error", "phase": exc.phase, "errno": exc.errno, "message": exc.message},
        )
    finally:
        os._exit(EXIT_SETUP)


def _close_all_but(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep | {1 << 20}):
        if fd >= low:
            os.closerange(low, min(fd, 1 << 20))
            low = fd + 1


def clone_flags(disable: frozenset[str]) -> int:
    """The namespaces the zygote's clone makes: user (it owns the others, and must be made
    with the sandbox uid as the effective uid) and pid (the child must be its pid 1). The
    rest are the child's own ``unshare`` (``unshare_flags``).

    ("userns" is off only in best_effort mode on a host without user namespaces: then there
    are no namespaces at all and the remaining walls are Landlock and seccomp.)"""
    if "userns" in disable:
        return 0
    return _linux.CLONE_NEWUSER | (0 if "pidns" in disable else _linux.CLONE_NEWPID)


def unshare_flags(disable: frozenset[str]) -> int:
    """The namespaces pid 1 makes itself, first thing: mount, net, ipc, uts. Owned by the
    call's user namespace exactly as if the clone had made them (a namespace is owned by
    its creator's user namespace). Why not in the clone: creating a network namespace can
    wait for the kernel's lock shared with the teardown of the previous call's (measured:
    ~3 ms of wall for ~0.3 ms of CPU), and in the zygote that wait held up every reap and
    message; in the child it is off the zygote's loop (a spare pays it before its call)."""
    if "userns" in disable:
        return 0
    flags = _linux.CLONE_NEWIPC | _linux.CLONE_NEWUTS
    flags |= 0 if "mountns" in disable else _linux.CLONE_NEWNS
    flags |= 0 if "netns" in disable else _linux.CLONE_NEWNET
    return flags


def python_trees(tool_dir: str = "") -> dict[str, int]:
    """Detached read-only clones of the interpreter's code (``newroot.python_paths``) and,
    for a folder tool, of its folder (``CallPlan.tool_dir``, also not executable). As
    root the zygote clones them before the call's namespaces exist: the sandbox uid may not
    traverse, say, a ``/root/.pyenv`` that holds the interpreter. The caller closes them.

    The folder is the path the broker resolved; it is opened without following a link at
    its last component and must still be a directory, so that a folder swapped for a link
    since cannot bind another tree. Links inside it resolve in the call's own root."""
    fds: dict[str, int] = {}
    attrs = _linux.MOUNT_ATTR_RDONLY | _linux.MOUNT_ATTR_NOSUID | _linux.MOUNT_ATTR_NODEV
    try:
        for path in newroot.python_paths():
            fd = _linux.open_tree(path, _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC)
            fds[path] = fd
            _linux.mount_setattr(fd, attrs)
        if tool_dir:
            flags = _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC | _AT_SYMLINK_NOFOLLOW
            fd = _linux.open_tree(tool_dir, flags)
            fds[tool_dir] = fd
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise OSError(20, f"the tool folder {tool_dir} is no longer a directory")
            _linux.mount_setattr(fd, attrs | _linux.MOUNT_ATTR_NOEXEC)
    except BaseException:
        for fd in fds.values():
            os.close(fd)
        raise
    return fds


def single_process(cfg: ChildConfig, plan: CallPlan) -> bool:
    """Whether the call's pid 1 is the tool process itself (one copy of the zygote per call).

    Tools that run programs keep the reaper: a shell's jobs and their orphans must be
    collected while the shell waits on its own children. A tool that would be pid 1 needs
    ``sigexit`` (or there is no pid namespace, and it is not init)."""
    if plan.exec:
        return False
    init = "userns" not in cfg.disable and "pidns" not in cfg.disable
    return cfg.sigexit is not None or not init


def first_steps(cfg: ChildConfig, keep: set[int]) -> None:
    """The call's pid 1's first steps after its signal dispositions: its name, every
    descriptor but ``keep`` closed, its ids, maps, namespaces and session. One list in C
    (``identity_ops``) when ``mountops.so`` is loaded, else ``_identity``."""
    if cfg.mount_ops is not None:
        identity_ops(cfg).run(sorted(keep), cfg.mount_ops)
    else:
        _identity(cfg, keep)


def _identity(cfg: ChildConfig, keep: set[int]) -> None:
    """``first_steps`` in Python, phase by phase."""
    off = cfg.disable
    userns = "userns" not in off
    with Phase("fds"):
        # Not the name of the process it was cloned from (the cloner's).
        _linux.set_name(CALL_NAME)
        _close_all_but(keep)
    # Never host root. As root, the zygote cloned us with its effective ids
    # set to the sandbox uid/gid (so the user namespace is owned by the sandbox uid,
    # never by host root), but the real and saved ids are still 0 until the setres*id
    # below. Dumpable first: it lets us write our own /proc/self/uid_map.
    with Phase("uid_map"):
        _linux.prctl(4, 1)  # PR_SET_DUMPABLE
        if userns:
            # The sandbox user (1000 inside) is the unprivileged host uid; nothing else
            # is mapped, so no file can ever be owned by "root" inside.
            write("/proc/self/setgroups", "deny")
            write("/proc/self/uid_map", f"{SANDBOX_UID} {cfg.host_uid} 1\n")
            write("/proc/self/gid_map", f"{SANDBOX_UID} {cfg.host_gid} 1\n")
    with Phase("drop_uid"):
        if userns:
            # Every id becomes the sandbox uid; uid 0 is unmapped in this namespace, so
            # the capabilities it holds here (and only here) are kept for the mounts.
            os.setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
            os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
        elif cfg.drop_root:
            os.setgroups([])
            os.setresgid(cfg.host_gid, cfg.host_gid, cfg.host_gid)
            os.setresuid(cfg.host_uid, cfg.host_uid, cfg.host_uid)
        # Changing ids clears both; the zygote dying must end the call.
        _linux.prctl(4, 1)
        _linux.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    with Phase("unshare"):
        # Still in the zygote's mount, network, IPC and UTS namespaces until here (with
        # no capability over them: ours are only in the call's user namespace).
        flags = unshare_flags(off)
        if flags:
            _linux.unshare(flags)
    with Phase("session"):
        # Out of the zygote's process group and session: kill(0, ...) and kill(-pgid)
        # by the tool reach only the call's own processes (without Landlock's signal
        # scope, test-only, other calls run as the same host uid and share that group).
        os.setsid()


def identity_ops(cfg: ChildConfig) -> newroot.OpList:
    """``_identity`` as one list for ``mountops.c`` (``walls.identity_ops``, cached)."""
    userns = "userns" not in cfg.disable
    flags = unshare_flags(cfg.disable)
    return walls.identity_ops(CALL_NAME, userns, cfg.drop_root, cfg.host_uid, cfg.host_gid, flags)


def run_call(
    cfg: ChildConfig,
    plan: CallPlan,
    call_fd: int,
    tool: ToolFunc | Mapping[str, ToolFunc],
    *,
    ws_fd: int,
    py_fds: Mapping[str, int],
    cgroup_procs: tuple[str, ...],
) -> NoReturn:
    """I: pid 1 of the call's namespaces, cloned by the zygote into new user and pid
    namespaces (``clone_flags``). Maps ids, makes the other namespaces (``unshare_flags``),
    then either forks the tool and reaps, or (``single_process``)
    goes on to be the tool itself. Never returns.

    ``tool`` is the function to run, or — for a pre-forked spare — every loaded tool: the
    spare then completes every step, seccomp included, and waits on ``call_fd`` (its
    activation socket) for the real call socket and the tool's name. As root the zygote made
    ``ws_fd`` (the idmapped workspace tree) and ``py_fds``; unprivileged they are -1 and {}
    and this process clones them from inside its namespaces. ``cgroup_procs``: the
    call's ``cgroup.procs`` files (handed to the sandbox uid by the zygote), joined before
    the tool is forked, so that it and all it forks are counted.
    """
    off = cfg.disable
    userns = "userns" not in off
    try:
        # -- hygiene: default signal dispositions, and no handle of the zygote survives
        # (its control socket would let a child forge exit reports for other calls).
        with Phase("fds"):
            signal.set_wakeup_fd(-1)
            for sig in (
                signal.SIGCHLD,
                signal.SIGTERM,
                signal.SIGINT,
                signal.SIGPIPE,
                signal.SIGUSR1,
            ):
                _signal.signal(sig, _SIG_DFL)
        # -- the name, every other descriptor closed, then the identity: never host root
        # (``_identity``; as one list in C when loaded).
        first_steps(cfg, {call_fd, ws_fd, cfg.pid1_fd, *py_fds.values()})
        with Phase("cgroup"):
            # After the id drop: cgroup v1 lets the sandbox uid move only its own tasks.
            # "0" is this process (a pid would be read in its new pid namespace).
            for procs in cgroup_procs:
                write(procs, "0")
        if single_process(cfg, plan):
            # One copy per call: this process is the tool (its set-up is T's, below).
            _call_process(cfg, plan, call_fd, tool, ws_fd=ws_fd, py_fds=py_fds)
        with Phase("fork_tool"):
            # Blocked until the reaper takes them: a SIGTERM from the zygote may come at any
            # time, and pid 1 would silently drop it while it has no handler. The tool
            # unblocks them first thing (a fork inherits the mask, not pending signals).
            _signal.pthread_sigmask(signal.SIG_BLOCK, _REAPER_SIGNALS)
            # Closed on exec: the tool sees EOF once this process is the tiny reaper (or
            # gone), so no tool code ever runs beside a pid 1 that is still a dumpable copy
            # of the zygote.
            exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
            # Forked before the rest of the set-up, which the tool process does itself: the
            # pages that set-up writes are then copied once (in the tool), not once here and
            # again in the tool; this process only waits, so it writes almost nothing.
            tool_pid = os.fork()
        if tool_pid == 0:
            os.close(exec_w)
            _call_process(cfg, plan, call_fd, tool, ws_fd=ws_fd, py_fds=py_fds, exec_fd=exec_r)
        os.close(exec_r)
    except SetupFailed as exc:
        _fail(call_fd, exc)
    os.close(call_fd)
    for fd in (ws_fd, *py_fds.values()):
        if fd >= 0:
            os.close(fd)
    # The reaper: collect every orphan; when the tool itself ends, end the namespace with
    # its status (pid 1 exiting SIGKILLs all that is left: setsid, nohup, double forks).
    # SIGTERM from the zygote (timeout, cancel) goes to every process of the namespace;
    # without a pid namespace (test-only) "every process" would be all of the sandbox uid's,
    # so then only to the tool. After that SIGTERM the tool's end no longer ends the
    # namespace: the rest get the grace too (``_reap``). "Kill now" is the zygote's SIGKILL
    # to this process.
    target = tool_pid if "pidns" in off or not userns else -1
    if cfg.pid1_fd >= 0:
        # The reaper proper is pid1.c: this copy of the zygote's ~25 MB address space goes
        # now, while the call is set up or waits as a spare, not at the end of the call.
        with contextlib.suppress(OSError):
            os.execve(cfg.pid1_fd, [PID1_ARGV0, str(tool_pid), str(target)], {})  # noqa: S606
    os.close(exec_w)  # the Python reaper stays: the tool may go on
    _reap(tool_pid, target)


def _reap(tool_pid: int, target: int) -> NoReturn:
    """pid1.c in Python: reap every process; the tool's end ends the call with its status,
    except after a forwarded SIGTERM, when every process gets the zygote's grace: reaped
    until none is left, then the tool's status (the zygote's SIGKILL bounds the wait)."""
    terminating = False
    code = EXIT_PROTOCOL

    def on_term(_signum: int, _frame: Any) -> None:
        nonlocal terminating
        terminating = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    _signal.pthread_sigmask(signal.SIG_UNBLOCK, _REAPER_SIGNALS)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(code)  # none left (or the tool was never ours: EXIT_PROTOCOL)
        if pid == tool_pid:
            code = exit_code(status)
            if not terminating:
                os._exit(code)


def _call_process(
    cfg: ChildConfig,
    plan: CallPlan,
    call_fd: int,
    tool: ToolFunc | Mapping[str, ToolFunc],
    *,
    ws_fd: int,
    py_fds: Mapping[str, int],
    exec_fd: int = -1,
) -> NoReturn:
    """T, part one: the new root (pid 2 of the call's pid namespace, or pid 1 itself for a
    single-process call; with every capability in its user namespace: it mounts /proc of
    that pid namespace) and the host name; then the walls (``_tool``). Pivoting moves pid
    1's root too: it shares the mount namespace."""
    off = cfg.disable
    _signal.pthread_sigmask(signal.SIG_UNBLOCK, _REAPER_SIGNALS)
    try:
        handled = cfg.sigexit is not None and os.getpid() == 1
        if handled:
            with Phase("sigexit"):
                # This process is init: without a handler it would drop the zygote's
                # SIGTERM and every self-sent fatal signal (``sigexit.c``).
                err = cfg.sigexit()  # type: ignore[misc]
                if err < 0:
                    raise OSError(-err, os.strerror(-err))
        with Phase("tool_pdeathsig"):
            # The zygote's death ends the call. A tool that is init takes it as SIGTERM,
            # which sigexit.c turns into an exit: the same end, except that the tool can
            # hold it for the few system calls that must not be cut apart (toolkit_fs's
            # link and rename of a written file's temporary name: a SIGKILL between them
            # left the name in the workspace). It replaces the SIGKILL armed at drop_uid
            # in one prctl, so there is no moment without one. Nothing the tool runs
            # outlives it: when init exits, the kernel kills the rest of the namespace.
            _linux.prctl(1, signal.SIGTERM if handled else signal.SIGKILL)
        ws_fd, py_fds = _own_trees(cfg, plan, ws_fd, py_fds)
        limits = ChildLimits.from_dict(plan.limits)
        workspace = call_workspace(cfg, plan)
        if "mountns" not in off:
            newroot.build(
                plan,
                limits,
                ws_fd,
                py_fds,
                state_dirs=cfg.state_dirs,
                mount_proc="pidns" not in off,
                mount_ops=cfg.mount_ops,
            )
        with Phase("hostname"):
            if "userns" not in off:
                socket.sethostname("sandbox")  # the uts namespace hides the host's name
        if exec_fd >= 0:
            with Phase("pid1_exec"):
                os.read(exec_fd, 1)  # EOF: pid 1 has exec'd the reaper (or is gone)
                os.close(exec_fd)
    except SetupFailed as exc:
        _fail(call_fd, exc)
    _tool(cfg, plan, limits, call_fd, tool, workspace=workspace)


def _own_trees(
    cfg: ChildConfig, plan: CallPlan, ws_fd: int, py_fds: Mapping[str, int]
) -> tuple[int, Mapping[str, int]]:
    """Unprivileged, the workspace and the interpreter's code are cloned here, inside the
    call's user and mount namespaces (as root the zygote cloned them already)."""
    if "mountns" in cfg.disable:
        return ws_fd, py_fds
    if plan.workspace and ws_fd < 0 and plan.access != "none":
        with Phase("workspace_clone"):
            ws_fd = _linux.open_tree(
                plan.workspace, _linux.OPEN_TREE_CLONE | _linux.OPEN_TREE_CLOEXEC
            )
    if not py_fds:
        with Phase("python_trees"):
            py_fds = python_trees(plan.tool_dir)
    return ws_fd, py_fds


def _rlimits(cfg: ChildConfig, limits: ChildLimits) -> None:
    for res, soft, hard in walls.rlimits(limits, pids_cgroup=cfg.pids_cgroup):
        _linux.setrlimit(res, soft, hard)


def _landlock_rules(
    plan: CallPlan, workspace: str, private_tmp: bool
) -> list[tuple[str, int, int]]:
    rules = walls.landlock_rules(plan, workspace, private_tmp)
    return [
        (path, rights, how & walls.STRICT)
        for path, rights, how in rules
        if walls.present(path, how)
    ]


def call_workspace(cfg: ChildConfig, plan: CallPlan) -> str:
    """Where the tool finds the workspace: ``/workspace`` in its new root, or (without a
    mount namespace, test-only) the host path."""
    if "mountns" in cfg.disable:
        return plan.workspace or "/nonexistent"
    return WORKSPACE


def wall_ops(cfg: ChildConfig, plan: CallPlan, limits: ChildLimits) -> newroot.OpList:
    """The walls before seccomp as one list for ``mountops.c`` (``walls.py``): compiled once
    per profile, by the cloner, and found in the cache by every call of the profile."""
    rules = walls.landlock_rules(plan, call_workspace(cfg, plan), "mountns" not in cfg.disable)
    return walls.wall_ops(cfg.landlock_abi, cfg.disable, limits, rules, pids_cgroup=cfg.pids_cgroup)


def _walls(cfg: ChildConfig, plan: CallPlan, limits: ChildLimits, workspace: str) -> None:
    """The walls before seccomp, phase by phase in Python (without ``mountops.so``; what
    ``wall_ops`` compiles for it runs the same calls in the same order)."""
    off = cfg.disable
    with Phase("no_new_privs"):
        _linux.prctl(38, 1)  # PR_SET_NO_NEW_PRIVS: no setuid/file caps from here on
    with Phase("capabilities"):
        if "capdrop" not in off:
            _linux.capset_zero()
    with Phase("rlimits"):
        if "rlimits" not in off:
            _rlimits(cfg, limits)
    with Phase("landlock"):
        if "landlock" not in off and cfg.landlock_abi > 0:
            landlock.apply_ruleset(
                cfg.landlock_abi, _landlock_rules(plan, workspace, "mountns" not in off)
            )


def _tool(
    cfg: ChildConfig,
    plan: CallPlan,
    limits: ChildLimits,
    call_fd: int,
    tool: ToolFunc | Mapping[str, ToolFunc],
    *,
    workspace: str,
) -> NoReturn:
    """T: the last walls, in order, then the tool function. Seccomp is the final step."""
    off = cfg.disable
    try:
        with Phase("tool_fds"):
            # stdio is /dev/null; the frame socket is close-on-exec so exec'd programs never
            # hold the channel to the broker.
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.close(null)
            _close_all_but({call_fd})
            os.set_inheritable(call_fd, False)
        with Phase("tool_cwd"):
            os.chdir(workspace if plan.workspace and plan.access != "none" else "/tmp")
        # Environment: exactly the policy's, never the broker's or the zygote's.
        os.environ.clear()
        os.environ.update(plan.env)
        if cfg.mount_ops is not None:
            # The phases below, as one list run in C (the same calls, the same phases
            # named on failure).
            wall_ops(cfg, plan, limits).run([], cfg.mount_ops)
        else:
            _walls(cfg, plan, limits, workspace)
        with Phase("nondumpable"):
            # This process is a copy of the zygote: its heap holds what earlier calls sent it
            # (their plans, environments, paths). A program the tool runs has the same uid;
            # while this process is dumpable it may read that heap (/proc/PPID/mem). Not
            # dumpable, it may not (execve makes the program's own fresh image dumpable).
            # Only where programs run (seccomp refuses execve to the others): an
            # unprivileged zygote can no longer open a non-dumpable spare's namespaces, so
            # it does not hold those calls' mount namespaces (Zygote._hold_mounts).
            if plan.exec and "nondumpable" not in off:
                _linux.prctl(4, 0)  # PR_SET_DUMPABLE
        with Phase("seccomp"):
            if "seccomp" not in off:
                _linux.seccomp_load_bpf(cfg.bpf_exec if plan.exec else cfg.bpf_python)
            if cfg.bpf_self_kill and cfg.sigexit is not None and os.getpid() == 1:
                # Not a wall (it only turns a dropped self-SIGKILL into an exit), so it is
                # loaded whatever the test-only switches say.
                _linux.seccomp_load_bpf(cfg.bpf_self_kill)
    except SetupFailed as exc:
        _fail(call_fd, exc)
    except MemoryError:
        # In the call's cgroup, and maybe past its rlimits: the call's memory limit (a
        # spare's ``call_fd`` is its activation socket, no call's).
        _out_of_memory(-1 if isinstance(tool, Mapping) else call_fd)
    call_id = plan.call_id
    if isinstance(tool, Mapping):
        try:
            _warm_spare(plan, limits, tool, private_tmp="mountns" not in off)
            call_fd, tool, call_id = _activate(call_fd, tool)
        except MemoryError:
            _out_of_memory(-1)
    try:
        _serve(plan, limits, call_fd, tool, workspace=workspace, call_id=call_id)
    except MemoryError:
        # Reading the call frame, or sending the result; the tool function's own is its
        # error frame (``_serve``).
        _out_of_memory(call_fd)


class FolderTool:
    """A folder tool (``--tools-dir``): its module is imported only here, in its call's
    tool process, after every wall (seccomp included), from its folder bound read-only
    (``CallPlan.tool_dir``). Never in the fork-server, which runs with the broker's
    privileges: what the module does at import, it does inside its own call only. Each
    call imports it afresh (no warm-up; the built-in tools keep theirs).

    What an attacker controls: the module's code (it is the tool), and through links in
    the folder only paths of the call's own root (the mount is the wall, not a check)."""

    __slots__ = ("base", "entry")

    def __init__(self, entry: str, base: str) -> None:
        self.entry = entry
        self.base = base

    def load(self) -> ToolFunc:
        """The tool's function; an import that fails (or exits) is this call's tool_error,
        naming the module and what it raised. Its siblings import as a package's modules
        (``load_entry``) and, by their plain names (``import helpers``), from the folder put
        *last* on this call's ``sys.path``: the standard library, ``runtime`` and what is
        installed are found first, so a folder module shadows none of them."""
        if self.base not in sys.path:
            sys.path.append(self.base)  # this call's process only: it ends with the call
        try:
            return load_entry(self.entry, Path(self.base))
        except BaseException as exc:  # SystemExit too: a module's exit ends only its call
            raise ToolFailed(
                f"the tool's module could not be imported ({self.entry!r} in {self.base}): "
                f"{type(exc).__name__}: {exc}"[:2000],
                entry=self.entry,
            ) from None

    def __call__(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return self.load()(args, ctx)


class SpareTools(dict[str, "ToolFunc"]):
    """A spare's tools (every one loaded when it was cloned) and ``warm``: the tool of the
    call that made the zygote fork it, the likeliest next one (see :func:`_warm_spare`)."""

    warm: str | None = None


def _warm_spare(
    plan: CallPlan, limits: ChildLimits, tools: Mapping[str, ToolFunc], *, private_tmp: bool
) -> None:
    """A spare, behind every wall, runs its ``warm`` tool once on a scratch workspace in
    its private ``/tmp`` (``toolkit.warm_with``), then removes it: the call finds that
    code run once in this copy. Only where ``/tmp`` is this call's own (a mount namespace)
    and the tool runs no program; any failure of the run is dropped (the spare still
    serves). What it leaves is state of the tool's own making from fixed, local input,
    never from another call."""
    key = getattr(tools, "warm", None)
    func = tools.get(key) if key else None
    prepare = warm_up(func)
    if func is None or prepare is None or plan.exec or not private_tmp:
        return
    scratch = "/tmp/.runtime-warm-up"
    try:
        os.mkdir(scratch, 0o700)
        ctx = ToolContext(
            workspace=Path(scratch),
            limits=cast("Limits", limits),
            env=dict(plan.env),
            call_id="",
            writable=plan.access == "rw",
            options={},
        )
        func(prepare(Path(scratch)), ctx)
    except Exception:  # noqa: S110 - a warm-up's failure costs only the warming
        pass
    finally:
        # shutil is preloaded by the zygote (in every spare already); its fd-based rmtree
        # never follows a symlink the run may have left.
        shutil.rmtree(scratch, ignore_errors=True)


def _activate(act_fd: int, tools: Mapping[str, ToolFunc]) -> tuple[int, ToolFunc, str]:
    """A spare, already behind every wall, receives its call: (call socket, tool, call id).
    EOF means the zygote dismissed the spare."""
    act = socket.socket(fileno=act_fd)
    try:
        data, fds, _flags, _addr = socket.recv_fds(act, 1 << 16, 1)
        if not data or len(fds) != 1:
            os._exit(0)
        (size,) = HEADER.unpack_from(data)
        msg = decode_body(data[HEADER.size : HEADER.size + size])
        func = tools[str(msg["tool"])]
    except (OSError, FrameError, KeyError, ValueError):
        os._exit(EXIT_PROTOCOL)
    finally:
        act.close()
    os.set_inheritable(fds[0], False)
    return fds[0], func, str(msg.get("call_id", ""))


#: A killed command's ``stdout``/``stderr`` in its error's details: its first and its last
#: 4 KiB (``toolkit_proc.DETAIL_HEAD_BYTES``/``DETAIL_TAIL_BYTES``) and the line between.
STREAM_DETAIL_MAX_CHARS = 8448
_STREAMS = ("stdout", "stderr")


def _within_cap(message: dict[str, Any], frame: bytes, cap: int) -> bytes:
    """The frame to send for ``message``, judged as the broker judges a result
    (``Broker._check_result``): by the size of its canonical JSON, not the frame's (a
    control character takes 6 bytes of JSON and 1 of msgpack, a float 9 of msgpack and as
    few as 1 of JSON). One within the cap goes as it is (the broker checks it again); past
    ``result_frame_bound`` none does, whatever its JSON."""
    if len(frame) <= cap:
        return frame
    value = message.get("value") if message.get("type") == "result" else message
    try:
        canonical: bytes | None = result_json(value)
    except (ValueError, TypeError, RecursionError):
        canonical = None  # not JSON data: the broker says so, if the frame can carry it
    except MemoryError:
        return _MEMORY_FRAME
    fits = canonical is None or len(canonical) <= cap
    if fits and len(frame) <= result_frame_bound(cap):
        return frame
    if canonical is not None:
        size, preview = len(canonical), canonical[:PREVIEW_CHARS].decode("utf-8", "replace")
    else:  # as the broker sizes what is not JSON data
        size, preview = unencodable_result(value)
    too_large = {"type": "error", "kind": "output_too_large", "size": size, "preview": preview}
    return encode_frame(too_large)


def stream_detail(text: str) -> str:
    """A stream's text bounded as an error's detail (here, and again by the broker, whose
    child is hostile): a longer one keeps its head and its tail, the end of a log being
    what tells why it stopped. Only the first 1 KiB used to come back."""
    if len(text) <= STREAM_DETAIL_MAX_CHARS:
        return text
    half = (STREAM_DETAIL_MAX_CHARS - 64) // 2
    left_out = len(text) - 2 * half
    return f"{text[:half]}\n[... {left_out} characters left out ...]\n{text[-half:]}"


def _safe_details(details: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in details.items():
        if isinstance(value, str):
            out[str(key)] = stream_detail(value) if key in _STREAMS else value[:4096]
        elif isinstance(value, (int, float, bool)) or value is None:
            out[str(key)] = value
    return out


def _serve(
    plan: CallPlan,
    limits: ChildLimits,
    call_fd: int,
    func: ToolFunc,
    *,
    workspace: str,
    call_id: str,
) -> NoReturn:
    """Read the call frame, run the tool, send exactly one result or error frame."""
    decoder = FrameDecoder(max_size=limits.output_bytes + 16 * 1024 * 1024)

    def receive() -> dict[str, Any]:
        while True:
            data = os.read(call_fd, 65536)
            if not data:
                decoder.eof()
                raise FrameError("broker closed the call socket")
            frames = decoder.feed(data)
            if frames:
                return frames[0]

    def broker(op: str, payload: dict[str, Any]) -> dict[str, Any]:
        _send(call_fd, {"type": "request", "op": op, "payload": payload})
        reply = receive()
        if not reply.get("ok"):
            # The broker keeps its own copy of a refusal (e.g. egress denied by policy) and
            # reports that, not what this process says; here it only has to stop the tool.
            refusal = ToolFailed(
                str(reply.get("message", f"broker refused {op!r}")),
                refused_by_broker=str(reply.get("error_type", "tool_error")),
            )
            if isinstance(reply.get("reason"), str):
                refusal.details["reason"] = reply["reason"]
            raise refusal
        value = reply.get("value")
        return value if isinstance(value, dict) else {"value": value}

    try:
        call = receive()
    except (OSError, FrameError):
        os._exit(EXIT_PROTOCOL)
    ctx = ToolContext(
        workspace=Path(workspace),
        # Duck-typed: the same attributes as Limits (tools read them, never validate).
        limits=cast("Limits", limits),
        env=dict(plan.env),
        call_id=call_id,
        writable=plan.access == "rw",
        broker=broker if call.get("broker") else None,
        options=dict(call.get("options") or {}),
    )
    message: dict[str, Any]
    try:
        value = func(call.get("arguments") or {}, ctx)
        message = {"type": "result", "value": value}
    except RuntimeToolError as exc:
        # Typed errors cross the pipe as data: the type, the message, JSON-safe details.
        message = {
            "type": "error",
            "kind": "typed",
            "error_type": str(exc.error_type),
            "message": exc.message,
            "details": _safe_details(exc.details),
        }
    except MemoryError:
        message = _MEMORY_ERROR
    except BaseException as exc:
        message = {
            "type": "error",
            "kind": "exception",
            "exc_type": type(exc).__name__,
            "message": str(exc)[:2000],
        }
    try:
        frame = encode_frame(message, max_size=1 << 30)
    except MemoryError:
        frame = _MEMORY_FRAME  # a result too large to encode in the call's memory
    except Exception as exc:  # msgpack refuses a non-serialisable result
        frame = encode_frame(
            {
                "type": "error",
                "kind": "bad_result",
                "message": f"result is not serialisable: {type(exc).__name__}",
            }
        )
    frame = _within_cap(message, frame, limits.output_bytes)
    try:
        view = memoryview(frame)
        while view:
            view = view[os.write(call_fd, view) :]
    except OSError:
        os._exit(EXIT_PROTOCOL)
    os._exit(0)
