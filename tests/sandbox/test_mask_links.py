"""A symbolic link on a policy-denied path: the masks' blind spot after the hard link.

An agent's call plants ``.env -> x`` while no ``.env`` exists (a call may create anything).
The user later writes a secret into ``.env``: their editor or shell follows the link and the
secret lands in ``x``, a name no policy glob denies, which every later call could read. The
masks cover names, and a symbolic link is never masked itself (inside the sandbox it resolves
to what it names). So a link on a denied path that leads, as a host process would follow it,
to an entry inside the workspace that is not hidden itself refuses the call, as a denied
file with a second hard link does: the user removes the link, and calls run again.

This module lives in tests/sandbox, so test_unprivileged runs it again as the ordinary user
``rtsbx`` (an unprivileged broker).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.sandbox.masks import MaskSpec, find, signature

pytestmark = [pytest.mark.sandbox]

SECRET = "API_KEY=s3cr3t-9c1e"


def _shell(broker: Any, command: str) -> Any:
    return broker.call({"tool": "shell_exec", "arguments": {"command": command}})


def _renamed_by_tar(make: str, name: str, new: str) -> str:
    """A shell command that makes ``name`` (``make``), then gives it the name ``new``
    through an archive (extracted under a name only the archive holds). The policy refuses
    a literal 'ln -s x .env' (tests/policy/test_policy_round5_paths.py); what these tests
    are about is the masks' part, for a call that plants the link past the policy."""
    return (
        f"{make} && tar cf t.tar --transform 's,^{name}$,{new},' {name} && rm {name}"
        " && tar xf t.tar && rm t.tar"
    )


def _refused(result: Any) -> None:
    assert SECRET not in result.model_dump_json()
    assert result.error is not None and result.error.type == "sandbox_error", result
    assert "symbolic link" in result.error.message, result.error.message


@pytest.mark.parametrize(
    "target",
    [
        "x",  # dangling: the user's write creates x
        "sub/../x",
        "a",  # a chain: .env -> a -> x
        "../ws/x",  # out of the workspace and back in through its parent
        "ABSOLUTE",  # the workspace's host path, which a call can guess
    ],
)
def test_a_link_planted_on_a_denied_name_is_refused(workspace: Path, target: str) -> None:
    from runtime.broker import SyncBroker

    if target == "ABSOLUTE":
        target = str(workspace / "x")
    with SyncBroker(workspace=workspace) as broker:
        made = _shell(
            broker, _renamed_by_tar(f"mkdir sub && ln -s x a && ln -s '{target}' l", "l", ".env")
        )
        assert made.success and made.result["exit_code"] == 0, made
        with (workspace / ".env").open("a") as f:  # the user, through the link
            f.write(SECRET + "\n")
        assert (workspace / "x").read_text() == SECRET + "\n"
        leak = broker.call({"tool": "read_file", "arguments": {"path": "x"}})
        shell = _shell(broker, "cat x")
        (workspace / ".env").unlink()  # the user removes the link: calls run again
        again = _shell(broker, "cat x; echo ok")
    _refused(leak)
    _refused(shell)
    assert again.success and again.result["stdout"] == SECRET + "\nok\n"


def test_links_that_lead_to_hidden_or_outside_entries_still_run(workspace: Path) -> None:
    """Links are common in real trees: a denied name pointing at another hidden file, at a
    file outside the workspace, or nowhere a write can land; and links under names no glob
    denies (a pnpm tree's node_modules) — none of them exposes anything."""
    from runtime.broker import SyncBroker

    (workspace / ".env.local").write_text(SECRET)
    (workspace / ".env").symlink_to(".env.local")
    (workspace / "id_rsa").symlink_to(workspace.parent / "outside" / "canary.txt")
    (workspace / "secrets.pem").symlink_to("missing-dir/secrets.pem")
    (workspace / "loop.key").symlink_to("loop.key")
    (workspace / "pkg").mkdir()
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "pkg").symlink_to("../pkg")
    (workspace / "alias.txt").symlink_to("hello.txt")
    with SyncBroker(workspace=workspace) as broker:
        result = _shell(broker, "cat .env; cat hello.txt; ls node_modules/pkg/ && echo ok")
    assert result.success, result.error
    assert SECRET not in result.result["stdout"]
    assert result.result["stdout"].endswith("hello\nok\n")


@pytest.fixture
def root_fd(workspace: Path) -> Iterator[int]:
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def _find(root_fd: int, workspace: Path, *hide: str) -> list[str]:
    return [t.rel for t in find(root_fd, MaskSpec(hide=hide), host=str(workspace))]


def _refusal(root_fd: int, workspace: Path, *hide: str) -> OSError:
    with pytest.raises(OSError) as info:
        find(root_fd, MaskSpec(hide=hide), host=str(workspace))
    return info.value


def test_a_directory_link_on_an_anchored_denied_path(workspace: Path, root_fd: int) -> None:
    """``config/prod.env`` denied, ``config`` a link to ``y``: the user's ``config/prod.env``
    lands in ``y/prod.env``. Under ``**/name`` globs a directory link keeps the name, so
    those are left alone."""
    (workspace / "y").mkdir()
    (workspace / "config").symlink_to("y")
    err = _refusal(root_fd, workspace, "config/prod.env")
    assert err.errno == errno.EXDEV and "'config'" in str(err)
    assert _find(root_fd, workspace, "**/prod.env", "**/.ssh/**") == []
    err = _refusal(root_fd, workspace, "**/config/*.env")
    assert err.errno == errno.EXDEV
    # Pointing at a hidden directory is fine: what lands there is hidden too.
    assert _find(root_fd, workspace, "config/prod.env", "y/**") == ["y"]


def test_what_a_link_may_and_may_not_lead_to(workspace: Path, root_fd: int) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "real.env").write_text(SECRET)
    (workspace / ".env").symlink_to("sub/real.env")  # onto a hidden file
    assert _find(root_fd, workspace, "**/.env", "**/*.env") == ["sub/real.env"]
    assert _refusal(root_fd, workspace, "**/.env").errno == errno.EXDEV
    (workspace / ".env").unlink()
    (workspace / ".env").symlink_to(".")  # the workspace itself
    assert _refusal(root_fd, workspace, "**/.env").errno == errno.EXDEV
    (workspace / ".env").unlink()
    (workspace / ".env").symlink_to("/dev/null")
    assert _find(root_fd, workspace, "**/.env") == []
    (workspace / ".env").unlink()
    (workspace / ".env").symlink_to("hello.txt/x")  # a file as a directory: nothing lands
    assert _find(root_fd, workspace, "**/.env") == []


def test_links_inside_a_hidden_directory(workspace: Path, root_fd: int) -> None:
    """A call that makes a hidden directory (``mkdir .aws``) can fill it: a link out of it,
    or a second name of a file of its own, carries what the user writes there later. The
    walk looks into hidden directories for these two only."""
    (workspace / "y").write_text("")
    secrets = workspace / "secrets"
    (secrets / "d").mkdir(parents=True)
    (secrets / "a").symlink_to("b")  # inside the hidden directory: fine
    (secrets / "d" / "c").symlink_to("../a")
    assert _find(root_fd, workspace, "secrets/**") == ["secrets"]
    (secrets / "d" / "key").symlink_to("../../y")
    assert _refusal(root_fd, workspace, "secrets/**").errno == errno.EXDEV
    (secrets / "d" / "key").unlink()
    os.link(workspace / "y", secrets / "d" / "key")
    err = _refusal(root_fd, workspace, "secrets/**")
    assert err.errno == errno.EMLINK and "secrets/d/key" in str(err)


def test_a_link_in_a_hidden_directory_a_call_made(workspace: Path) -> None:
    from runtime.broker import SyncBroker
    from runtime.policy import Policy
    from runtime.policy.engine import default_policy_path

    text = (
        default_policy_path()
        .read_text()
        .replace('deny = [".runtime/**"', 'deny = [".aws/**", ".runtime/**"')
    )
    assert ".aws/**" in text
    with SyncBroker(workspace=workspace, policy=Policy.from_toml(text, "test")) as broker:
        made = _shell(
            broker,
            _renamed_by_tar("ln -s ../notes.txt l", "l", ".aws/credentials"),  # tar makes .aws,
        )
        assert made.success and made.result["exit_code"] == 0, made
        (workspace / ".aws" / "credentials").write_text(SECRET)  # the user, through it
        leak = broker.call({"tool": "read_file", "arguments": {"path": "notes.txt"}})
        (workspace / ".aws" / "credentials").unlink()
        again = _shell(broker, "cat notes.txt; echo ok")
    _refused(leak)
    assert again.success and again.result["stdout"] == SECRET + "ok\n"


def test_a_tree_with_such_a_link_gets_no_signature(workspace: Path) -> None:
    """The fork-server's look before each call: a spare masked before the link appeared must
    not serve the call (its own walk was clean); equal to nothing, so a fresh child walks,
    and refuses."""
    spec = MaskSpec(hide=("**/.env",))
    with signature(str(workspace), spec) as clean:
        assert clean is not None and clean.key == ()
    (workspace / ".env").symlink_to("x")
    with signature(str(workspace), spec) as linked:
        assert linked is not None and linked.key is None
