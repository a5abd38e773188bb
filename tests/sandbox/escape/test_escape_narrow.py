"""The policy's narrow ``[paths]`` read and write globs bind what *programs* open, not only
the paths a tool names: Landlock grants read only beneath the read globs' literal prefixes
and write only beneath the write globs' (``walls.landlock_rules``), for every call whose
code does not apply the globs itself (a tool that runs programs, a tool that is not the
built-in toolkit). Each attempt is shown to succeed with Landlock switched off (TEST-ONLY),
so no assertion passes because the attempt was broken; with the read-only workspace under
the write prefixes' binds switched off too (``narrow_mounts``: a second wall for writes,
tested on its own in test_escape_narrow_meta).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox.helpers import PROBE_RW, SHELL, call, run_with_backend

pytestmark = [pytest.mark.sandbox, pytest.mark.escape]

#: read = src/** and out/**, write = out/** (what SandboxBackend gets from the policy).
ALLOW = (("src/**", "out/**"), ("out/**",))


@pytest.fixture
def tree(workspace: Path) -> Path:
    os.chmod(workspace, 0o777)  # so that, Landlock off, plain permissions do not stop it
    for name in ("src", "secrets", "out"):
        (workspace / name).mkdir()
        os.chmod(workspace / name, 0o777)
    (workspace / "src" / "a.txt").write_text("SRC\n")
    (workspace / "secrets" / "x.txt").write_text("SECRET\n")
    (workspace / "top.txt").write_text("TOP\n")
    # A symlink inside an allowed folder, into a denied one: Landlock sees the target.
    (workspace / "src" / "link").symlink_to("../secrets")
    return workspace


def _shell(workspace: Path, disable: frozenset[str], commands: list[str]) -> list[Any]:
    async def fn(backend: Any) -> list[Any]:
        out = []
        for command in commands:
            result = (await call(backend, SHELL, workspace, command=command)).result
            out.append((result["exit_code"], result["stdout"]))
        return out

    return list(run_with_backend(fn, disable=disable, allow=ALLOW))


OFF = frozenset({"landlock", "narrow_mounts"})


@pytest.mark.parametrize("disable", [frozenset(), OFF], ids=["on", "off"])
def test_a_program_reads_and_writes_only_what_the_globs_name(
    tree: Path, disable: frozenset[str]
) -> None:
    on = not disable
    got = _shell(
        tree,
        disable,
        [
            "cat src/a.txt",
            "cat secrets/x.txt",
            "cat src/link/x.txt",
            "cat top.txt",
            "ls",
            "echo made > out/new.txt && cat out/new.txt",
            "echo made > planted.txt",
            "echo made > src/planted.txt",
            "mkdir newdir",
        ],
    )
    assert got[0] == (0, "SRC\n")
    assert got[1] == ((1, "") if on else (0, "SECRET\n"))
    assert got[2] == ((1, "") if on else (0, "SECRET\n"))
    assert got[3] == ((1, "") if on else (0, "TOP\n"))
    assert (got[4][0] != 0) is on  # the workspace's root cannot be listed
    assert got[5] == (0, "made\n")
    assert (got[6][0] != 0) is on
    assert (got[7][0] != 0) is on
    assert (got[8][0] != 0) is on
    assert (tree / "planted.txt").exists() is not on
    assert (tree / "src" / "planted.txt").exists() is not on
    assert (tree / "newdir").exists() is not on


@pytest.mark.parametrize("disable", [frozenset(), frozenset({"landlock"})], ids=["on", "off"])
def test_a_python_tool_that_is_not_the_toolkit_is_bound_too(
    tree: Path, disable: frozenset[str]
) -> None:
    async def fn(backend: Any) -> list[Any]:
        return [
            (await call(backend, PROBE_RW, tree, action="read", rel=True, path=p)).result["ok"]
            for p in ("src/a.txt", "secrets/x.txt")
        ]

    assert run_with_backend(fn, disable=disable, allow=ALLOW) == [True, bool(disable)]


def test_a_symlinked_prefix_grants_nothing(tree: Path) -> None:
    """``src`` replaced by a symlink to ``secrets``: the rule's path holds a symlink, so it
    is skipped (mountops.c opens it with RESOLVE_NO_SYMLINKS), not followed to grant
    ``secrets``."""
    (tree / "src" / "link").unlink()
    (tree / "src" / "a.txt").unlink()
    (tree / "src").rmdir()
    (tree / "src").symlink_to("secrets")
    got = _shell(tree, frozenset(), ["cat src/x.txt", "cat secrets/x.txt"])
    assert got == [(1, ""), (1, "")]


def test_globs_that_start_with_a_wildcard_leave_the_workspace_whole(tree: Path) -> None:
    """``**/*.txt`` may match anywhere: no directory holds all its matches, so Landlock
    grants the workspace (the lexical checks of named paths still apply)."""

    async def fn(backend: Any) -> Any:
        return (await call(backend, SHELL, tree, command="cat secrets/x.txt")).result

    result = run_with_backend(fn, allow=(("**/*.txt",), None))
    assert (result["exit_code"], result["stdout"]) == (0, "SECRET\n")


def test_a_spare_does_not_serve_a_write_folder_made_again(tree: Path) -> None:
    """The spare ready for the next call bound ``out`` as it was (the write bind, the
    Landlock rules); removed and made again, ``out`` is another directory, which that spare
    would never let the call write (EROFS): the spare is dismissed, the call writes."""
    import shutil

    async def fn(backend: Any) -> list[Any]:
        out = []
        for command in (
            "echo one > out/a.txt && cat out/a.txt",
            "echo two > out/b.txt && cat out/b.txt",
        ):
            result = (await call(backend, SHELL, tree, command=command)).result
            out.append((result["exit_code"], result["stdout"], result["stderr"]))
            shutil.rmtree(tree / "out")
            (tree / "out").mkdir()
            os.chmod(tree / "out", 0o777)
        return out

    got = run_with_backend(fn, allow=ALLOW)
    assert got[0][:2] == (0, "one\n")
    assert got[1][:2] == (0, "two\n"), got[1]
