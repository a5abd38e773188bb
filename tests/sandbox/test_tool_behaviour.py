"""Built-in tools through the broker and the real sandbox, as a demanding user calls them:
what each must return when a call reaches a limit or meets an odd workspace."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from runtime.policy import Policy
from runtime.policy.engine import default_policy_path

pytestmark = [pytest.mark.sandbox]


def _policy(**limits: Any) -> Policy:
    """The built-in default policy with some ``[limits]`` changed."""
    text = default_policy_path().read_text()
    for key, value in limits.items():
        text, n = re.subn(rf"(?m)^{key} = \S+", f"{key} = {value}", text, count=1)
        assert n == 1, key
    return Policy.from_toml(text, "test")


def test_shell_timeout_by_default_keeps_the_partial_output(workspace: Path) -> None:
    """shell_exec's own timeout defaulted to the call's, so the call's deadline (which ends
    the whole sandbox) always came first: the user got "the call exceeded its timeout"
    without a byte of what the command had printed. The tool now stops the command early
    enough to report it."""
    from runtime.broker import SyncBroker

    with SyncBroker(workspace=workspace, policy=_policy(timeout_s=8)) as broker:
        result = broker.call(
            {"tool": "shell_exec", "arguments": {"command": "echo started; sleep 60"}}
        )
        after = broker.call({"tool": "shell_exec", "arguments": {"command": "echo next"}})
    assert result.error is not None and result.error.type == "timeout", result
    assert result.error.details["stdout"] == "started\n"
    assert "killed" in result.error.message
    assert after.success and after.result == {
        "stdout": "next\n",
        "stderr": "",
        "exit_code": 0,
        "truncated": False,
    }


def test_shell_timeout_keeps_the_tail_of_the_output(workspace: Path) -> None:
    """Through the sandbox: a timed-out command's output came back as its first 1 KiB
    ("1\\n2\\n...283\\n" of `seq 1 100000`), unmarked; now its head and its tail,
    marked truncated."""
    from runtime.broker import SyncBroker

    with SyncBroker(workspace=workspace) as broker:
        result = broker.call(
            {
                "tool": "shell_exec",
                "arguments": {"command": "seq 1 100000; sleep 60", "timeout_s": 1},
            }
        )
    assert result.error is not None and result.error.type == "timeout", result
    out = result.error.details["stdout"]
    assert out.startswith("1\n2\n") and out.endswith("\n100000\n") and "left out" in out
    assert result.error.details["truncated"] is True


def test_big_outputs_come_back_truncated_not_refused(workspace: Path) -> None:
    """Through the broker, whose output cap is checked on the result's JSON: a file or a
    command's output larger than the cap is returned cut (truncated=true), as the tools'
    descriptions say, never an output_too_large error that loses all of it."""
    from runtime.broker import SyncBroker

    cap = 65536
    (workspace / "plain.txt").write_text("a" * 3 * cap)
    (workspace / "quotes.txt").write_text('"\\' * cap)
    (workspace / "blob.bin").write_bytes(b"\x00" * 2 * cap)
    (workspace / "many").mkdir()
    for i in range(400):
        (workspace / "many" / f"{i:03d}{'n' * 200}").write_text("")
    calls = [
        ("read_file", {"path": "plain.txt"}),
        ("read_file", {"path": "quotes.txt"}),
        ("read_file", {"path": "blob.bin", "encoding": "base64"}),
        ("shell_exec", {"command": "head -c 500000 /dev/urandom; head -c 500000 /dev/zero >&2"}),
        ("list_files", {"path": "many"}),
        ("file_search", {"path": "many", "pattern": "*", "limit": 100}),
    ]
    with SyncBroker(workspace=workspace, policy=_policy(output_bytes=cap)) as broker:
        results = [broker.call({"tool": tool, "arguments": args}) for tool, args in calls]
    for (tool, _), result in zip(calls, results, strict=True):
        assert result.success, (tool, result.error)
        assert result.result is not None and result.result["truncated"] is True, tool


def test_a_denied_file_with_another_hard_link_is_refused(workspace: Path) -> None:
    """An agent can make ``.env`` a second name of a file of its own (``touch x; ln x
    .env``); when the user then writes a secret into ``.env`` in place (an append, most
    editors' save), the mask hid ``.env`` but ``x`` read the secret. A hidden file with
    more than one link is now refused (the other names cannot be found to mask)."""
    import errno
    import os

    from runtime.backends.sandbox.masks import MaskSpec, find
    from runtime.broker import SyncBroker

    with SyncBroker(workspace=workspace) as broker:
        # Through an archive: the policy refuses a literal 'ln x .env' (policy round five).
        plant = (
            "touch x && ln x y && tar cf t.tar --transform 's,^y$,.env,' x y && rm y"
            " && tar xf t.tar && rm t.tar"
        )
        made = broker.call({"tool": "shell_exec", "arguments": {"command": plant}})
        assert made.success, made.error
        with (workspace / ".env").open("a") as f:
            f.write("API_KEY=s3cr3t\n")  # the user, in place
        leak = broker.call({"tool": "read_file", "arguments": {"path": "x"}})
        shell = broker.call({"tool": "shell_exec", "arguments": {"command": "cat x"}})
        (workspace / "x").unlink()  # the user removes the extra name: calls run again
        again = broker.call({"tool": "shell_exec", "arguments": {"command": "cat .env; echo ok"}})
    for result in (leak, shell):
        assert "s3cr3t" not in result.model_dump_json()
        assert result.error is not None and result.error.type == "sandbox_error"
        assert "hard link" in result.error.message
    assert again.success and again.result is not None and again.result["stdout"] == "ok\n"

    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(workspace / ".env", workspace / "y")
        with pytest.raises(OSError) as exc:
            find(fd, MaskSpec(hide=("**/.env",)))
        assert exc.value.errno == errno.EMLINK
        # Read-only masks (deny_write: .git/**) still apply to linked files (git makes them).
        assert [t.rel for t in find(fd, MaskSpec(readonly=("y",)))] == ["y"]
    finally:
        os.close(fd)


def test_concurrent_appends_and_edits_in_sandboxes_lose_nothing(workspace: Path) -> None:
    """Red team Q4, through the broker: each call runs in its own sandboxed process (its own
    mount namespace, the same inodes), and two appends or edit_file calls of one file at once
    each copied it, changed the copy and renamed it over the file, dropping the other's
    change (50 appends reported done, 40 lines in the file). The folder's flock is the
    kernel's, shared across the sandboxes: every write that says done is in the file."""
    import threading

    from runtime.broker import SyncBroker

    (workspace / "log.txt").write_text("")
    (workspace / "e.txt").write_text("".join(f"<a{i}> <b{i}>\n" for i in range(25)))
    done: list[str] = []
    failed: list[Any] = []

    with SyncBroker(workspace=workspace) as broker:

        def worker(tag: str) -> None:
            for i in range(25):
                for call in (
                    {
                        "tool": "write_file",
                        "arguments": {
                            "path": "log.txt",
                            "content": f"{tag}{i}\n",
                            "mode": "append",
                        },
                    },
                    {
                        "tool": "edit_file",
                        "arguments": {
                            "path": "e.txt",
                            "old_string": f"<{tag}{i}>",
                            "new_string": f"<{tag.upper()}{i}>",
                        },
                    },
                ):
                    result = broker.call(call)
                    (done if result.success else failed).append((tag, i, result.error))

        threads = [threading.Thread(target=worker, args=(t,)) for t in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not failed and len(done) == 100
    lines = (workspace / "log.txt").read_text().split()
    assert sorted(lines) == sorted(f"{t}{i}" for t in "ab" for i in range(25))
    text = (workspace / "e.txt").read_text()
    assert text == "".join(f"<A{i}> <B{i}>\n" for i in range(25))


def test_a_sandboxed_write_waits_for_the_folders_flock(workspace: Path) -> None:
    """The lock that keeps appends from dropping one another works inside the sandbox (the
    tool child's seccomp allows flock; the workspace's inode is the host's): a write waits
    while another process holds the folder's lock, and goes on when it is released."""
    import fcntl
    import threading
    import time

    from runtime.broker import SyncBroker

    with SyncBroker(workspace=workspace) as broker:
        warm = {"path": "hello.txt", "content": "x\n", "mode": "append"}
        assert broker.call({"tool": "write_file", "arguments": warm}).success
        holder = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(holder, fcntl.LOCK_EX)
            timer = threading.Timer(1.5, fcntl.flock, (holder, fcntl.LOCK_UN))
            t0 = time.monotonic()
            timer.start()
            result = broker.call({"tool": "write_file", "arguments": warm})
            took = time.monotonic() - t0
            timer.join()
        finally:
            os.close(holder)
    assert result.success, result.error
    assert took >= 1.4, took
    assert (workspace / "hello.txt").read_text() == "hello\nx\nx\n"


_NETWORK_POLICY = """
version = 1
default = "deny"
[categories]
network = "allow"
[network]
allow = ["127.0.0.1:9"]
allow_private = true
"""


@pytest.mark.parametrize(
    ("tool", "arguments", "path"),
    [
        # The tool's own check, in the sandboxed child: "url or urls" is no schema anyOf.
        ("web_fetch", {}, "url"),
        (
            "http_post",
            {"url": "http://127.0.0.1:9/", "body": "!!!", "body_encoding": "base64"},
            "body",
        ),
        ("shell_exec", {"command": "echo hi", "timeout_s": 100}, "timeout_s"),
        # An environment cannot carry a NUL: refused by the schema, before the policy read
        # the value as a command ("NUL byte in command", approval_required).
        ("shell_exec", {"command": "echo hi", "env": {"Z": "a\x00b"}}, "$.env.Z"),
        ("set_env", {"key": "X", "value": "a\x00b"}, "$.value"),
    ],
)
def test_bad_arguments_are_invalid_arguments(
    workspace: Path, tool: str, arguments: dict[str, Any], path: str
) -> None:
    """DESIGN §7: bad arguments are invalid_arguments (exit 65). These were tool_error (a
    sandboxed tool's InvalidArguments became tool_error at the broker; timeouts over the
    policy's limit were the tool's failure) or approval_required (a NUL in a variable's
    value, read by the policy as a command)."""
    from runtime.broker import SyncBroker
    from runtime.cli.exitcodes import EX_INVALID, exit_code_for

    policy = _policy()
    if tool.startswith(("web_", "http_")):  # denied by the default policy
        policy = Policy.from_toml(_NETWORK_POLICY, "test")
    with SyncBroker(workspace=workspace, policy=policy) as broker:
        result = broker.call({"tool": tool, "arguments": arguments})
    assert result.error is not None and result.error.type == "invalid_arguments", result
    details = result.error.details
    assert path in (details.get("path"), details.get("field")), details
    if "env" in arguments or tool == "set_env":  # the message names the variable
        name = next(iter(arguments["env"])) if "env" in arguments else arguments["key"]
        assert "NUL" in result.error.message and repr(name) in result.error.message
    assert exit_code_for(result) == EX_INVALID
