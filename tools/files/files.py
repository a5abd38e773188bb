"""The file tools: read, write, edit, list, delete, move, info, search.

Every path goes through :class:`runtime.toolkit_fs.Workspace` (openat2 beneath the
workspace root); the sandbox's mounts are the wall, this is the early, clear error. Results
are capped by ``ctx.limits.output_bytes``.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import datetime as _dt
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from runtime.errors import ToolFailed
from runtime.toolkit import ToolContext, json_head, json_size, warm_with
from runtime.toolkit_fs import (
    Entry,
    Workspace,
    file_type,
    glob_matcher,
    printable,
    read_bytes,
    read_lines,
    seek_line,
)

__all__ = [
    "delete_file",
    "edit_file",
    "file_search",
    "get_file_info",
    "list_files",
    "move_file",
    "read_file",
    "write_file",
]

_CHUNK = 1 << 20
_ENTRY_OVERHEAD = 120  # JSON keys, type, size and timestamp of one listed entry, bytes
#: Room left in the output cap beyond a result's own JSON: the frame's envelope and header,
#: and msgpack's encoding where it is larger than JSON's, bytes.
_RESULT_MARGIN = 64
#: A read_file result's JSON but its path and content, at most: keys, encoding, five
#: numbers of up to 19 digits, ``truncated``; plus the margin, bytes.
_READ_OVERHEAD = 240 + _RESULT_MARGIN
#: Tries of an append or edit whose file another writer changed meanwhile (see _retried).
_ATTEMPTS = 5

_T = TypeVar("_T")


#: ``encoding`` values: the seeds' spellings (001 file_read: utf8, ascii, base64; Node's
#: names) next to ours; ``utf8`` is ``utf-8``, ``ascii`` is text that must be 7-bit.
_TEXT_ENCODINGS = {"utf-8": "utf-8", "utf8": "utf-8", "ascii": "ascii"}


def _iso(ts: float) -> str:
    """``ts`` as RFC 3339 UTC. A file's time may lie outside years 1-9999 (tmpfs, XFS and
    Btrfs keep 64-bit seconds: an archive's date, ``touch -d``), which no RFC 3339 string
    can name; such a time is shown at the nearest end of the range rather than failing the
    whole listing it is in."""
    try:
        return _dt.datetime.fromtimestamp(ts, _dt.UTC).isoformat()
    except (ValueError, OverflowError, OSError):
        edge = _dt.datetime.max if ts > 0 else _dt.datetime.min
        return edge.replace(tzinfo=_dt.UTC).isoformat()


def _decode(raw: bytes, rel: str, cut_by_cap: bool) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The byte cap may cut a multi-byte character: retry without up to 3 trailing bytes.
        for cut in (1, 2, 3) if cut_by_cap else ():
            if exc.start >= len(raw) - cut:
                try:
                    return raw[: len(raw) - cut].decode("utf-8")
                except UnicodeDecodeError:
                    continue
        raise ToolFailed(
            f"{rel!r} is not UTF-8 text (binary?); read it with encoding='base64'",
            reason="binary",
            path=rel,
        ) from exc


def _sample(scratch: Path) -> Path:
    """A small text file in a warm-up's scratch workspace (``warm_with``)."""
    sample = scratch / "sample.txt"
    sample.write_text("one\ntwo\n", encoding="utf-8")
    return sample


def _room(rel: str, cap: int) -> int:
    """Bytes the content may take as JSON: the cap bounds the whole result (the broker sizes
    its JSON; the child, its msgpack frame with an envelope), not the content alone."""
    return max(cap - json_size(rel) - _READ_OVERHEAD, 0)


def _fit_lines(text: str, lines: int, room: int) -> tuple[str, int, bool]:
    """``text`` cut to ``room`` bytes of JSON: whole lines, or the head of a single line
    longer than that. Escapes make the JSON larger than the bytes read (a newline or quote
    takes 2 bytes, a control character 6), so a cut by bytes alone can still overflow."""
    if len(text) * 6 <= room or json_size(text) <= room:  # 6: JSON's widest escape
        return text, lines, False
    head = json_head(text, room)
    nl = head.rfind("\n")
    if nl >= 0:
        head = head[: nl + 1]
        return head, head.count("\n"), True
    return head, 1, True


@warm_with(lambda scratch: {"path": _sample(scratch).name})
def read_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    encoding = _TEXT_ENCODINGS.get(args.get("encoding", "utf-8"), "base64")
    at = args.get("byte_offset")
    if at is not None and "offset" in args and encoding != "base64":
        raise ToolFailed(
            "pass offset (a line number) or byte_offset (a byte position, as a previous "
            "result's next_byte_offset), not both",
            reason="bad_offset",
        )
    cap = ctx.limits.output_bytes
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args["path"], allow_root=False)
        ws.refuse_slash(args["path"], parts, "read")
        rel = ws.rel(parts)
        fd, st = ws.open_file(parts)
        with fd:
            if encoding == "base64":
                return _read_base64(fd.fd, rel, st, int(at or 0), cap)
            out: dict[str, Any] = {"path": rel, "content": "", "encoding": encoding}
            out["size"] = st.st_size
            if at is None:
                out["offset"] = offset = int(args.get("offset", 1))
                first = seek_line(fd.fd, offset)
            else:
                first = os.lseek(fd.fd, int(at), os.SEEK_SET)
            room = _room(rel, cap)
            if first is None:  # the file ends before line ``offset``
                first, (raw, lines, truncated) = st.st_size, (b"", 0, False)
            else:
                raw, lines, truncated = read_lines(fd.fd, 1, int(args.get("limit", 2000)), room)
    text, lines, truncated = _text(
        raw, lines, truncated, rel=rel, encoding=encoding, room=room, at=at
    )
    end = first + len(text.encode("utf-8"))
    out.update(content=text, lines=lines, truncated=truncated, byte_offset=first)
    out["next_byte_offset"] = end if truncated else None
    return out


def _read_base64(fd: int, rel: str, st: os.stat_result, at: int, cap: int) -> dict[str, Any]:
    """read_file with encoding='base64': the bytes from ``at`` that the cap holds."""
    os.lseek(fd, at, os.SEEK_SET)
    raw, truncated = read_bytes(fd, _room(rel, cap) // 4 * 3)
    return {
        "path": rel,
        "content": base64.b64encode(raw).decode("ascii"),
        "encoding": "base64",
        "size": st.st_size,
        "bytes": len(raw),
        "lines": None,
        "truncated": truncated,
        "byte_offset": at,
        "next_byte_offset": at + len(raw) if truncated else None,
    }


def _text(
    raw: bytes, lines: int, truncated: bool, *, rel: str, encoding: str, room: int, at: int | None
) -> tuple[str, int, bool]:
    """The lines read as text that fits ``room``: (text, lines, truncated). ``at``: the
    byte the read started at when the caller gave one, which must begin a character."""
    if at is not None and raw and raw[0] & 0xC0 == 0x80:
        raise ToolFailed(
            f"byte_offset {at} is inside a UTF-8 character of {rel!r}; continue from a "
            "result's next_byte_offset (it always starts a character)",
            reason="bad_offset",
            path=rel,
        )
    if b"\0" in raw:
        raise ToolFailed(
            f"{rel!r} looks binary (NUL bytes); read it with encoding='base64'",
            reason="binary",
            path=rel,
        )
    text = _decode(raw, rel, truncated and not raw.endswith(b"\n"))
    if encoding == "ascii" and not text.isascii():
        bad = next(i for i, ch in enumerate(text) if not ch.isascii())
        raise ToolFailed(
            f"{rel!r} is not ASCII text (character {text[bad]!r} in the lines read); read it "
            "with encoding='utf-8'",
            reason="not_ascii",
            path=rel,
        )
    text, lines, cut = _fit_lines(text, lines, room)
    return text, lines, truncated or cut


def _payload(args: dict[str, Any]) -> bytes:
    content: str = args["content"]
    if args.get("encoding", "utf-8") == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ToolFailed("content is not valid base64", reason="bad_base64") from exc
    if _TEXT_ENCODINGS.get(args.get("encoding", "utf-8")) == "ascii" and not content.isascii():
        raise ToolFailed(
            "content is not ASCII text; write it with encoding='utf-8'", reason="not_ascii"
        )
    return content.encode("utf-8")


def _chunks(data: bytes) -> Iterator[bytes]:
    for i in range(0, len(data), _CHUNK):
        yield data[i : i + _CHUNK]


def _retried(attempt: Callable[[], _T]) -> _T:
    """``attempt()``, again while it fails ``changed``: a writer that takes no lock (a
    shell) changed the file between its read and its rename (``Workspace.atomic_write``),
    and nothing was written. The last attempt's error is the call's."""
    for _ in range(_ATTEMPTS - 1):
        try:
            return attempt()
        except ToolFailed as exc:
            if exc.details.get("reason") != "changed":
                raise
    return attempt()


def write_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    data = _payload(args)
    append = args.get("mode", "overwrite") == "append"
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args["path"], allow_root=False)
        ws.refuse_slash(args["path"], parts, "write", making=True)
        existed = ws.lstat(parts, "write") is not None
        written = _retried(lambda: ws.atomic_write(parts, _chunks(data), append=append))
        return {
            "path": ws.rel(parts),
            "bytes_written": written,
            "mode": "append" if append else "overwrite",
            "created": not existed,
        }


def edit_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    old: str = args["old_string"]
    new: str = args["new_string"]
    replace_all = bool(args.get("replace_all", False))
    if old == "":
        raise ToolFailed("old_string must not be empty", reason="empty_old_string")
    if old == new:
        raise ToolFailed("old_string and new_string are identical", reason="no_change")
    old_b, new_b = _utf8(old, "old_string"), _utf8(new, "new_string")
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args["path"], allow_root=False)
        ws.refuse_slash(args["path"], parts, "write")
        return _retried(lambda: _edit(ws, parts, old_b, new_b, replace_all=replace_all, ctx=ctx))


def _utf8(text: str, name: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (JSON's ``\\udc80``) names no character a file
    can hold."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailed(
            f"{name} is not valid Unicode (a lone surrogate); no text file holds it",
            reason="bad_encoding",
        ) from exc


def _edit(
    ws: Workspace,
    parts: tuple[str, ...],
    old: bytes,
    new: bytes,
    *,
    replace_all: bool,
    ctx: ToolContext,
) -> dict[str, Any]:
    """One read, replace and rewrite of edit_file, under the folder's lock (another call's
    edit or append of the file waits), the rewrite refused if the file changed since the
    read (a writer without the lock): see ``Workspace.atomic_write``.

    The file is held once, as bytes, and the new content is written from it piece by
    piece (:func:`_replaced`): hunt M6, a decoded copy, a replaced copy and an encoded
    copy next to the bytes took four times the file, and a 180 MB file exceeded the
    default 512 MiB memory limit, below the 256 MiB ``fsize_mb`` edits are bounded by.
    UTF-8 finds a UTF-8 ``old`` at the same places in the bytes as in the text (a match
    starts on a character's first byte and ends on a character's last)."""
    cap = ctx.limits.fsize_mb * 1_048_576
    rel = ws.rel(parts)
    with ws.exclusive(parts):
        fd, st = ws.open_file(parts, access="write")  # read to be rewritten
        with fd:
            if st.st_size > cap:
                raise ToolFailed(
                    f"{rel!r} is larger than {ctx.limits.fsize_mb} MiB; too big to edit",
                    reason="too_large",
                    path=rel,
                )
            # A file that grew or shrank since the fstat is seen by atomic_write's check.
            data = _read_all(fd.fd, st.st_size)
        _check_utf8(data, rel)
        count = data.count(old)
        if count == 0:
            raise ToolFailed(
                f"old_string was not found in {rel!r}; read the file and copy the exact text "
                "(whitespace and indentation included)",
                reason="not_found",
                path=rel,
                occurrences=0,
            )
        if count > 1 and not replace_all:
            raise ToolFailed(
                f"old_string occurs {count} times in {rel!r}; add surrounding lines to make "
                "it unique, or pass replace_all=true",
                reason="not_unique",
                path=rel,
                occurrences=count,
            )
        ws.atomic_write(parts, _replaced(data, old, new, all_of=replace_all), expect=st)
        return {"path": rel, "replacements": count if replace_all else 1}


def _read_all(fd: int, size: int) -> bytearray:
    """Up to ``size`` bytes of ``fd`` in one buffer of that size (a growing buffer and its
    final copy took twice the file)."""
    buf = bytearray(size)
    got = 0
    with memoryview(buf) as view, os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
        while got < size:
            n = fh.readinto(view[got:])
            if not n:
                break
            got += n
    del buf[got:]
    return buf


def _check_utf8(data: bytearray, rel: str) -> None:
    """Refuse ``data`` unless it is UTF-8 text, decoding a piece at a time (the text itself
    is not kept)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with memoryview(data) as view:
            for i in range(0, len(view), _CHUNK):
                decoder.decode(view[i : i + _CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ToolFailed(
            f"{rel!r} is not UTF-8 text; edit_file works on text files only",
            reason="binary",
            path=rel,
        ) from exc


def _replaced(data: bytearray, old: bytes, new: bytes, *, all_of: bool) -> Iterator[bytes]:
    """``data`` with ``old`` replaced by ``new`` (every occurrence with ``all_of``, else the
    first), as ``bytes.replace`` would make it, in pieces of about :data:`_CHUNK` bytes:
    never a second copy of the whole file.

    With ``all_of``, each window is replaced in C when no occurrence of ``old`` straddles
    its end (then the left-to-right matching inside it is the whole file's); otherwise one
    occurrence is replaced by hand and the next window starts after it. A window is short
    enough that its replaced copy stays near :data:`_CHUNK` however long ``new`` is."""
    size, width = len(data), len(old)
    step = max(_CHUNK * width // max(len(new), width), 1)
    pos = 0
    with memoryview(data) as view:
        while pos < size:
            end = min(pos + step, size)
            straddles = end < size and data.find(old, max(end - width + 1, 0), end + width - 1) >= 0
            if all_of and not straddles:
                yield bytes(view[pos:end]).replace(old, new)
                pos = end
                continue
            at = data.find(old, pos)
            if at < 0:
                yield from _pieces(view, pos, size)
                return
            yield from _pieces(view, pos, at)
            yield new
            pos = at + width
            if not all_of:
                yield from _pieces(view, pos, size)
                return


def _pieces(view: memoryview, start: int, end: int) -> Iterator[bytes]:
    """``view[start:end]`` as copies of at most :data:`_CHUNK` bytes."""
    for i in range(start, end, _CHUNK):
        yield bytes(view[i : min(i + _CHUNK, end)])


def _info(rel: str, st: os.stat_result) -> dict[str, Any]:
    return {
        "name": rel.rsplit("/", 1)[-1],
        "path": rel,
        "type": file_type(st.st_mode),
        "size": st.st_size,
        "modified": _iso(st.st_mtime),
    }


def _listed(entry: Entry) -> tuple[dict[str, Any], int]:
    """One listed entry and the bytes it takes in the result's JSON (names are measured as
    JSON: a control character in a name takes 6 bytes)."""
    name, path = printable(entry.name), printable(entry.path)
    item = {
        "name": name,
        "path": path,
        "type": entry.type,
        "size": entry.size,
        "modified": _iso(entry.modified),
    }
    return item, json_size(name) + json_size(path) + _ENTRY_OVERHEAD


def _listing_room(rel: str, cap: int) -> int:
    """Bytes a listing's entries may take: the cap less the rest of its result."""
    return cap - json_size(rel) - 2 * _ENTRY_OVERHEAD - _RESULT_MARGIN


@warm_with(lambda scratch: {"path": ".", "pattern": _sample(scratch).name})
def list_files(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    recursive = bool(args.get("recursive", False))
    pattern: str | None = args.get("pattern")
    limit = int(args.get("limit", 1000))
    files: list[dict[str, Any]] = []
    truncated = False
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args.get("path", "."))
        budget = _listing_room(ws.rel(parts), ctx.limits.output_bytes)
        keep = glob_matcher(pattern, parts) if pattern else None
        for entry in ws.walk(parts, max_depth=-1 if recursive else 1):
            if keep is not None and not keep(entry):
                continue
            item, size = _listed(entry)
            budget -= size
            if len(files) >= limit or budget < 0:
                truncated = True
                break
            files.append(item)
        truncated = truncated or ws.walk_cut
        return {"path": ws.rel(parts), "files": files, "count": len(files), "truncated": truncated}


def delete_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args["path"], allow_root=False)
        ws.refuse_slash(args["path"], parts, "write")
        kind = ws.delete(parts, recursive=bool(args.get("recursive", False)))
        return {"path": ws.rel(parts), "deleted": True, "type": kind}


def move_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    with Workspace.for_call(ctx) as ws:
        src = ws.parts(args["source"], allow_root=False)
        dst = ws.parts(args["destination"], allow_root=False)
        ws.refuse_slash(args["source"], src, "write")
        # 'x/' names a directory: a directory may be moved there, a file may not (rename(2)).
        making = not ws.is_directory(src, "write")
        ws.refuse_slash(args["destination"], dst, "write", making=making)
        ws.move(src, dst, overwrite=bool(args.get("overwrite", False)))
        return {"source": ws.rel(src), "destination": ws.rel(dst), "moved": True}


@warm_with(lambda scratch: {"path": _sample(scratch).name})
def get_file_info(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args["path"])
        rel = ws.rel(parts)
        st = ws.lstat(parts, below_file_missing=True)
        if st is None:
            return {
                "path": rel,
                "exists": False,
                "type": None,
                "size": None,
                "modified": None,
                "mode": None,
            }
        out = _info(rel, st) | {"exists": True, "mode": f"{stat.S_IMODE(st.st_mode):04o}"}
        if stat.S_ISLNK(st.st_mode):
            with ws.open_dir(parts[:-1], leaf=parts[-1]) as parent:
                out["target"] = printable(os.readlink(parts[-1], dir_fd=parent.fd))
        return out


def file_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    pattern: str = args.get("pattern", "*")
    want = args.get("type", "all")
    max_depth = int(args.get("max_depth", -1))
    limit = int(args.get("limit", 20))
    matches: list[dict[str, Any]] = []
    truncated = False
    with Workspace.for_call(ctx) as ws:
        parts = ws.parts(args.get("path", "."))
        budget = _listing_room(ws.rel(parts), ctx.limits.output_bytes)
        keep = glob_matcher(pattern, parts)
        for entry in ws.walk(parts, max_depth=max_depth):
            if want == "file" and entry.type != "file":
                continue
            if want == "dir" and entry.type != "directory":
                continue
            if not keep(entry):
                continue
            item, size = _listed(entry)
            budget -= size
            if len(matches) >= limit or budget < 0:
                truncated = True
                break
            matches.append(item)
        return {
            "path": ws.rel(parts),
            "matches": matches,
            "count": len(matches),
            "truncated": truncated or ws.walk_cut,
        }
