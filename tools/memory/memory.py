"""Snippets and memory: small text records that persist across calls and broker restarts.

Host backend: these run in the broker on its state store, ``ctx.options["state_dir"] /
"state.db"`` (SQLite, WAL). They touch no workspace file and run no code. Every statement
is parameterised; names, keys and tags are data, never SQL. They make ``.runtime`` when it is
missing, never the workspace: one removed under the broker is the sandboxed tools' error.

One argument names one entry: a snippet's name or a memory's key wins over an id (the entry
with that name, else the one with that id), and a name or key of an id's form is refused at
write time, so the two never meet in a new store. Before, ``WHERE key = ? OR id = ?`` made one
memory_delete remove both an entry and the one keyed by its id.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from runtime._fsio import private_file, state_file_problem
from runtime.errors import InvalidArguments, ResourceLimitExceeded, SandboxError, ToolFailed
from runtime.toolkit import ToolContext, result_size

__all__ = [
    "memory_delete",
    "memory_read",
    "memory_search",
    "memory_write",
    "snippet_delete",
    "snippet_list",
    "snippet_load",
    "snippet_save",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tool_snippets (
    id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, code TEXT NOT NULL,
    description TEXT NOT NULL, language TEXT NOT NULL, tags TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tool_memory (
    id TEXT PRIMARY KEY, key TEXT NOT NULL UNIQUE, content TEXT NOT NULL,
    category TEXT NOT NULL, tags TEXT NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
"""

#: The ids the tools make (``snip_``/``m_`` and 16 hex digits): no name or key may take them.
_SNIPPET_ID = re.compile(r"snip_[0-9a-f]{16}")
_MEMORY_ID = re.compile(r"m_[0-9a-f]{16}")


class _Store:
    """One connection to the state store for one call; closed on exit."""

    def __init__(self, ctx: ToolContext) -> None:
        state_dir = ctx.options.get("state_dir")
        if state_dir is None:
            raise ToolFailed(
                "this session has no state store for snippets and memory", reason="no_state"
            )
        path = Path(state_dir)
        self.db: sqlite3.Connection | None = None
        try:
            _make_state_dir(path)
            _check_dir(path)
            # Owner-only (SQLite would create it with the umask's 0644, and its -wal/-shm
            # with the file's mode): what agents remember is no other local user's to read.
            private_file(path / "state.db")
            self.db = _connect(path / "state.db")
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            for suffix in ("-wal", "-shm"):
                private_file(path / f"state.db{suffix}", create=False)
            self.db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            self.close()
            raise ToolFailed(
                f"the state store in {path} cannot be opened: {exc}", reason="state_store"
            ) from exc
        except BaseException:
            self.close()
            raise

    @property
    def conn(self) -> sqlite3.Connection:
        if self.db is None:
            raise ToolFailed("the state store is closed", reason="state_store")
        return self.db

    def close(self) -> None:
        db, self.db = self.db, None
        if db is not None:
            db.close()

    def __enter__(self) -> _Store:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _workspace_gone(workspace: Path) -> SandboxError | None:
    """The error for a workspace (the state directory's parent) that is gone, or no
    longer a directory, since the broker opened it: the one the sandboxed tools give
    (``workspace_problem``); None while it is there."""
    # Here, not at the top: the host tools load without the sandbox backend's modules.
    from runtime.backends.sandbox._outcome import workspace_problem

    why = workspace_problem(workspace)
    if why is None and workspace.is_symlink():
        why = f"the workspace {workspace} is not a directory (a symlink replaced it)"
    return None if why is None else SandboxError(why, workspace=str(workspace))


def _make_state_dir(path: Path) -> None:
    """Make ``path`` (``.runtime``), 0700, when missing; never its parent, the workspace.

    Red team Q7: with ``parents=True``, a workspace removed under a running broker was made
    again (0755, holding only a new empty store) by the next memory_write, which succeeded
    while every file tool said the workspace does not exist, and what was remembered before
    was silently gone. Now a missing workspace (or one replaced by a file or a symlink) is
    the file tools' ``sandbox_error``, and nothing is made."""
    gone = _workspace_gone(path.parent)
    if gone is not None:
        raise gone
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        return  # _check_dir judges what is there
    except FileNotFoundError:
        gone = _workspace_gone(path.parent)  # removed since the look above
        if gone is not None:
            raise gone from None
        raise


def _check_dir(path: Path) -> None:
    """Raise ToolFailed unless ``path`` (``.runtime``) is still a directory of ours and no
    symlink: the broker checked it when it opened (``broker/_statedir``), and a link put in
    its place since would have the store, even its empty new file, made wherever it points."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise ToolFailed(
            f"the state directory {path} is no longer a directory of this user's (a symlink, "
            "a file or another user's); not used",
            reason="state_store",
        )


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to the state store at ``path``, known to be the regular file of ours
    that the name holds (:func:`~runtime._fsio.state_file_problem`), not a symlink's target.

    SQLite opens by name and follows a link, in the name and in its directory (``.runtime``),
    and it cannot be asked not to from Python. So the name is checked with ``lstat`` before,
    and after the connect the file SQLite opened is compared with it: SQLite resolves links
    itself and ``PRAGMA database_list`` names the file it resolved to, which must be this
    name in the real ``.runtime``; and the name must still hold the same inode. Not opened
    here: closing any descriptor of the file would drop the locks other connections of this
    process hold on it (see ``private_file``).

    Hazard left: a swap between SQLite's resolving and its ``open`` that is undone before
    the check after it. That needs write access to ``.runtime``, which the broker checked is
    this user's alone (0700, ``broker/_statedir``) and every sandboxed call's mounts hide."""
    why = state_file_problem(path)
    if why is not None:
        raise ToolFailed(
            f"the state store {path} {why}; remove it (the broker makes a private one)",
            reason="state_store",
        )
    before = os.lstat(path)
    expected = os.path.join(os.path.realpath(path.parent.parent), path.parent.name, path.name)
    db = sqlite3.connect(path, timeout=10)
    try:
        opened = str(db.execute("PRAGMA database_list").fetchone()[2])
        after = os.lstat(path)
    except BaseException:
        db.close()
        raise
    if opened != expected or (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
        db.close()
        raise ToolFailed(
            f"the state store {path} changed while it was opened (SQLite opened {opened}); "
            "not used",
            reason="state_store",
        )
    return db


def _snippet(row: sqlite3.Row, *, with_code: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row["id"],
        "name": row["name"],
        "description": row["description"],
        "language": row["language"],
        "tags": json.loads(row["tags"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }
    if with_code:
        out["code"] = row["code"]
    return out


def _refuse_id_form(value: str, form: re.Pattern[str], field: str) -> None:
    """Raise InvalidArguments when ``value`` (a name or key) has the form of an id: the
    other entry's id would then name two entries."""
    if form.fullmatch(value):
        raise InvalidArguments(
            f"{field} {value!r} has the form of an id ({form.pattern}), and an id names an entry "
            f"too; choose another {field}",
            field=field,
        )


@dataclass(frozen=True)
class _Lookup:
    """The statements that find one row of a table by its name (or key), by its id, and
    delete one by its id: written out whole, so no SQL is ever built from text."""

    by_name: str
    by_id: str
    delete: str


_SNIPPETS = _Lookup(
    "SELECT * FROM tool_snippets WHERE name = ?",
    "SELECT * FROM tool_snippets WHERE id = ?",
    "DELETE FROM tool_snippets WHERE id = ?",
)
_MEMORIES = _Lookup(
    "SELECT * FROM tool_memory WHERE key = ?",
    "SELECT * FROM tool_memory WHERE id = ?",
    "DELETE FROM tool_memory WHERE id = ?",
)


def _one_row(db: sqlite3.Connection, table: _Lookup, value: str) -> sqlite3.Row | None:
    """The one row ``value`` names: the row whose name (or key) is ``value``, else the row
    whose id is (names and ids are both unique)."""
    row: sqlite3.Row | None = db.execute(table.by_name, (value,)).fetchone()
    if row is None:
        row = db.execute(table.by_id, (value,)).fetchone()
    return row


def _delete_one(db: sqlite3.Connection, table: _Lookup, value: str) -> bool:
    """Delete the one row ``value`` names (:func:`_one_row`); whether there was one."""
    row = _one_row(db, table, value)
    if row is None:
        return False
    db.execute(table.delete, (row["id"],))
    return True


def _refuse_unreadable(result: dict[str, Any], reader: str, ctx: ToolContext) -> None:
    """Raise ResourceLimitExceeded when ``result``, what ``reader`` would return for the
    entry being saved, is over this call's output limit: such an entry was stored and
    every read of it failed output_too_large. Nothing is written then."""
    size, cap = result_size(result), ctx.limits.output_bytes
    if size > cap:
        raise ResourceLimitExceeded(
            f"not saved: {reader} would return it as {size} bytes of JSON (UTF-8, escapes and "
            f"the other fields included), over the output limit of {cap} bytes; save less",
            reason="result_too_large",
            limit="output_bytes",
            size=size,
            max_bytes=cap,
        )


def _capped(
    head: dict[str, Any], field: str, items: list[dict[str, Any]], limit: int, cap: int
) -> dict[str, Any]:
    """``head`` with ``field`` holding the first of ``items``, at most ``limit``, that fit in
    ``cap`` bytes (the output limit) with the rest of the result; ``truncated`` when some
    were left out. A result over the limit would be refused whole (output_too_large).
    Canonical JSON composes: a list's bytes are its items' and one comma between two."""
    out: dict[str, Any] = {**head, field: [], "truncated": False}  # "false": the longer
    size, kept = result_size(out), []
    for item in items[:limit]:
        size += result_size(item) + (1 if kept else 0)
        if size > cap:
            break
        kept.append(item)
    out[field], out["truncated"] = kept, len(kept) < len(items)
    return out


def snippet_save(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    _refuse_id_form(args["name"], _SNIPPET_ID, "name")
    now = time.time()
    tags = sorted(set(args.get("tags") or []))
    with _Store(ctx) as st, st.conn as db:
        row = db.execute(
            "SELECT id, created_at FROM tool_snippets WHERE name = ?", (args["name"],)
        ).fetchone()
        sid = row["id"] if row else f"snip_{uuid.uuid4().hex[:16]}"
        loaded = {
            "id": sid,
            "name": args["name"],
            "description": args.get("description", ""),
            "language": args.get("language", "plaintext"),
            "tags": tags,
            "created_at": row["created_at"] if row else now,
            "updated_at": now,
            "code": args["code"],
        }
        _refuse_unreadable(loaded, "snippet_load", ctx)
        db.execute(
            "INSERT INTO tool_snippets VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO "
            "UPDATE SET code=excluded.code, description=excluded.description, "
            "language=excluded.language, tags=excluded.tags, updated_at=excluded.updated_at",
            (
                sid,
                args["name"],
                args["code"],
                args.get("description", ""),
                args.get("language", "plaintext"),
                json.dumps(tags),
                now,
                now,
            ),
        )
    return {"id": sid, "name": args["name"], "created": row is None}


def snippet_load(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    name = args["name"]
    with _Store(ctx) as st:
        row = _one_row(st.conn, _SNIPPETS, name)
    if row is None:
        raise ToolFailed(
            f"no snippet named {name!r}; snippet_list shows the saved ones",
            reason="not_found",
            name=name,
        )
    return _snippet(row, with_code=True)


def snippet_list(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    want = set(args.get("tags") or [])
    language = args.get("language")
    limit = int(args.get("limit", 100))
    sql, params = "SELECT * FROM tool_snippets", []
    if language:
        sql, params = sql + " WHERE language = ?", [language]
    with _Store(ctx) as st:
        rows = st.conn.execute(sql + " ORDER BY name", params).fetchall()
    found = [_snippet(r, with_code=False) for r in rows if want <= set(json.loads(r["tags"]))]
    return _capped({"count": len(found)}, "snippets", found, limit, ctx.limits.output_bytes)


def snippet_delete(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    with _Store(ctx) as st, st.conn as db:
        deleted = _delete_one(db, _SNIPPETS, args["name"])
    return {"name": args["name"], "deleted": deleted}


def _memory(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "key": row["key"],
        "content": row["content"],
        "category": row["category"],
        "tags": json.loads(row["tags"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def memory_write(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    now = time.time()
    key = args.get("key") or f"mem_{uuid.uuid4().hex[:12]}"
    _refuse_id_form(key, _MEMORY_ID, "key")
    tags = sorted(set(args.get("tags") or []))
    category = args.get("category", "note")
    with _Store(ctx) as st, st.conn as db:
        row = db.execute("SELECT id, created_at FROM tool_memory WHERE key = ?", (key,)).fetchone()
        mid = row["id"] if row else f"m_{uuid.uuid4().hex[:16]}"
        read = {
            "id": mid,
            "key": key,
            "content": args["content"],
            "category": category,
            "tags": tags,
            "created_at": row["created_at"] if row else now,
            "updated_at": now,
        }
        _refuse_unreadable(read, "memory_read", ctx)
        db.execute(
            "INSERT INTO tool_memory VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(key) DO UPDATE "
            "SET content=excluded.content, category=excluded.category, tags=excluded.tags, "
            "updated_at=excluded.updated_at",
            (mid, key, args["content"], category, json.dumps(tags), now, now),
        )
    return {"id": mid, "key": key, "created": row is None}


def memory_read(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    key = args["key"]
    with _Store(ctx) as st:
        row = _one_row(st.conn, _MEMORIES, key)
    if row is None:
        raise ToolFailed(
            f"no memory with key {key!r}; memory_search finds entries by content",
            reason="not_found",
            key=key,
        )
    return _memory(row)


def memory_search(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Every word of ``query`` must occur (case-insensitive) in the key, content or tags;
    entries with more occurrences rank first, then the most recently updated."""
    terms = [t.casefold() for t in args.get("query", "").split()]
    category = args.get("category")
    want = set(args.get("tags") or [])
    limit = int(args.get("limit", 10))
    sql, params = "SELECT * FROM tool_memory", []
    if category:
        sql, params = sql + " WHERE category = ?", [category]
    with _Store(ctx) as st:
        rows = st.conn.execute(sql, params).fetchall()
    scored: list[tuple[int, float, dict[str, Any]]] = []
    for row in rows:
        entry = _memory(row)
        if not want <= set(entry["tags"]):
            continue
        hay = " ".join([entry["key"], entry["content"], *entry["tags"]]).casefold()
        if all(t in hay for t in terms):
            scored.append((sum(hay.count(t) for t in terms), entry["updated_at"], entry))
    scored.sort(key=lambda s: (-s[0], -s[1]))
    matches = [s[2] for s in scored]
    return _capped({"count": len(scored)}, "matches", matches, limit, ctx.limits.output_bytes)


def memory_delete(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    with _Store(ctx) as st, st.conn as db:
        deleted = _delete_one(db, _MEMORIES, args["key"])
    return {"key": args["key"], "deleted": deleted}
