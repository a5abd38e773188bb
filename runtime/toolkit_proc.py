"""Running one program inside a tool, bounded in time and output.

Shared by ``shell_exec`` and command-template tools. The program gets its own process group
(a timeout kills the whole tree: SIGTERM, grace, SIGKILL), both pipes are read concurrently
so neither can fill and deadlock the child, and output past the cap is drained and dropped
rather than buffered. Inside the sandbox the pid namespace is the final wall: whatever
escapes the group dies with the call's init.

When the call itself is ended (cancel, its deadline), the sandbox's pid 1 sends SIGTERM to
every process of it and waits the backend's grace: the runner holds its own SIGTERM until
its program has ended (or the grace here ran out), reading its pipes meanwhile, so that a
program cleaning up on SIGTERM is not cut short by a SIGPIPE when it writes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from runtime.errors import ResourceLimitExceeded, ToolFailed, ToolTimeout
from runtime.toolkit import json_head, json_size

__all__ = ["ProcResult", "kill_grace", "run_capped", "within_call"]

_GRACE_S = 2.0  # SIGTERM → SIGKILL, at most
_DRAIN_AFTER_EXIT_S = 1.0  # background children that keep the pipes open after exit
#: Time a command's timeout leaves before the call's own deadline: the kill's grace and the
#: report, seconds (at most :data:`_RESERVE_SHARE` of a short call's limit).
_REPORT_S = _GRACE_S + 1.0
_RESERVE_SHARE = 0.2
#: Of the time between the command's timeout and the call's deadline, the kill's grace's
#: share; the rest is for reading what is left and reporting it.
_GRACE_SHARE = 2.0 / 3.0
#: Room in the output cap for what surrounds the two streams in the result frame (keys,
#: exit code, signal name, the frame's own header and envelope), bytes.
_RESULT_OVERHEAD = 256
#: Signals the kernel sends only when a process passes an rlimit the sandbox sets from the
#: policy: (signal, the policy's limit, what it bounds).
_LIMIT_SIGNALS = {
    signal.SIGXCPU: ("cpu_s", "CPU time"),
    signal.SIGXFSZ: ("fsize_mb", "file size"),
}
#: A command killed (timeout, rlimit) reports its output in the error's details, which are
#: bounded (the sandboxed child is hostile: ``backends/sandbox/_outcome.details``). Of each
#: stream the first and the last this many bytes are kept, with a line between saying how
#: many were left out: the end is what an agent needs of a hung test run, and only the
#: first 1 KiB used to come back, unmarked.
DETAIL_HEAD_BYTES = 4096
DETAIL_TAIL_BYTES = 4096


@dataclass(frozen=True, slots=True)
class ProcResult:
    stdout: str
    stderr: str
    code: int
    truncated: bool

    def as_result(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.code if self.code >= 0 else 128 - self.code,
            "truncated": self.truncated,
        }
        if self.code < 0:
            result["signal"] = signal.Signals(-self.code).name
        return result


class _Stream:
    """One pipe's output: its first ``cap`` bytes, its last :data:`DETAIL_TAIL_BYTES`
    and how many there were in all."""

    __slots__ = ("head", "tail", "total")

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes, cap: int) -> bool:
        """Take ``data``; True when some of it went past ``cap`` (the head is full)."""
        self.total += len(data)
        room = cap - len(self.head)
        self.head += data[: max(room, 0)]
        self.tail += data
        del self.tail[:-DETAIL_TAIL_BYTES]
        return len(data) > room

    def text(self) -> str:
        return self.head.decode("utf-8", "replace")

    def head_and_tail(self, cap: int) -> tuple[str, bool]:
        """The stream for an error's details: whole when it is short, else its first and
        last bytes (at most ``cap`` together) around a line naming how many were left
        out; and whether some were."""
        budget = min(DETAIL_HEAD_BYTES + DETAIL_TAIL_BYTES, cap)
        if self.total <= budget:  # all of it is in the head (budget <= cap)
            return self.text(), False
        head = _whole_chars(bytes(self.head[: budget // 2]), at_end=True)
        tail = _whole_chars(bytes(self.tail[-(budget - budget // 2) :]), at_end=False)
        left_out = self.total - len(head) - len(tail)
        return (
            head.decode("utf-8", "replace")
            + f"\n[... {left_out} bytes of output left out ...]\n"
            + tail.decode("utf-8", "replace")
        ), True


def _whole_chars(data: bytes, *, at_end: bool) -> bytes:
    """``data`` without the UTF-8 character cut at its end (``at_end``) or its start: a
    cut one would decode to U+FFFD, which the command never printed."""
    if not at_end:
        skip = 0
        while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
            skip += 1
        return data[skip:]
    for back in range(1, min(4, len(data)) + 1):
        lead = data[-back]
        if lead & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        need = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4
        return data[:-back] if need > back else data
    return data


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _fit(stdout: str, stderr: str, cap: int) -> tuple[str, str, bool]:
    """Both streams cut so that the result they go into fits ``cap`` bytes. Each stream is
    read up to ``cap`` bytes, and the result's JSON can be larger still (an invalid byte
    decodes to a 3-byte U+FFFD, a control byte is escaped to 6), so without this a chatty
    command overflowed the result and its call failed with output_too_large, all output
    lost. A stream smaller than half the room is kept whole; the other gets the rest."""
    room = max(cap - _RESULT_OVERHEAD, 0)
    out_n, err_n = json_size(stdout), json_size(stderr)
    if out_n + err_n <= room:
        return stdout, stderr, False
    half = room // 2
    if err_n <= half:
        out_n = room - err_n
    elif out_n <= half:
        err_n = room - out_n
    else:
        out_n = err_n = half
    return json_head(stdout, out_n), json_head(stderr, err_n), True


def within_call(timeout: float, call_limit: float) -> float:
    """The timeout to give a command so that it ends before the call does. At the call's
    deadline the sandbox is torn down whole and the call reports only "timeout": a command
    timed to that same deadline (the default) lost everything it had printed, because its
    own timeout (which keeps the partial output) never came first. What it leaves is for
    the kill's grace (:func:`kill_grace`) and the report."""
    return min(timeout, call_limit - min(_REPORT_S, call_limit * _RESERVE_SHARE))


def kill_grace(timeout: float, call_limit: float) -> float:
    """SIGTERM → SIGKILL for a command timed out after ``timeout`` in a call of
    ``call_limit`` seconds: at most :data:`_GRACE_S`, less when the time left is short, so
    that the kill, its grace and the report all come before the call's deadline (a fixed
    2 s grace outlasted the deadline of calls under ~12 s: the call timed out instead, and
    what the command had printed was lost)."""
    return max(0.0, min(_GRACE_S, (call_limit - timeout) * _GRACE_SHARE))


class _HeldTerm:
    """The runner's SIGTERM, held while its program runs: noted (``at``), then delivered
    again once the program is done (``with``'s end), to the handler that was there before
    (by default: the runner dies of it). Only in the main thread, where Python can handle
    signals; elsewhere, and when the handler in place is not Python's, nothing is held."""

    __slots__ = ("_previous", "at")

    def __init__(self) -> None:
        self.at: float | None = None
        self._previous: Any = None

    def __enter__(self) -> _HeldTerm:
        if threading.current_thread() is not threading.main_thread():
            return self
        previous = signal.getsignal(signal.SIGTERM)
        if previous is None:  # set outside Python: it could not be put back
            return self
        self._previous = previous
        signal.signal(signal.SIGTERM, self._note)
        return self

    def until(self, end: float, grace: float) -> float:
        """``end``, or sooner: the end of ``grace`` after the SIGTERM, once one came."""
        return end if self.at is None else min(end, self.at + grace)

    def _note(self, _signum: int, _frame: FrameType | None) -> None:
        if self.at is None:
            self.at = time.monotonic()

    def __exit__(self, *_: object) -> None:
        if self._previous is None:
            return
        signal.signal(signal.SIGTERM, self._previous)
        if self.at is not None:
            os.kill(os.getpid(), signal.SIGTERM)


def run_capped(
    argv: Sequence[str],
    *,
    cwd: str,
    env: dict[str, str],
    timeout: float,
    cap: int,
    preexec: Callable[[], Any] | None = None,
    shell_status: bool = False,
    grace: float = _GRACE_S,
) -> ProcResult:
    """Run ``argv``; raise ToolTimeout (with the partial output) when ``timeout`` passes
    (SIGTERM to its group, ``grace`` seconds, SIGKILL: :func:`kill_grace`),
    ResourceLimitExceeded when the program is killed by an rlimit's signal
    (``shell_status``: ``argv`` is a POSIX shell, whose exit status 128 + N also says so).
    ``cap`` bounds the whole result in bytes: both streams together and the fields around
    them (``truncated`` says output was cut). A SIGTERM to this process is held until the
    program has ended or ``grace`` passed (:class:`_HeldTerm`)."""
    with _HeldTerm() as term:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own group: a timeout kills the whole tree
                close_fds=True,
                preexec_fn=preexec,  # noqa: PLW1509 - the sandbox's exec seccomp filter
            )
        except OSError as exc:
            raise ToolFailed(f"could not start {argv[0]}: {exc.strerror}", reason="spawn") from exc
        assert proc.stdout is not None and proc.stderr is not None
        out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        bufs = {out_fd: _Stream(), err_fd: _Stream()}
        truncated = False
        timed_out = False
        deadline = time.monotonic() + timeout
        exited_at: float | None = None
        with selectors.DefaultSelector() as sel, proc.stdout, proc.stderr:
            for f in (proc.stdout, proc.stderr):
                os.set_blocking(f.fileno(), False)
                sel.register(f.fileno(), selectors.EVENT_READ)
            while sel.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                    _killpg(proc.pid, signal.SIGKILL)  # leftovers of a finished command
                end = (
                    deadline
                    if exited_at is None
                    else min(deadline, exited_at + _DRAIN_AFTER_EXIT_S)
                )
                end = term.until(end, grace)  # the program's grace, this one's too
                if now >= end:
                    timed_out = exited_at is None and term.at is None
                    break
                for key, _ in sel.select(min(end - now, 0.25)):
                    fd = int(key.fd)
                    try:
                        data = os.read(fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(fd)
                        continue
                    if bufs[fd].add(data, cap):
                        truncated = True
            if exited_at is None and not timed_out and term.at is None:
                # Both pipes closed before the command exited (`exec >log 2>&1`, `exec >&-`):
                # its timeout still holds. Hazard: a bare wait() here ran until the sandbox's
                # own deadline, which ends the call without the partial output.
                timed_out = not _wait_until(proc, deadline, term, grace)
            if timed_out:
                _killpg(proc.pid, signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(grace)
            # Leftovers of a finished command, or what outlived the grace.
            _killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        if timed_out:
            raise ToolTimeout(
                f"the command did not finish within {timeout:g} s and was killed",
                timeout_s=timeout,
                **_killed_output(bufs[out_fd], bufs[err_fd], cap),
            )
        killer = _limit_signal(code, shell_status=shell_status)
        if killer is not None:
            limit, what = _LIMIT_SIGNALS[killer]
            raise ResourceLimitExceeded(
                f"the command exceeded the call's {what} limit ({limit}) and was killed by "
                f"{killer.name}",
                limit=limit,
                signal=killer.name,
                **_killed_output(bufs[out_fd], bufs[err_fd], cap),
            )
        stdout, stderr, cut = _fit(bufs[out_fd].text(), bufs[err_fd].text(), cap)
        return ProcResult(stdout, stderr, code, truncated or cut)


def _wait_until(
    proc: subprocess.Popen[bytes], deadline: float, term: _HeldTerm, grace: float
) -> bool:
    """Wait for ``proc`` until ``deadline``, or the end of the grace once this process
    was SIGTERMed (a handler cannot cut ``wait`` short: it is retried, so it waits in
    slices); False when the command timed out."""
    while True:
        held = term.at is not None
        end = term.until(deadline, grace)
        left = end - time.monotonic()
        try:
            proc.wait(max(min(left, 0.1), 0.0))
            return True
        except subprocess.TimeoutExpired:
            if left <= 0.1:
                return held


def _killed_output(out: _Stream, err: _Stream, cap: int) -> dict[str, Any]:
    """The details of a killed command's output: each stream's head and tail, and
    ``truncated`` when some of either was left out."""
    stdout, out_cut = out.head_and_tail(cap // 2)
    stderr, err_cut = err.head_and_tail(cap // 2)
    return {"stdout": stdout, "stderr": stderr, "truncated": out_cut or err_cut}


def _limit_signal(code: int, *, shell_status: bool) -> signal.Signals | None:
    """The rlimit signal that ended the command, from its wait status: killed by it
    (``-N``), or, from a shell, an exit status of 128 + N, which is how a POSIX shell
    reports that the command it ran last was killed by N (``sh -c 'make'``: dash runs
    the command as its child rather than exec'ing it). A shell that survives a child's
    kill and goes on decides its own exit status, and is left to it. A command may also
    send itself these signals, or exit with that status: it can only make its own call
    report a limit, which is harmless."""
    for number in (-code, code - 128) if shell_status else (-code,):
        if number in _LIMIT_SIGNALS:
            return signal.Signals(number)
    return None
