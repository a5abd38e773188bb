"""A started MCP server's pipes, read by the broker itself: the stdio transport the proxy
hands the SDK's :class:`~mcp.client.session.ClientSession` instead of the SDK's own
``stdio_client``.

Why not ``stdio_client``: the server is hostile, and that client trusts it with two things.

* **stderr**: it gives the server the broker's own fd 2 (``errlog=sys.stderr``). Landlock
  does not cover an inherited descriptor, so the server could ``ftruncate``/``pwrite`` the
  broker's log file, or hold the user's terminal. Here the server's stderr is a pipe of its
  own, read by a task: at most :data:`STDERR_BUDGET` bytes a :data:`STDERR_WINDOW_S`
  (the rest dropped, said once), lines cut at :data:`STDERR_LINE` bytes, control and
  format characters removed, each line logged at INFO on ``runtime.mcp.server`` as
  ``[<server>] <line>``. The last few lines are kept (:attr:`StdioPipes.tail`) to say why
  a server did not start.
* **stdout**: it buffers a line of any length and copies it once per chunk read (a 32 MiB
  line cost seconds of CPU and hundreds of MB), and keeps reading past the call's
  deadline. Here a line is framed linearly (one ``bytearray``, the newline search resumed
  where it stopped) and capped at :attr:`StdioPipes.cap` bytes: the list cap while the
  proxy lists tools, then the largest ``output_bytes`` any call to this server was given
  plus the JSON-RPC envelope. A line past the cap ends the session (:attr:`StdioPipes.over`
  says so, and the calls then waiting end as ``output_too_large``); the process is stopped
  by the owner of this context.

The SDK's session logic (request ids, cancellation, notifications) is unchanged: parsed
messages reach it through a memory stream, as they do from ``stdio_client``.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import unicodedata
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from runtime.mcp._client import ENVELOPE_BYTES, LIST_BYTES
from runtime.mcp.launch import Launch

__all__ = [
    "STDERR_BUDGET",
    "STDERR_LINE",
    "STDERR_WINDOW_S",
    "StdioPipes",
    "clean_line",
    "open_stdio",
]

log = logging.getLogger("runtime.mcp.proxy")
#: Where a server's stderr lines go (INFO): ``--log-level INFO`` shows them.
server_log = logging.getLogger("runtime.mcp.server")

#: stderr bytes logged per server per window; the rest of the window is dropped.
STDERR_BUDGET = 65_536
STDERR_WINDOW_S = 60.0
#: A longer stderr line is logged in pieces of this many bytes.
STDERR_LINE = 4096
#: stderr lines kept to say why a server did not start.
_TAIL_LINES = 5
_CHUNK = 65_536
#: Time the server has to exit after its stdin closes, then after SIGTERM, seconds.
_GRACE_S = 2.0
_GONE = (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)
#: Categories removed from a logged line: controls (ESC, CR, BEL...), format characters
#: (bidi overrides), line and paragraph separators.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def clean_line(raw: bytes | bytearray) -> str:
    """``raw`` as text a log line can carry: undecodable bytes replaced, tabs as spaces,
    controls and format characters (terminal escapes, CR, bidi overrides) removed."""
    text = bytes(raw).decode("utf-8", "replace").replace("\t", " ")
    if text.isprintable():
        return text
    return "".join(c for c in text if unicodedata.category(c) not in _UNPRINTABLE)


@dataclass(slots=True)
class StdioPipes:
    """What the proxy reads of one started server's pipes."""

    name: str
    #: The longest stdout line (JSON-RPC message) taken, bytes; see :meth:`widen`.
    cap: int = LIST_BYTES
    #: Set (to the cap then in force) when a line went past the cap: the session ended.
    over: int | None = None
    #: stdout ended (the server closed it or exited, or a line went past the cap).
    ended: anyio.Event = field(default_factory=anyio.Event)
    #: The last stderr lines, cleaned.
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))
    #: stderr bytes dropped in the current window.
    dropped: int = 0
    #: stderr ended (every process of the server closed it).
    stderr_done: anyio.Event = field(default_factory=anyio.Event)

    def listed(self) -> None:
        """The tools are listed: from now on a line is at most a call's answer."""
        self.cap = ENVELOPE_BYTES

    def overflow(self) -> str:
        """Why the session ended, when a line went past the cap."""
        return f"its session was ended: it sent a message of more than {self.over} bytes"

    def widen(self, output_bytes: int) -> None:
        """A call may be answered with up to ``output_bytes`` (plus the envelope)."""
        self.cap = max(self.cap, output_bytes + ENVELOPE_BYTES)


@contextlib.asynccontextmanager
async def open_stdio(
    launch: Launch, pipes: StdioPipes
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Start the server (``launch``: the sandbox launcher) with three pipes of its own and
    yield the session's streams. On exit: stdin closed, ``_GRACE_S`` to exit, then its
    process group is sent SIGTERM, then SIGKILL (the launcher's death ends the sandbox)."""
    process = await anyio.open_process(
        launch.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=launch.env,
        cwd=launch.cwd,
        start_new_session=True,
    )
    # No await until the task group is entered: a cancellation there would leak the process.
    to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_stdout, process, pipes, to_session)
        tg.start_soon(_write_stdin, process, from_session, to_session)
        tg.start_soon(_read_stderr, process, pipes)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):
                from_server.close()
                to_server.close()
                await _stop(process)
                # What it said on the way out (why it did not start, often) is read to the
                # end, if the end comes soon.
                with anyio.move_on_after(_GRACE_S):
                    await pipes.stderr_done.wait()
                for pipe in (process.stdout, process.stderr):
                    if pipe is not None:
                        with contextlib.suppress(*_GONE):
                            await pipe.aclose()
                if process.returncode is not None:  # else abandoned (said by _stop)
                    with contextlib.suppress(*_GONE):
                        await process.aclose()
                for stream in (from_server, to_server, to_session, from_session):
                    await stream.aclose()
            tg.cancel_scope.cancel()


async def _read_stdout(
    process: anyio.abc.Process,
    pipes: StdioPipes,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    """Frame stdout into lines (linear: one buffer, the newline search goes on from where it
    stopped), each at most ``pipes.cap`` bytes, and hand the session their messages. Reads
    no further while a message waits for the session."""
    assert process.stdout is not None
    buffer = bytearray()
    searched = 0
    warned = False
    try:
        async with to_session:
            while True:
                try:
                    chunk = await process.stdout.receive(_CHUNK)
                except (anyio.EndOfStream, *_GONE):
                    return
                buffer += chunk
                while (end := buffer.find(b"\n", searched)) >= 0:
                    if end > pipes.cap:
                        _over(pipes, end)
                        return
                    line = buffer[:end]
                    del buffer[: end + 1]
                    searched = 0
                    if not line or line.isspace():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:
                        # Said once per server at WARNING: a hostile one could fill the log.
                        (log.debug if warned else log.warning)(
                            "mcp server %r sent a line that is not a JSON-RPC message (%d "
                            "bytes): %s",
                            pipes.name,
                            len(line),
                            clean_line(str(exc).encode()[:300]),
                        )
                        warned = True
                        continue
                    try:
                        await to_session.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return  # the session is gone
                searched = len(buffer)
                if searched > pipes.cap:
                    _over(pipes, searched)
                    return
    finally:
        pipes.ended.set()


def _over(pipes: StdioPipes, size: int) -> None:
    pipes.over = pipes.cap
    log.warning(
        "mcp server %r sent a message of more than %d bytes (%d read without its end); "
        "its session is ended",
        pipes.name,
        pipes.cap,
        size,
    )


async def _write_stdin(
    process: anyio.abc.Process,
    from_session: MemoryObjectReceiveStream[SessionMessage],
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with from_session:
            async for message in from_session:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")
    except _GONE:
        # The server may live on without reading: end the session's side too, so that a
        # request does not wait for ever.
        await to_session.aclose()


async def _read_stderr(process: anyio.abc.Process, pipes: StdioPipes) -> None:
    """Log the server's stderr, line by line, within the byte budget."""
    assert process.stderr is not None
    buffer = bytearray()
    window_end = anyio.current_time() + STDERR_WINDOW_S
    spent = 0

    def emit(raw: bytes | bytearray) -> None:
        nonlocal window_end, spent
        now = anyio.current_time()
        if now >= window_end:
            if pipes.dropped:
                server_log.warning(
                    "[%s] %d bytes of stderr dropped (more than %d a minute)",
                    pipes.name,
                    pipes.dropped,
                    STDERR_BUDGET,
                )
            window_end, spent, pipes.dropped = now + STDERR_WINDOW_S, 0, 0
        if spent + len(raw) > STDERR_BUDGET:
            if not pipes.dropped:
                server_log.warning(
                    "[%s] more than %d bytes of stderr this minute: the rest is dropped",
                    pipes.name,
                    STDERR_BUDGET,
                )
            pipes.dropped += len(raw) + 1
            return
        spent += len(raw) + 1
        text = clean_line(raw)
        pipes.tail.append(text[:200])
        server_log.info("[%s] %s", pipes.name, text)

    try:
        while True:
            try:
                chunk = await process.stderr.receive(STDERR_LINE)
            except (anyio.EndOfStream, *_GONE):
                break
            buffer += chunk
            while True:
                end = buffer.find(b"\n", 0, STDERR_LINE)
                if end >= 0:
                    emit(buffer[:end])
                    del buffer[: end + 1]
                elif len(buffer) >= STDERR_LINE:
                    emit(buffer[:STDERR_LINE])
                    del buffer[:STDERR_LINE]
                else:
                    break
        if buffer.strip():
            emit(buffer)
    finally:
        pipes.stderr_done.set()


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, give the server ``_GRACE_S`` to exit, then end its process group."""
    assert process.stdin is not None
    with contextlib.suppress(*_GONE):
        await process.stdin.aclose()
    if not await _exited(process, _GRACE_S):
        await terminate_posix_process_tree(process, _GRACE_S)
        if not await _exited(process, _GRACE_S):
            log.warning("mcp server launcher %d is still alive after SIGKILL", process.pid)


async def _exited(process: anyio.abc.Process, timeout_s: float) -> bool:
    """Whether the process exited within ``timeout_s``, by polling its return code (not
    ``wait()``, which on asyncio also waits for the pipes' end: a survivor holding them
    would make an exited launcher look hung)."""
    deadline = anyio.current_time() + timeout_s
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.01)
    return True
