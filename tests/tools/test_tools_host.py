"""System, memory/snippet and interaction tools (host backend and the clock)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.errors import InvalidArguments, ResourceLimitExceeded, SandboxError, ToolFailed
from runtime.models import Limits
from runtime.toolkit import ToolContext
from runtime.toolkit_env import SESSION_ENV_MAX_BYTES, SESSION_ENV_MAX_VARS, env_bytes

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]
Load = Callable[[str], Tool]


def _reason(fn: Tool, args: dict[str, Any], ctx: ToolContext) -> str:
    with pytest.raises(ToolFailed) as exc:
        fn(args, ctx)
    return str(exc.value.details.get("reason"))


# ------------------------------------------------------------------------------- system


def test_current_time(tool: Load, ctx: ToolContext) -> None:
    now = tool("current_time")
    r = now({}, ctx)
    assert r["timezone"] == "UTC" and r["utc_offset_s"] == 0
    assert dt.datetime.fromisoformat(r["iso"]).timestamp() == pytest.approx(r["timestamp"])
    r = now({"timezone": "Asia/Shanghai"}, ctx)
    assert r["utc_offset_s"] == 8 * 3600 and r["iso"].endswith("+08:00")
    for bad in ("Mars/Olympus", "../../etc/passwd", "/etc/localtime"):
        assert _reason(now, {"timezone": bad}, ctx) == "unknown_timezone"


def test_sleep(tool: Load, ws: Path) -> None:
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=1))
    assert tool("sleep")({"seconds": 0.01}, ctx)["slept"] >= 0.01
    assert tool("sleep")({"seconds": 0}, ctx)["slept"] >= 0
    # Longer than the call's limit: an argument out of range, invalid_arguments (DESIGN §7).
    with pytest.raises(InvalidArguments) as exc:
        tool("sleep")({"seconds": 2}, ctx)
    assert exc.value.details["reason"] == "over_limit" and exc.value.details["field"] == "seconds"


def test_session_env(tool: Load, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST_ONLY", "host")
    session: dict[str, str] = {}
    ctx = ToolContext(workspace=ws, env={"POLICY": "p"}, options={"session_env": session})
    get, set_ = tool("get_env"), tool("set_env")
    assert get({"key": "HOST_ONLY"}, ctx) == {"key": "HOST_ONLY", "value": None, "exists": False}
    assert get({"key": "POLICY"}, ctx)["value"] == "p"
    assert set_({"key": "FOO", "value": "1"}, ctx)["previous"] is None
    assert set_({"key": "FOO", "value": "2"}, ctx)["previous"] == "1"
    assert session == {"FOO": "2"} and os.environ.get("FOO") is None
    assert get({"key": "FOO"}, ctx) == {"key": "FOO", "value": "2", "exists": True}
    assert set_({"key": "FOO", "value": None}, ctx)["previous"] == "2"
    assert get({"key": "FOO"}, ctx)["exists"] is False
    for key in ("LD_PRELOAD", "ld_audit", "BASH_ENV", "BASH_FUNC_x%%", "IFS", "9A", "A B"):
        assert _reason(set_, {"key": key, "value": "x"}, ctx) in ("refused_key", "bad_key")
    with pytest.raises(InvalidArguments) as nul:  # an environment cannot carry a NUL
        set_({"key": "OK", "value": "a\0b"}, ctx)
    assert nul.value.details["reason"] == "bad_value" and "'OK'" in nul.value.message
    no_store = ToolContext(workspace=ws)
    assert _reason(get, {"key": "X"}, no_store) == "no_session_env"


def test_set_env_bounds_the_session_environment(tool: Load, ws: Path) -> None:
    """One value of 32768 emoji (128 KiB of UTF-8) was stored, and every sandboxed call of
    the broker failed after it (its control packet was too large): the session's
    environment is bounded in bytes and in variables, and a refused value leaves it as
    it was."""
    session: dict[str, str] = {"KEEP": "me"}
    ctx = ToolContext(workspace=ws, options={"session_env": session})
    set_ = tool("set_env")
    with pytest.raises(ResourceLimitExceeded) as exc:
        set_({"key": "NOTE", "value": "\U0001f600" * 32768}, ctx)
    assert exc.value.details["reason"] == "env_too_large"
    assert exc.value.details["max_bytes"] == SESSION_ENV_MAX_BYTES
    assert "bytes" in exc.value.message and str(SESSION_ENV_MAX_BYTES) in exc.value.message
    assert session == {"KEEP": "me"}
    # Within the bound: two of 32 KiB do not fit, the first does and stays.
    set_({"key": "V0", "value": "x" * 32768}, ctx)
    with pytest.raises(ResourceLimitExceeded):
        set_({"key": "V1", "value": "x" * 32768}, ctx)
    assert set(session) == {"KEEP", "V0"} and env_bytes(session) <= SESSION_ENV_MAX_BYTES
    # Replacing a value counts the new one only; removing always works.
    set_({"key": "V0", "value": "y" * 32000}, ctx)
    assert set_({"key": "V0", "value": None}, ctx)["previous"] == "y" * 32000
    for i in range(SESSION_ENV_MAX_VARS - 1):
        set_({"key": f"N{i}", "value": "1"}, ctx)
    with pytest.raises(ResourceLimitExceeded) as exc:
        set_({"key": "ONE_MORE", "value": "1"}, ctx)
    assert exc.value.details["limit"] == "env_vars"
    assert len(session) == SESSION_ENV_MAX_VARS


def test_set_env_reaches_shell(tool: Load, ws: Path) -> None:
    session: dict[str, str] = {}
    ctx = ToolContext(workspace=ws, options={"session_env": session})
    tool("set_env")({"key": "GREETING", "value": "hi"}, ctx)
    assert tool("shell_exec")({"command": "echo $GREETING"}, ctx)["stdout"] == "hi\n"


# ------------------------------------------------------------------------------- snippets


def test_snippets_roundtrip_and_persist(tool: Load, ctx: ToolContext, tmp_path: Path) -> None:
    save, load, lst = tool("snippet_save"), tool("snippet_load"), tool("snippet_list")
    r = save(
        {
            "name": "hello",
            "code": "print('hi')",
            "language": "python",
            "tags": ["demo", "io"],
            "description": "greets",
        },
        ctx,
    )
    assert r["created"] and r["name"] == "hello" and r["id"].startswith("snip_")
    save({"name": "q", "code": "SELECT 1", "language": "sql", "tags": ["demo"]}, ctx)
    again = save(
        {"name": "hello", "code": "print('hello')", "language": "python", "tags": ["demo", "io"]},
        ctx,
    )
    assert again["id"] == r["id"] and not again["created"]
    # A new context (a restarted broker) sees the same store.
    ctx2 = ToolContext(workspace=ctx.workspace, options={"state_dir": tmp_path / "state"})
    got = load({"name": "hello"}, ctx2)
    assert got["code"] == "print('hello')" and got["tags"] == ["demo", "io"]
    assert load({"name": r["id"]}, ctx2)["name"] == "hello"
    assert lst({}, ctx2)["count"] == 2
    assert [s["name"] for s in lst({"tags": ["demo", "io"]}, ctx2)["snippets"]] == ["hello"]
    assert [s["name"] for s in lst({"language": "sql"}, ctx2)["snippets"]] == ["q"]
    assert "code" not in lst({}, ctx2)["snippets"][0]
    assert _reason(load, {"name": "nope"}, ctx2) == "not_found"
    assert tool("snippet_delete")({"name": "q"}, ctx2)["deleted"]
    assert not tool("snippet_delete")({"name": "q"}, ctx2)["deleted"]
    assert (tmp_path / "state" / "state.db").is_file()


def test_snippet_names_are_data(tool: Load, ctx: ToolContext) -> None:
    name = "x'); DROP TABLE tool_snippets; --"
    tool("snippet_save")({"name": name, "code": "c"}, ctx)
    assert tool("snippet_load")({"name": name}, ctx)["code"] == "c"


def test_no_state_dir(tool: Load, ws: Path) -> None:
    ctx = ToolContext(workspace=ws)
    assert _reason(tool("snippet_list"), {}, ctx) == "no_state"


@pytest.mark.parametrize("replaced", ["removed", "file", "symlink"])
def test_state_tools_never_make_the_workspace(tool: Load, tmp_path: Path, replaced: str) -> None:
    """Red team Q7: the store's folder was made with parents=True, so a workspace removed
    under the broker came back (0755, an empty store) at the next memory_write, which
    succeeded. Only ``.runtime`` is made, in a workspace still there and a directory (no
    symlink); otherwise the sandboxed tools' error (sandbox_error, the same words)."""
    ws = tmp_path / "gone"
    ws.mkdir()
    ctx = ToolContext(workspace=ws, options={"state_dir": ws / ".runtime"})
    tool("memory_write")({"key": "k", "content": "v"}, ctx)
    assert (ws / ".runtime").stat().st_mode & 0o777 == 0o700
    shutil.rmtree(ws)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if replaced == "file":
        ws.write_text("a file")
    elif replaced == "symlink":
        ws.symlink_to(elsewhere)
    for name, args in (
        ("memory_write", {"key": "k", "content": "v"}),
        ("memory_read", {"key": "k"}),
        ("snippet_list", {}),
    ):
        with pytest.raises(SandboxError) as exc:
            tool(name)(args, ctx)
        assert exc.value.error_type == "sandbox_error"
        assert exc.value.details == {"workspace": str(ws)}
        want = "does not exist" if replaced == "removed" else "not a directory"
        assert want in exc.value.message, exc.value.message
    assert list(elsewhere.iterdir()) == []
    if replaced == "removed":
        assert not os.path.lexists(ws)
    # Back again (the user made it anew): the store is made in it.
    if replaced != "removed":
        ws.unlink()
    ws.mkdir()
    assert tool("memory_write")({"key": "k", "content": "v2"}, ctx)["created"]


# ------------------------------------------------------------------------------- memory


def test_memory_tools(tool: Load, ctx: ToolContext) -> None:
    write, read, search = tool("memory_write"), tool("memory_read"), tool("memory_search")
    write(
        {
            "key": "db",
            "content": "We chose PostgreSQL for the main store",
            "category": "decision",
            "tags": ["arch"],
        },
        ctx,
    )
    write(
        {"key": "bug", "content": "Flaky test in the postgres migration", "category": "issue"}, ctx
    )
    auto = write({"content": "User prefers tabs"}, ctx)
    assert auto["key"].startswith("mem_") and auto["created"]
    r = search({"query": "postgres"}, ctx)
    # Same score (one hit each): the most recently updated first.
    assert [m["key"] for m in r["matches"]] == ["bug", "db"]
    write({"key": "pg2", "content": "postgres, postgres everywhere"}, ctx)
    assert search({"query": "postgres"}, ctx)["matches"][0]["key"] == "pg2"
    tool("memory_delete")({"key": "pg2"}, ctx)
    assert [
        m["key"] for m in search({"query": "postgres", "category": "issue"}, ctx)["matches"]
    ] == ["bug"]
    assert [m["key"] for m in search({"query": "", "tags": ["arch"]}, ctx)["matches"]] == ["db"]
    assert search({"query": "postgres tabs"}, ctx)["count"] == 0
    assert read({"key": "db"}, ctx)["category"] == "decision"
    updated = write({"key": "db", "content": "Now SQLite", "category": "decision"}, ctx)
    assert not updated["created"] and read({"key": "db"}, ctx)["content"] == "Now SQLite"
    assert tool("memory_delete")({"key": "db"}, ctx)["deleted"]
    assert _reason(read, {"key": "db"}, ctx) == "not_found"
    assert search({"query": "x", "limit": 1}, ctx)["count"] <= 1


# ------------------------------------------------------------------------------- interaction


def test_ask_user(tool: Load, ws: Path) -> None:
    asked: list[tuple[str, list[str] | None]] = []

    def hook(question: str, options: list[str] | None) -> str:
        asked.append((question, options))
        return "blue" if options else "free text"

    ctx = ToolContext(workspace=ws, options={"ask_user": hook})
    ask = tool("ask_user")
    assert ask({"question": "Name?"}, ctx)["answer"] == "free text"
    assert ask({"question": "Colour?", "options": ["red", "blue"]}, ctx)["answer"] == "blue"
    assert asked == [("Name?", None), ("Colour?", ["red", "blue"])]
    assert _reason(ask, {"question": "Pick", "options": ["a", "b"]}, ctx) == "answer_not_an_option"
    err = _reason(ask, {"question": "?"}, ToolContext(workspace=ws))
    assert err == "no_user_channel"


def test_request_confirmation(tool: Load, ws: Path) -> None:
    answers = iter(["yes", "no", "maybe"])
    ctx = ToolContext(workspace=ws, options={"ask_user": lambda q, o: next(answers)})
    confirm = tool("request_confirmation")
    assert confirm({"message": "Proceed?", "stage_name": "prd"}, ctx)["confirmed"] is True
    assert confirm({"message": "Proceed?"}, ctx)["confirmed"] is False
    assert _reason(confirm, {"message": "Proceed?"}, ctx) == "answer_not_an_option"


@pytest.mark.parametrize("name", ["ask_user", "request_confirmation", "review"])
def test_a_user_channel_that_raises_is_this_calls_failure(tool: Load, ws: Path, name: str) -> None:
    # The hook is the embedding application's: its exception was an internal_error.
    def hook(question: str, options: list[str] | None) -> str:
        raise RuntimeError("prompt crashed")

    ctx = ToolContext(workspace=ws, options={"ask_user": hook})
    calls = {
        "ask_user": ("ask_user", {"question": "?"}),
        "request_confirmation": ("request_confirmation", {"message": "Go?"}),
        "review": ("review_with_feedback_content", {"title": "t", "content": "c"}),
    }
    tool_name, args = calls[name]
    with pytest.raises(
        ToolFailed, match=r"asking the user failed \(RuntimeError: prompt crashed\)"
    ):
        tool(tool_name)(args, ctx)
    assert _reason(tool(tool_name), args, ctx) == "user_channel_failed"


def test_current_time_without_system_zone_files(tool: Load, ctx: ToolContext) -> None:
    """The sandbox of a tool without exec does not mount /usr/share/zoneinfo: zone data must
    come from the tzdata wheel (a declared dependency)."""
    import zoneinfo

    zoneinfo.reset_tzpath(to=[])
    zoneinfo.ZoneInfo.clear_cache()
    try:
        r = tool("current_time")({"timezone": "Europe/Paris"}, ctx)
        assert r["utc_offset_s"] in (3600, 7200)
        assert tool("current_time")({}, ctx)["timezone"] == "UTC"
    finally:
        zoneinfo.reset_tzpath()
        zoneinfo.ZoneInfo.clear_cache()


def test_state_store_is_owner_only(tool: Load, ctx: ToolContext, tmp_path: Path) -> None:
    """state.db and its -wal/-shm are 0600 whatever the umask (SQLite used it: 0644, every
    local user read what agents remembered); loose files of ours are tightened."""
    old = os.umask(0o022)
    try:
        tool("memory_write")({"key": "k", "content": "remembered"}, ctx)
        state = tmp_path / "state"
        names = ("state.db", "state.db-wal", "state.db-shm")
        modes = {n: (state / n).stat().st_mode & 0o777 for n in names if (state / n).exists()}
        assert modes and set(modes.values()) == {0o600}, modes
        for name in modes:
            (state / name).chmod(0o644)
        assert tool("memory_read")({"key": "k"}, ctx)["content"] == "remembered"
        assert {(state / n).stat().st_mode & 0o777 for n in modes} == {0o600}
    finally:
        os.umask(old)


# ------------------------------------------------------- one key or id names one entry


def test_memory_key_or_id_names_exactly_one_entry(tool: Load, ctx: ToolContext) -> None:
    """memory_delete ran ``DELETE ... WHERE key = ? OR id = ?``: an entry keyed by another
    entry's id made one call delete both, and reads took whichever row came first. A key
    of an id's form is now refused, and a key wins over an id (a store written before
    the refusal may hold such a key)."""
    write, read, delete = tool("memory_write"), tool("memory_read"), tool("memory_delete")
    alpha = write({"key": "alpha", "content": "entry A"}, ctx)
    with pytest.raises(InvalidArguments) as exc:
        write({"key": alpha["id"], "content": "entry B"}, ctx)
    assert exc.value.details["field"] == "key" and "id" in exc.value.message
    assert read({"key": alpha["id"]}, ctx)["key"] == "alpha"
    # A legacy store: an entry keyed by alpha's id, written before keys of that form were
    # refused. The key wins, and one call deletes one entry.
    with sqlite3.connect(ctx.options["state_dir"] / "state.db") as db:
        db.execute(
            "INSERT INTO tool_memory VALUES (?, ?, ?, ?, ?, ?, ?)",
            ("m_ffffffffffffffff", alpha["id"], "entry B", "note", "[]", 1.0, 1.0),
        )
    assert read({"key": alpha["id"]}, ctx)["content"] == "entry B"
    assert delete({"key": alpha["id"]}, ctx)["deleted"]
    assert read({"key": "alpha"}, ctx)["content"] == "entry A"
    assert read({"key": alpha["id"]}, ctx)["key"] == "alpha"  # now the id names alpha
    assert delete({"key": alpha["id"]}, ctx)["deleted"]
    assert _reason(read, {"key": "alpha"}, ctx) == "not_found"


def test_snippet_name_or_id_names_exactly_one_snippet(tool: Load, ctx: ToolContext) -> None:
    save, load, delete = tool("snippet_save"), tool("snippet_load"), tool("snippet_delete")
    one = save({"name": "one", "code": "A"}, ctx)
    with pytest.raises(InvalidArguments) as exc:
        save({"name": one["id"], "code": "B"}, ctx)
    assert exc.value.details["field"] == "name" and "id" in exc.value.message
    assert load({"name": one["id"]}, ctx)["name"] == "one"
    with sqlite3.connect(ctx.options["state_dir"] / "state.db") as db:
        db.execute(
            "INSERT INTO tool_snippets VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            ("snip_ffffffffffffffff", one["id"], "B", "", "plaintext", "[]", 1.0, 1.0),
        )
    assert load({"name": one["id"]}, ctx)["code"] == "B"
    assert delete({"name": one["id"]}, ctx)["deleted"]
    assert load({"name": "one"}, ctx)["code"] == "A"
    assert [s["name"] for s in tool("snippet_list")({}, ctx)["snippets"]] == ["one"]
