"""Black-box: a rename that would carry a protected entry out from under its glob (issue #3).

The masks follow a dentry, the next call's look follows paths: ``mv config cfg`` when
``config/secrets/**`` is denied leaves ``cfg/secrets/prod.env`` for the next call to read.
A call that may write has the directories above such entries bound onto themselves
(``masks._pins``): renaming one is EBUSY, moving anything out of one EXDEV. Each attempt
runs with the pins (it must fail) and with them switched off in the TEST-ONLY
configuration (``disable={"mask_pins"}``: it must succeed), so no test passes because the
attempt was broken to begin with. This module lives in tests/sandbox: test_unprivileged
runs it again as the ordinary user ``rtsbx``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.backends.sandbox.masks import MaskSpec
from runtime.errors import ToolFailed
from tests.sandbox.helpers import PROBE_RO, PROBE_RW, SHELL, call, run_with_backend

pytestmark = [pytest.mark.sandbox, pytest.mark.escape]

SECRET = "CANARY-9c41-pinned"
HOOK = "#!/bin/sh\nexit 0\n"
SPEC = MaskSpec(hide=("config/secrets/**", "**/.env"), readonly=("tools/hooks/**",))
PINS_OFF = frozenset({"mask_pins"})
#: Every place a secret carried by one of the renames below can land.
WHERE = "cfg/secrets/prod.env other/secrets/prod.env c2/secrets/prod.env s2/prod.env"


@pytest.fixture
def tree(workspace: Path) -> Path:
    (workspace / "config" / "secrets").mkdir(parents=True)
    (workspace / "config" / "secrets" / "prod.env").write_text(f"KEY={SECRET}\n")
    (workspace / "config" / "app.toml").write_text("name = 'app'\n")
    (workspace / "tools" / "hooks").mkdir(parents=True)
    (workspace / "tools" / "hooks" / "pre-commit").write_text(HOOK)
    (workspace / "other").mkdir()  # for RENAME_EXCHANGE
    for path in workspace.rglob("*"):
        os.chmod(path, 0o777 if path.is_dir() else 0o666)
    os.chmod(workspace, 0o777)
    return workspace


def _run(ws: Path, steps: list[tuple[Any, dict[str, Any]]], disable: frozenset[str]) -> list[Any]:
    async def fn(b: Any) -> list[Any]:
        return [(await call(b, tool, ws, **args)).result for tool, args in steps]

    out: list[Any] = run_with_backend(fn, masks=SPEC, disable=disable)
    return out


def _read_all(ws: Path, disable: frozenset[str]) -> str:
    (out,) = _run(ws, [(SHELL, {"command": f"cat {WHERE} 2>/dev/null; true"})], disable)
    return str(out["stdout"])


RENAMES = [
    pytest.param(SHELL, {"command": "mv config cfg"}, id="shell-mv"),
    pytest.param(
        SHELL, {"command": 'python3 -c \'import os; os.rename("config", "c2")\''}, id="os.rename"
    ),
    pytest.param(
        PROBE_RW,
        {"action": "rename", "rel": True, "path": "config", "target": "cfg"},
        id="renameat2",
    ),
    pytest.param(
        PROBE_RW,
        {"action": "rename", "rel": True, "path": "config", "target": "other", "flags": 2},
        id="rename-exchange",
    ),
]


def _succeeded(result: dict[str, Any]) -> bool:
    return result.get("exit_code", 0) == 0 and result.get("ok", True) is True


@pytest.mark.parametrize(("tool", "args"), RENAMES)
@pytest.mark.parametrize("disable", [frozenset(), PINS_OFF], ids=["pins", "off"])
def test_renaming_an_ancestor_of_a_hidden_entry(
    tree: Path, tool: Any, args: dict[str, Any], disable: frozenset[str]
) -> None:
    (moved,) = _run(tree, [(tool, args)], disable)
    leaked = _read_all(tree, disable)
    if disable:
        assert _succeeded(moved), moved
        assert SECRET in leaked  # the next call reads what the glob no longer names
        return
    assert not _succeeded(moved), moved
    if tool is PROBE_RW:
        assert moved["errno"] == errno.EBUSY, moved
    else:
        assert "busy" in moved["stderr"].lower(), moved
    assert SECRET not in leaked
    assert (tree / "config" / "secrets" / "prod.env").read_text() == f"KEY={SECRET}\n"


@pytest.mark.parametrize("disable", [frozenset(), PINS_OFF], ids=["pins", "off"])
def test_moving_the_parent_of_a_hidden_directory_out_of_its_pin(
    tree: Path, disable: frozenset[str]
) -> None:
    """``config/secrets`` itself is a mount point (EBUSY either way); a directory between a
    pin and the target may move inside the pin but not out of it (EXDEV)."""
    (tree / "config" / "secrets").rename(tree / "config" / "deep")
    (tree / "config" / "secrets").mkdir()
    (tree / "config" / "deep").rename(tree / "config" / "secrets" / "deep")
    os.chmod(tree / "config" / "secrets", 0o777)
    spec = MaskSpec(hide=("config/**/deep/prod.env",))
    ops = [
        (PROBE_RW, {"action": "rename", "rel": True, "path": "config/secrets", "target": "s2"}),
        (
            PROBE_RW,
            {"action": "rename", "rel": True, "path": "config/secrets", "target": "config/x"},
        ),
        (SHELL, {"command": "cat s2/deep/prod.env config/x/deep/prod.env 2>/dev/null; true"}),
    ]

    async def fn(b: Any) -> list[Any]:
        return [(await call(b, tool, tree, **args)).result for tool, args in ops]

    out, inside, read = run_with_backend(fn, masks=spec, disable=disable)
    if disable:
        assert out == {"ok": True} and SECRET in read["stdout"]
        return
    assert out["errno"] == errno.EXDEV, out
    assert inside == {"ok": True}  # inside its pin the glob still matches: free to move
    assert SECRET not in read["stdout"]


@pytest.mark.parametrize("disable", [frozenset(), PINS_OFF], ids=["pins", "off"])
def test_renaming_an_ancestor_of_a_read_only_entry(tree: Path, disable: frozenset[str]) -> None:
    """``tools/hooks/**`` is bound read-only; moved to ``t/hooks`` it is writable next call."""
    first, second = _run(
        tree,
        [
            (SHELL, {"command": "mv tools t"}),
            (
                SHELL,
                {"command": "echo evil > t/hooks/pre-commit; echo evil > tools/hooks/pre-commit"},
            ),
        ],
        disable,
    )
    if disable:
        assert first["exit_code"] == 0, first
        assert (tree / "t" / "hooks" / "pre-commit").read_text() == "evil\n"
        return
    assert first["exit_code"] != 0 and "busy" in first["stderr"].lower(), first
    assert second["exit_code"] != 0
    assert (tree / "tools" / "hooks" / "pre-commit").read_text() == HOOK


def _move_file(tree: Path, source: str, destination: str, refusal: str) -> None:
    """The built-in ``move_file`` on the backend alone (the broker's policy is not asked):
    refused with ``reason = "masked"`` and a message matching ``refusal``."""
    from runtime.catalogue import Catalogue

    move = Catalogue().get("move_file")

    async def fn(b: Any) -> Any:
        return await call(b, move, tree, source=source, destination=destination)

    with pytest.raises(ToolFailed, match=refusal) as info:
        run_with_backend(fn, masks=SPEC)
    assert info.value.details["reason"] == "masked"


def test_move_file_tool_on_a_directory(tree: Path) -> None:
    """The broker's policy refuses this by name; here the kernel alone: EBUSY, reported as
    a masked entry, nothing moved."""
    _move_file(tree, "config", "cfg", "policy hides or protects")
    assert (tree / "config" / "secrets" / "prod.env").exists() and not (tree / "cfg").exists()


def test_move_file_tool_out_of_a_pinned_directory(tree: Path) -> None:
    """A plain file moved out of a pinned directory: rename(2) is EXDEV across the pin, and
    the tool says why instead of "outside the workspace"."""
    _move_file(tree, "config/app.toml", "app.toml", "copy it instead")
    assert (tree / "config" / "app.toml").exists()


# -- what the kernel does at the edges ----------------------------------------------------


def test_the_protected_entries_themselves(tree: Path) -> None:
    """A masked file is a mount point: renaming it is EBUSY, a hard link of it EXDEV (the
    path resolves to the mask); a hidden directory likewise cannot be renamed."""
    (tree / "config" / ".env").write_text(SECRET)
    os.chmod(tree / "config" / ".env", 0o666)
    ops = [
        {"action": "rename", "rel": True, "path": "config/.env", "target": "config/plain"},
        {"action": "link", "rel": True, "path": "config/.env", "target": "config/plain"},
        {"action": "rename", "rel": True, "path": "config/secrets", "target": "config/s"},
        {"action": "rename", "path": "/workspace", "target": "/w2"},
    ]
    out = _run(tree, [(PROBE_RW, op) for op in ops], frozenset())
    assert [r.get("errno") for r in out[:3]] == [errno.EBUSY, errno.EXDEV, errno.EBUSY], out
    # The workspace root: a mount point on the read-only new root.
    assert out[3]["errno"] in (errno.EBUSY, errno.EROFS), out


def test_a_read_only_call_cannot_rename_and_gets_no_pins(tree: Path) -> None:
    """Pins are only for calls that may write: in a read-only call every rename is EROFS
    already, and its mount table holds the masks alone."""
    ops = [
        (PROBE_RO, {"action": "rename", "rel": True, "path": "config", "target": "cfg"}),
        (PROBE_RO, {"action": "rename", "rel": True, "path": "config/app.toml", "target": "x"}),
        (PROBE_RO, {"action": "mounts"}),
        (PROBE_RW, {"action": "mounts"}),
    ]
    renamed, plain, ro_mounts, rw_mounts = _run(tree, ops, frozenset())
    assert renamed["errno"] == errno.EROFS and plain["errno"] == errno.EROFS
    assert "/workspace/config" not in ro_mounts["mounts"]
    assert "/workspace/config/secrets" in ro_mounts["mounts"]
    assert {"/workspace/config", "/workspace/tools"} <= set(rw_mounts["mounts"])


def test_an_ancestor_made_during_the_call_is_the_calls_own(workspace: Path) -> None:
    """Nothing existed to protect: a tree the call makes is its own until the next call."""
    os.chmod(workspace, 0o777)
    (out,) = _run(
        workspace,
        [
            (
                SHELL,
                {
                    "command": "mkdir -p config/secrets && echo x > config/secrets/prod.env && "
                    "mv config cfg && cat cfg/secrets/prod.env"
                },
            )
        ],
        frozenset(),
    )
    assert out["exit_code"] == 0 and out["stdout"] == "x\n", out


def test_plain_work_across_a_pin(tree: Path) -> None:
    """Files below a pin are written, renamed inside it and moved out of it (``mv`` copies
    when rename(2) says EXDEV); only a rename(2) across it is refused."""
    (out,) = _run(
        tree,
        [
            (
                SHELL,
                {
                    "command": "echo v2 > config/app.toml && mv config/app.toml config/app2.toml"
                    " && mv config/app2.toml app.toml && cat app.toml && "
                    'python3 -c \'import os; os.rename("app.toml", "config/a.toml")\''
                },
            )
        ],
        frozenset(),
    )
    assert out["stdout"] == "v2\n" and "Invalid cross-device link" in out["stderr"], out


@pytest.mark.parametrize(
    "disable",
    [frozenset(), frozenset({"seccomp"}), frozenset({"seccomp", "capdrop"})],
    ids=["all-on", "no-seccomp", "no-seccomp-no-capdrop"],
)
def test_the_tool_cannot_undo_a_pin(tree: Path, disable: frozenset[str]) -> None:
    """The pins are made before seccomp, by the call's set-up, in a mount namespace whose
    user namespace gives the tool no capability: umount2 is refused by seccomp (ENOSYS),
    and without it by the kernel (EPERM) — with the capability drop switched off too, as
    the tool's uid is not 0 in its namespace."""
    ops = [
        (PROBE_RW, {"action": "umount", "path": "/workspace/config", "flags": 2}),
        (PROBE_RW, {"action": "umount", "path": "/workspace/config/secrets", "flags": 2}),
        (SHELL, {"command": "mv config cfg"}),
    ]
    pin, mask, moved = _run(tree, ops, disable)
    want = errno.EPERM if "seccomp" in disable else errno.ENOSYS
    assert pin["errno"] == want and mask["errno"] == want, (pin, mask)
    assert moved["exit_code"] != 0


def test_a_spare_does_not_serve_a_replaced_ancestor(tree: Path) -> None:
    """A spare pins ``config`` when it is forked. The user then replaces ``config`` (moves
    ``secrets`` into a new directory of that name): the hidden entry is the same inode at
    the same path, so only the pins in the spare's stamp tell that its pin sits on the old
    directory. It must not serve the call: ``mv config cfg`` stays EBUSY."""

    async def fn(b: Any) -> list[Any]:
        outs = [(await call(b, SHELL, tree, command="true")).result]
        await anyio.sleep(0.5)  # the spare for the next call is forked meanwhile
        for n in range(2):
            (tree / "config").rename(tree / f"old{n}")
            (tree / "config").mkdir()
            os.chmod(tree / "config", 0o777)
            (tree / f"old{n}" / "secrets").rename(tree / "config" / "secrets")
            res = await call(b, SHELL, tree, command=f"mv config cfg{n}")
            assert "busy" in res.result["stderr"].lower(), res.result
            outs.append(res.result)
            await anyio.sleep(0.5)
        return outs

    run_with_backend(fn, masks=SPEC, pool=4)
    assert (tree / "config" / "secrets" / "prod.env").exists()
