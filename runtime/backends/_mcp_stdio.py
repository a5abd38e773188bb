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
  plus the JSON-RPC envelope. A line past the cap that is an answer whose id its first
  4 KiB show (``{"jsonrpc":"2.0","id":7,"result":...``: the top-level members before the
  first object or array, :func:`runtime.mcp._jsonrpc.leading_members`) fails that call
  alone: the rest of the line is read and dropped (never held), the call gets an error
  only this module can make (:meth:`StdioPipes.answer_dropped`: ``output_too_large``),
  and the session goes on with the next line. Any other line past the cap (no id there, a request
  of the server's, a line still without its end :data:`DROP_BYTES` past the cap) ends the
  session (:attr:`StdioPipes.over` says so, and the calls then waiting end as
  ``output_too_large``); the process is stopped by the owner of this context.

The SDK's session logic (request ids, cancellation, notifications) is unchanged: parsed
messages reach it through a memory stream, as they do from ``stdio_client``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
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
from runtime.mcp._jsonrpc import SCAN_CHARS, is_request_id, leading_members
from runtime.mcp.launch import Launch

__all__ = [
    "DROP_BYTES",
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
#: How far past the cap an over-long answer is read and dropped while its call alone
#: fails; a line still without its end then ends the session (a line that never ends
#: would keep the session's reader on it for ever).
DROP_BYTES = 64 * 1024 * 1024
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
    #: Marks the errors this module makes for a dropped answer (never sent to the server,
    #: so an error it sends cannot pass for one).
    _token: str = field(default_factory=lambda: secrets.token_hex(16))

    def listed(self) -> None:
        """The tools are listed: from now on a line is at most a call's answer."""
        self.cap = ENVELOPE_BYTES

    def overflow(self) -> str:
        """Why the session ended, when a line went past the cap."""
        return f"its session was ended: it sent a message of more than {self.over} bytes"

    def dropped_answer(self, request_id: types.RequestId) -> types.JSONRPCError:
        """The error that ends call ``request_id``, whose answer went past the cap."""
        return types.JSONRPCError(
            jsonrpc="2.0",
            id=request_id,
            error=types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"answer of more than {self.cap} bytes dropped",
                data={"dropped_answer": self._token, "cap": self.cap},
            ),
        )

    def answer_dropped(self, data: object) -> int | None:
        """The cap an answer went past, when ``data`` (a call's JSON-RPC error data) is
        that of :meth:`dropped_answer`, else None."""
        if isinstance(data, dict) and data.get("dropped_answer") == self._token:
            cap = data.get("cap")
            return cap if isinstance(cap, int) else self.cap
        return None

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
    warned = warned_over = False
    try:
        async with to_session:
            while True:
                try:
                    chunk = await process.stdout.receive(_CHUNK)
                except (anyio.EndOfStream, *_GONE):
                    return
                buffer += chunk
                while True:
                    found = buffer.find(b"\n", searched)
                    end: int | None = found
                    if found < 0:
                        searched = len(buffer)
                        if searched <= pipes.cap:
                            break  # the line goes on in the next chunk
                        end = None  # past the cap without its end yet
                    elif found <= pipes.cap:
                        line = buffer[:found]
                        del buffer[: found + 1]
                        searched = 0
                        if not line or line.isspace():
                            continue
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(
                                line, by_name=False
                            )
                        except ValueError as exc:
                            # Said once per server at WARNING: a hostile one could fill
                            # the log.
                            (log.debug if warned else log.warning)(
                                "mcp server %r sent a line that is not a JSON-RPC message "
                                "(%d bytes): %s",
                                pipes.name,
                                len(line),
                                clean_line(str(exc).encode()[:300]),
                            )
                            warned = True
                            continue
                        if not await _hand_on(to_session, message):
                            return  # the session is gone
                        continue
                    # A line past the cap: the answer of one call, or the session's end.
                    request_id = _answered_id(buffer)
                    size = len(buffer) if end is None else end
                    if request_id is None:
                        _over(pipes, size)
                        return
                    answer = pipes.dropped_answer(request_id)
                    rest = await _drop_line(process, buffer, end, pipes.cap + DROP_BYTES)
                    if rest is None:
                        _over(pipes, size)
                        return
                    (log.debug if warned_over else log.warning)(
                        "mcp server %r answered request %r with a message of more than %d "
                        "bytes: dropped, that call fails (output_too_large)",
                        pipes.name,
                        request_id,
                        pipes.cap,
                    )
                    warned_over = True
                    buffer, searched = rest, 0
                    if not await _hand_on(to_session, answer):
                        return
    finally:
        pipes.ended.set()


async def _hand_on(
    to_session: MemoryObjectSendStream[SessionMessage | Exception], message: types.JSONRPCMessage
) -> bool:
    """Give the session ``message``; False when the session is gone."""
    try:
        await to_session.send(SessionMessage(message))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        return False
    return True


def _answered_id(buffer: bytearray) -> types.RequestId | None:
    """The id of the answer an over-long line starts, when its first :data:`SCAN_CHARS`
    bytes show one: a valid id among the top-level members before a ``result`` or
    ``error`` value, and no ``method`` (a request of the server's is not a call's
    answer). Else None: which call the line belongs to is not known."""
    members, container = leading_members(buffer[:SCAN_CHARS])
    request_id = members.get("id")
    if container not in ("result", "error") or "method" in members:
        return None
    if not is_request_id(request_id):
        return None
    assert isinstance(request_id, (str, int))
    return request_id


async def _drop_line(
    process: anyio.abc.Process, buffer: bytearray, end: int | None, limit: int
) -> bytearray | None:
    """Drop the line ``buffer`` starts (``end``: where its newline is, None when not read
    yet) and return what follows it; None when the line has no end within ``limit``
    bytes, or stdout ends first. The dropped bytes are never held: a chunk at a time."""
    if end is not None:
        return buffer[end + 1 :]
    dropped = len(buffer)
    buffer.clear()  # not held while the rest is read
    assert process.stdout is not None
    while dropped <= limit:
        try:
            chunk = await process.stdout.receive(_CHUNK)
        except (anyio.EndOfStream, *_GONE):
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            return bytearray(chunk[newline + 1 :])
        dropped += len(chunk)
    return None


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
