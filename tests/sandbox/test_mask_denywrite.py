"""What a call creates on a ``paths.deny_write`` path that did not exist when it started:
``.git`` in a workspace without one, ``sub/.git`` anywhere (``_denywrite``). Nothing exists to
bind read-only, so the fork-server looks again when the call has ended and renames each new
entry in place; the call's error says so (``DeniedPathWritten``, ``policy_denied``).

This module lives in tests/sandbox, so test_unprivileged runs it again as the ordinary user
``rtsbx`` (an unprivileged broker).
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox import _denywrite, masks
from runtime.backends.sandbox.masks import MaskSpec
from runtime.errors import DeniedPathWritten, ErrorType, ToolTimeout
from tests.sandbox.helpers import SHELL, WRITE_FILE, call, run_with_backend

pytestmark = [pytest.mark.sandbox]

DEFAULT_MASKS = MaskSpec(
    hide=(".runtime/**", "**/.env", "**/.env.*", "**/*.pem", "**/*.key", "**/id_rsa*"),
    readonly=(".git/**", "**/.git/**"),
)
FSMONITOR = "[core]\\n\\tfsmonitor = touch /tmp/pwned-by-a-call\\n"
TAG = ".quarantined-call_test"  # helpers.request's call id


@pytest.fixture
def ws(workspace: Path) -> Path:
    os.chmod(workspace, 0o777)  # the sandbox's uid writes it (as root, an unprivileged one)
    return workspace


def _run(workspace: Path, *calls: tuple[Any, dict[str, Any]], **backend: Any) -> list[Any]:
    """Each call's result, or the typed error it raised."""

    async def fn(b: Any) -> list[Any]:
        out: list[Any] = []
        for tool, args in calls:
            try:
                out.append((await call(b, tool, workspace, **args)).result)
            except Exception as exc:  # the typed error is what is checked
                out.append(exc)
        return out

    backend.setdefault("masks", DEFAULT_MASKS)
    result: list[Any] = run_with_backend(fn, **backend)
    return result


def _sh(command: str, **limits: Any) -> tuple[Any, dict[str, Any]]:
    args: dict[str, Any] = {"command": command}
    if limits:
        args["limits"] = limits
    return SHELL, args


def _moved(exc: Any, *pairs: tuple[str, str]) -> None:
    assert isinstance(exc, DeniedPathWritten), exc
    assert exc.error_type is ErrorType.POLICY_DENIED
    assert exc.details["rule"] == "paths.deny_write"
    assert exc.details["quarantined"] == "; ".join(f"{a} -> {b}" for a, b in pairs)
    assert exc.usage["quarantined"] == [f"{a} -> {b}" for a, b in pairs]


# -- the attack: a repository planted where none was ------------------------------------


def test_a_git_config_made_by_the_shell_is_moved_aside(ws: Path) -> None:
    (out,) = _run(ws, _sh(f"mkdir .git && printf '{FSMONITOR}' > .git/config && echo made"))
    _moved(out, (".git", f".git{TAG}"))
    assert not os.path.lexists(ws / ".git")
    assert "fsmonitor" in (ws / f".git{TAG}" / "config").read_text()  # kept for the user
    assert "'.git'" in out.message and "moved aside" in out.message
    assert out.details["stdout"] == "made\n"  # what the command printed is kept


def test_a_gitdir_file_made_by_write_file_is_moved_aside(ws: Path) -> None:
    # A .git *file* points git at another directory, whose config it then runs.
    (out,) = _run(ws, (WRITE_FILE, {"path": ".git", "content": "gitdir: evil\n"}))
    _moved(out, (".git", f".git{TAG}"))
    assert not os.path.lexists(ws / ".git")
    assert (ws / f".git{TAG}").read_text() == "gitdir: evil\n"


def test_a_hook_in_a_nested_repository(ws: Path) -> None:
    hook = "sub/.git/hooks/pre-commit"
    (out,) = _run(ws, _sh(f"mkdir -p sub/.git/hooks && echo 'touch /tmp/x' > {hook}"))
    _moved(out, ("sub/.git", f"sub/.git{TAG}"))
    assert not os.path.lexists(ws / "sub" / ".git")
    assert (ws / "sub" / f".git{TAG}" / "hooks" / "pre-commit").exists()


def test_a_directory_renamed_into_git(ws: Path) -> None:
    (out,) = _run(ws, _sh(f"mkdir x && printf '{FSMONITOR}' > x/config && mv x .git"))
    _moved(out, (".git", f".git{TAG}"))
    assert not os.path.lexists(ws / ".git") and not (ws / "x").exists()


def test_a_link_planted_at_git(ws: Path) -> None:
    (out,) = _run(ws, _sh(f"mkdir evil && printf '{FSMONITOR}' > evil/config && ln -s evil .git"))
    _moved(out, (".git", f".git{TAG}"))
    assert not os.path.lexists(ws / ".git")
    assert os.readlink(ws / f".git{TAG}") == "evil"
    assert (ws / "evil" / "config").exists()  # not on a denied path: the call's own data


def test_a_hard_link_into_a_new_git(ws: Path) -> None:
    (out,) = _run(ws, _sh(f"printf '{FSMONITOR}' > x; mkdir .git; ln x .git/config"))
    _moved(out, (".git", f".git{TAG}"))
    assert (ws / "x").exists() and not os.path.lexists(ws / ".git")


def test_a_repository_in_a_directory_made_read_only(ws: Path) -> None:
    # The call takes the write bit off the directory holding what it planted; the check
    # (as the same user, when unprivileged) puts it back for the rename, then restores it.
    (out,) = _run(ws, _sh("mkdir -p sub/.git && echo x > sub/.git/config && chmod 555 sub"))
    _moved(out, ("sub/.git", f"sub/.git{TAG}"))
    assert os.stat(ws / "sub").st_mode & 0o777 == 0o555


def test_many_planted_repositories_in_one_call(ws: Path) -> None:
    (out,) = _run(ws, _sh("for i in 1 2 3; do mkdir -p d$i/.git; done; mkdir .git"))
    _moved(
        out,
        (".git", f".git{TAG}"),
        ("d1/.git", f"d1/.git{TAG}"),
        ("d2/.git", f"d2/.git{TAG}"),
        ("d3/.git", f"d3/.git{TAG}"),
    )


def test_a_repository_inside_a_new_hidden_directory(ws: Path) -> None:
    # A directory the masks hide (**/*.pem) is not entered by the look; the call made it,
    # so what is in it was writable.
    (out,) = _run(ws, _sh("mkdir -p k.pem/.git && echo x > k.pem/.git/config"))
    _moved(out, ("k.pem/.git", f"k.pem/.git{TAG}"))


def test_the_check_finishes_past_what_the_next_look_refuses(ws: Path) -> None:
    # A hidden name made a second link (refused by the next call's look) must not stop the
    # check of this call: the repository is still moved.
    (out,) = _run(ws, _sh("mkdir .git; echo a > a; ln a .env"))
    _moved(out, (".git", f".git{TAG}"))


# -- every end of a call -------------------------------------------------------------------


def test_a_call_that_times_out_is_checked(ws: Path) -> None:
    (out,) = _run(ws, _sh("mkdir .git && echo x > .git/config && sleep 60", timeout_s=1.0))
    assert not isinstance(out, ToolTimeout)
    _moved(out, (".git", f".git{TAG}"))


def test_a_call_that_dies_early_is_checked(ws: Path) -> None:
    (out,) = _run(ws, _sh("mkdir .git && kill -9 $$"))
    _moved(out, (".git", f".git{TAG}"))


def test_a_nested_gitdir_file_made_by_write_file(ws: Path) -> None:
    (out,) = _run(ws, (WRITE_FILE, {"path": "sub/.git", "content": "gitdir: x\n"}))
    # No sub/: the tool fails, nothing was created, nothing to move.
    assert not isinstance(out, DeniedPathWritten), out
    (first, second) = _run(
        ws, _sh("mkdir sub"), (WRITE_FILE, {"path": "sub/.git", "content": "gitdir: x\n"})
    )
    assert first["exit_code"] == 0
    _moved(second, ("sub/.git", f"sub/.git{TAG}"))


# -- concurrent calls on one workspace -------------------------------------------------------


async def _until(path: Path) -> None:
    """Wait (up to 15 s) until the sandboxed call has made ``path``."""
    import anyio

    for _ in range(300):
        if await anyio.Path(path).exists():
            return
        await anyio.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def test_a_concurrent_call_sees_the_new_repository_read_only(ws: Path) -> None:
    """B starts while A's new .git exists: B's look finds it, so B gets it read-only (and
    is not blamed for it); A's check moves it when A ends."""
    import anyio

    async def fn(b: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}

        async def first() -> None:
            command = "mkdir .git && echo a > .git/config; while [ ! -e go ]; do sleep 0.05; done"
            try:
                out["a"] = (await call(b, SHELL, ws, command=command)).result
            except Exception as exc:
                out["a"] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await _until(ws / ".git" / "config")
            command = "echo b >> .git/config; echo b-done"
            out["b"] = (await call(b, SHELL, ws, command=command)).result
            (ws / "go").write_text("")
        return out

    out = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert out["b"]["stdout"] == "b-done\n" and "read-only" in out["b"]["stderr"].lower()
    _moved(out["a"], (".git", f".git{TAG}"))
    assert (ws / f".git{TAG}" / "config").read_text() == "a\n"
    assert not os.path.lexists(ws / ".git")


def test_a_repository_the_user_makes_during_a_call_is_moved_too(ws: Path) -> None:
    """Documented: what appears on a denied path while a call runs cannot be told from what
    the call made; it is moved aside (kept, not deleted) and the call's error says so."""
    import anyio

    async def fn(b: Any) -> Any:
        async def user() -> None:
            await _until(ws / "started")
            (ws / ".git").mkdir()
            (ws / "go").write_text("")

        async with anyio.create_task_group() as tg:
            tg.start_soon(user)
            command = "touch started; while [ ! -e go ]; do sleep 0.05; done"
            try:
                return (await call(b, SHELL, ws, command=command)).result
            except Exception as exc:
                return exc

    _moved(run_with_backend(fn, masks=DEFAULT_MASKS), (".git", f".git{TAG}"))


# -- what must stay as it is ----------------------------------------------------------------


def test_benign_writes_are_untouched(ws: Path) -> None:
    (out,) = _run(
        ws,
        _sh(
            "echo n > notes.txt; echo '*.o' > .gitignore; mkdir -p .github/workflows src/git; "
            "echo x > src/git/x.c; mkdir .gitmodules.d; echo done"
        ),
    )
    assert out["stdout"] == "done\n", out
    names = sorted(os.listdir(ws))
    assert not any(_denywrite._SUFFIX in n for n in names), names
    assert (ws / "src" / "git" / "x.c").exists() and (ws / ".gitignore").exists()


def test_an_existing_repository_stays_read_only_and_in_place(ws: Path) -> None:
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / "sub" / ".git").mkdir(parents=True)
    for path in ws.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    (out,) = _run(ws, _sh("echo x >> .git/config; touch .git/hooks/h sub/.git/h; echo end"))
    assert out["stdout"].endswith("end\n"), out
    assert "read-only" in out["stderr"].lower()
    assert (ws / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (ws / ".git" / "hooks" / "h").exists() and not (ws / "sub" / ".git" / "h").exists()
    assert sorted(os.listdir(ws)) == [".git", "data.bin", "hello.txt", "sub"]


def test_a_repository_made_between_calls_is_the_users(ws: Path) -> None:
    async def fn(b: Any) -> list[Any]:
        first = await call(b, SHELL, ws, command="echo one")
        (ws / ".git").mkdir()
        (ws / ".git" / "config").write_text("mine\n")
        os.chmod(ws / ".git", 0o777)
        os.chmod(ws / ".git" / "config", 0o666)
        second = await call(b, SHELL, ws, command="echo x > .git/config; echo two")
        return [first.result, second.result]

    first, second = run_with_backend(fn, masks=DEFAULT_MASKS, pool=2)
    assert first["stdout"] == "one\n" and second["stdout"] == "two\n"
    assert (ws / ".git" / "config").read_text() == "mine\n"  # bound read-only, not moved


def test_a_read_only_call_is_not_checked(ws: Path) -> None:
    # A call that cannot write has no guard: the fork-server does not look after it.
    plan: dict[str, Any] = {
        "call_id": "c",
        "workspace": str(ws),
        "access": "ro",
        "exec": False,
        "limits": {},
        "masks": DEFAULT_MASKS.as_plan(),
    }
    from runtime.backends.sandbox import child, zygote

    assert zygote._guard(child.CallPlan(**plan), None, (".runtime",)) is None
    plan["access"] = "rw"
    guard = zygote._guard(child.CallPlan(**plan), None, (".runtime",))
    assert guard is not None and guard.tag == "c"


# -- the sweep itself, without a sandbox ----------------------------------------------------


def _baseline(ws: Path, spec: MaskSpec = DEFAULT_MASKS) -> _denywrite.Baseline:
    sig = masks.signature(str(ws), spec)
    base = _denywrite.baseline(str(ws), spec, sig, (".runtime",))
    assert base is not None
    return base


def test_sweep_moves_only_what_is_new(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / "a" / ".git").mkdir(parents=True)
    (workspace / ".runtime").mkdir()
    base = _baseline(workspace)
    (workspace / "b" / ".git").mkdir(parents=True)
    (workspace / "a" / "c" / ".git").mkdir(parents=True)
    (workspace / ".runtime" / ".git").mkdir()  # the broker's own state: never the call's
    swept = _denywrite.sweep(base, "t1")
    assert swept.error is None
    assert swept.moved == (
        ("a/c/.git", "a/c/.git.quarantined-t1"),
        ("b/.git", "b/.git.quarantined-t1"),
    )
    assert (workspace / ".git").is_dir() and (workspace / "a" / ".git").is_dir()
    assert (workspace / ".runtime" / ".git").is_dir()
    assert _denywrite.sweep(base, "t1").moved == ()  # nothing new left


def test_sweep_with_a_user_glob_and_a_tag_that_is_no_path(workspace: Path) -> None:
    spec = MaskSpec(readonly=("**/Makefile", "ci/**"))
    base = _baseline(workspace, spec)
    (workspace / "ci").mkdir()
    (workspace / "ci" / "run.sh").write_text("x")
    (workspace / "Makefile").write_text("all:\n")
    swept = _denywrite.sweep(base, "../x/y")
    assert swept.moved == (
        ("Makefile", "Makefile.quarantined-___x_y"),
        ("ci", "ci.quarantined-___x_y"),
    )


def test_sweep_never_follows_a_link_and_keeps_names_free(workspace: Path) -> None:
    outside = workspace.parent / "outside"
    base = _baseline(workspace)
    (workspace / "sub").symlink_to(outside)  # a link: never entered
    (outside / ".git").mkdir()
    (workspace / ".git").mkdir()
    (workspace / f".git{_denywrite._SUFFIX}t").mkdir()  # the first name is taken
    swept = _denywrite.sweep(base, "t")
    assert swept.moved == ((".git", ".git.quarantined-t-2"),)
    assert (outside / ".git").is_dir()


def test_sweep_leaves_a_directory_put_at_the_workspace_path_alone(workspace: Path) -> None:
    base = _baseline(workspace)
    workspace.rename(workspace.parent / "old")
    workspace.mkdir()
    (workspace / ".git").mkdir()  # the user's new clone, never the call's to write
    assert _denywrite.sweep(base, "t") == _denywrite.Swept()
    assert (workspace / ".git").is_dir()


def test_sweep_reports_what_it_cannot_check(workspace: Path) -> None:
    base = _baseline(workspace)
    for i in range(30):
        (workspace / f"f{i}").write_text("x")
    tight = _denywrite.Baseline(
        str(workspace), MaskSpec(readonly=DEFAULT_MASKS.readonly, max_entries=10), base.known, ()
    )
    swept = _denywrite.sweep(tight, "t")
    assert swept.moved == () and swept.error is not None and "10" in swept.error


def test_the_look_refusing_the_tree_still_gives_a_baseline(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("n")
    (workspace / ".env").symlink_to("notes.txt")  # refused by the look (exposes a save)
    (workspace / ".git").mkdir()
    sig = masks.signature(str(workspace), DEFAULT_MASKS)
    assert sig is not None and sig.found is None
    base = _denywrite.baseline(str(workspace), DEFAULT_MASKS, sig, ())
    assert base is not None
    assert _denywrite.sweep(base, "t").moved == ()  # the existing .git is known


def test_a_tree_that_cannot_be_looked_at_refuses_the_write_call(workspace: Path) -> None:
    for i in range(30):
        (workspace / f"f{i}").write_text("x")
    spec = MaskSpec(readonly=DEFAULT_MASKS.readonly, hide=("**/.env",), max_entries=10)
    with pytest.raises(OSError) as info:
        _denywrite.baseline(str(workspace), spec, None, ())
    assert info.value.errno == errno.E2BIG


def test_past_sixty_four_targets_the_baseline_is_still_known(workspace: Path) -> None:
    for i in range(70):
        (workspace / f"r{i}" / ".git").mkdir(parents=True)
    sig = masks.signature(str(workspace), DEFAULT_MASKS)
    assert sig is not None and sig.key is None and sig.found is not None
    base = _denywrite.baseline(str(workspace), DEFAULT_MASKS, sig, ())
    assert base is not None and len(base.known) == 70
    assert _denywrite.sweep(base, "t").moved == ()


# -- through the broker, on the built-in default policy ---------------------------------------


def test_through_the_broker_the_result_and_the_audit_say_so(ws: Path) -> None:
    from runtime.audit import AuditLog
    from runtime.broker import SyncBroker

    audit = ws.parent / "audit.db"
    with SyncBroker(workspace=ws, audit=audit) as broker:
        planted = broker.call(
            {
                "tool": "shell_exec",
                # Through an archive: the policy refuses a literal '> .git/config' (policy
                # round five); the sandbox's quarantine is what this test is about.
                "arguments": {
                    "command": f"mkdir g && printf '{FSMONITOR}' > g/config && tar cf t.tar"
                    " --transform 's,^g,.git,' g && rm -r g && tar xf t.tar && rm t.tar"
                },
            }
        )
        benign = broker.call({"tool": "shell_exec", "arguments": {"command": "echo ok > n.txt"}})
    assert planted.error is not None, planted
    assert planted.error.type is ErrorType.POLICY_DENIED
    assert planted.error.details["rule"] == "paths.deny_write"
    assert planted.error.details["quarantined"].startswith(".git -> .git.quarantined-call_")
    assert not os.path.lexists(ws / ".git")
    assert benign.success, benign
    with AuditLog(audit) as log:
        done = [r for r in log.tail(10) if r.kind == "completion"]
        assert log.verify().ok
    assert [(r.outcome, r.error_type) for r in done] == [
        ("error", "policy_denied"),
        ("success", None),
    ]
    assert ".git.quarantined-call_" in json.dumps(done[0].usage)
