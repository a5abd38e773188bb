"""shell_exec: output, exit codes, caps, timeouts that kill the group, env and cwd rules."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import toolkit_proc
from runtime.errors import InvalidArguments, ToolFailed, ToolTimeout
from runtime.frames import encode_frame
from runtime.models import Limits
from runtime.toolkit import ToolContext

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]


@pytest.fixture
def sh(tool: Callable[[str], Tool]) -> Tool:
    return tool("shell_exec")


def test_stdout_stderr_exit_code(sh: Tool, ctx: ToolContext) -> None:
    r = sh({"command": "echo out; echo err >&2; exit 3"}, ctx)
    assert r == {"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "truncated": False}


def test_runs_in_workspace_and_cwd(sh: Tool, ctx: ToolContext, ws: Path) -> None:
    (ws / "sub").mkdir()
    assert sh({"command": "pwd"}, ctx)["stdout"].strip() == str(ws)
    assert sh({"command": "pwd", "cwd": "sub"}, ctx)["stdout"].strip() == str(ws / "sub")
    assert sh({"command": "pwd", "cwd": "/workspace/sub"}, ctx)["stdout"].strip() == str(ws / "sub")


@pytest.mark.parametrize(
    ("cwd", "reason"),
    [
        ("..", "parent_ref"),
        ("/tmp", "absolute"),
        ("missing", "not_found"),
        ("f", "not_a_directory"),
    ],
)
def test_bad_cwd(sh: Tool, ctx: ToolContext, ws: Path, cwd: str, reason: str) -> None:
    (ws / "f").write_text("")
    with pytest.raises(ToolFailed) as exc:
        sh({"command": "true", "cwd": cwd}, ctx)
    assert exc.value.details["reason"] == reason


def test_cwd_symlink_escape(sh: Tool, ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "o").symlink_to(outside)
    with pytest.raises(ToolFailed) as exc:
        sh({"command": "cat secret.txt", "cwd": "o"}, ctx)
    assert exc.value.details["reason"] == "escape"


def test_environment_is_only_given(sh: Tool, ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_SECRET", "s3cr3t")
    ctx = ToolContext(
        workspace=ws, env={"POLICY_VAR": "p"}, options={"session_env": {"SESSION_VAR": "s"}}
    )
    out = sh({"command": "env", "env": {"ARG_VAR": "a"}}, ctx)["stdout"]
    env = dict(line.split("=", 1) for line in out.splitlines())
    assert "BROKER_SECRET" not in env
    assert env["POLICY_VAR"] == "p" and env["SESSION_VAR"] == "s" and env["ARG_VAR"] == "a"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"


@pytest.mark.parametrize("key", ["LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "IFS", "1X", "A-B"])
def test_refused_env_keys(sh: Tool, ctx: ToolContext, key: str) -> None:
    with pytest.raises(ToolFailed):
        sh({"command": "true", "env": {key: "x"}}, ctx)


def test_output_cap_drains_and_truncates(sh: Tool, ws: Path) -> None:
    ctx = ToolContext(workspace=ws, limits=Limits(output_bytes=1000, timeout_s=20))
    # 5 MB on each pipe: without concurrent draining the child would block forever.
    r = sh(
        {
            "command": "head -c 5000000 /dev/zero | tr '\\0' a; "
            "head -c 5000000 /dev/zero | tr '\\0' b >&2; echo done >&2"
        },
        ctx,
    )
    assert r["truncated"] and r["exit_code"] == 0
    # Both streams share the cap (each used to get all of it, so the result overflowed).
    assert r["stdout"] == "a" * len(r["stdout"]) and r["stderr"] == "b" * len(r["stderr"])
    assert len(r["stdout"]) == len(r["stderr"]) >= 300
    assert len(_frame(r)) <= 1000


def _frame(result: dict[str, Any]) -> bytes:
    """The larger of the two forms the cap applies to: the frame the sandboxed child sends
    and the JSON the broker sizes."""
    frame = encode_frame({"type": "result", "value": result}, max_size=1 << 30)
    text = json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return max(frame, text, key=len)


@pytest.mark.parametrize(
    ("command", "out", "err"),
    [
        # One big stream: it gets the whole cap but the JSON around it, not more.
        ("head -c 200000 /dev/zero | tr '\\0' a", "a", ""),
        ("head -c 200000 /dev/zero | tr '\\0' b >&2; echo small", "small\n", "b"),
        # Invalid UTF-8 decodes to U+FFFD, three bytes for each byte read.
        ("head -c 200000 /dev/zero | tr '\\0' '\\377'", "\ufffd", ""),
        # A control byte is escaped to six bytes of JSON.
        ("head -c 200000 /dev/zero | tr '\\0' '\\1'", "\x01", ""),
        (
            "printf 'x%.0s' $(seq 500); head -c 200000 /dev/zero | tr '\\0' '\\377' >&2",
            "x",
            "\ufffd",
        ),
    ],
)
def test_output_cap_bounds_the_whole_result(
    sh: Tool, ws: Path, command: str, out: str, err: str
) -> None:
    """stdout/stderr are truncated (truncated=true) so that the result fits the output cap:
    before, a command printing more than the cap failed the call with output_too_large and
    all its output was lost."""
    cap = 8192
    ctx = ToolContext(workspace=ws, limits=Limits(output_bytes=cap, timeout_s=20))
    r = sh({"command": command}, ctx)
    assert r["truncated"] and r["exit_code"] == 0
    assert len(_frame(r)) <= cap
    for got, want in ((r["stdout"], out), (r["stderr"], err)):
        if len(want) == 1:
            assert got and got == want * len(got)
        else:
            assert got == want
    assert len(_frame(r)) > cap // 2  # the room is used, not given away


def test_timeout_kills_the_group(sh: Tool, ws: Path, tmp_path: Path) -> None:
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=5))
    pidfile = ws / "pid"
    with pytest.raises(ToolTimeout) as exc:
        sh(
            {"command": f"sleep 300 & echo $! > {pidfile}; echo started; wait", "timeout_s": 0.5},
            ctx,
        )
    assert exc.value.details["stdout"] == "started\n"
    pid = int(pidfile.read_text())
    # The background sleep was in the group: SIGKILL is delivered asynchronously, so wait
    # (bounded) until it is gone or a zombie awaiting its reaper.
    assert _dies(pid)


def _dies(pid: int) -> bool:
    for _ in range(500):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize(
    "command",
    [
        "exec >/dev/null 2>&1; sleep 20",  # make > build.log 2>&1, as a whole command
        "echo started; exec >&- 2>&-; sleep 20",
        "sleep 20 >/dev/null 2>&1",
    ],
)
def test_timeout_holds_when_the_command_lets_go_of_its_output(
    sh: Tool, ws: Path, command: str
) -> None:
    """Once both pipes were closed the tool waited for the command without a deadline: its
    timeout_s was ignored and the call ran into the sandbox's own limit ('the call exceeded
    its timeout', the partial output lost)."""
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=60))
    with pytest.raises(ToolTimeout) as exc:
        sh({"command": command, "timeout_s": 0.5}, ctx)
    assert "0.5 s" in exc.value.message
    assert exc.value.details["stdout"] == ("started\n" if "started" in command else "")


def test_timeout_keeps_the_head_and_the_tail_of_the_output(sh: Tool, ws: Path) -> None:
    """On a timeout only the first 1 KiB of output came back ("1\\n2\\n...283\\n" of a
    hung `seq`), unmarked; the end of a hung test run is what tells where it hung. Now each
    stream keeps its first and last 4 KiB, a line between naming what was left out, and
    ``truncated`` says so."""
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=60))
    with pytest.raises(ToolTimeout) as exc:
        sh({"command": "seq 1 100000; echo ERRTAIL >&2; sleep 20", "timeout_s": 1}, ctx)
    out = exc.value.details["stdout"]
    assert out.startswith("1\n2\n3\n") and out.endswith("\n99999\n100000\n")
    assert len(out.encode()) <= 8192 + 64
    total = len("".join(f"{i}\n" for i in range(1, 100001)).encode())
    head, _, tail = out.partition("\n[... ")
    left_out = int(tail.split(" ", 1)[0])
    assert left_out + len(head) + len(tail.split("...]\n", 1)[1]) == total
    assert exc.value.details["stderr"] == "ERRTAIL\n"
    assert exc.value.details["truncated"] is True
    with pytest.raises(ToolTimeout) as exc:
        sh({"command": "echo started; sleep 20", "timeout_s": 0.5}, ctx)
    assert exc.value.details["stdout"] == "started\n"
    assert exc.value.details["truncated"] is False


def test_timeout_output_keeps_whole_characters(sh: Tool, ws: Path) -> None:
    """The cuts fall between UTF-8 characters, never inside one (no U+FFFD of our own)."""
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=60))
    chars = "printf '\\303\\251\\342\\202\\254'"  # "é€": 2 and 3 bytes
    command = f"i=0; while [ $i -lt 3000 ]; do {chars}; i=$((i+1)); done; sleep 20"
    with pytest.raises(ToolTimeout) as exc:
        sh({"command": command, "timeout_s": 2}, ctx)
    out = exc.value.details["stdout"]
    assert "\ufffd" not in out and out.startswith("é€") and out.endswith("é€")


def test_trapped_sigterm_still_dies(sh: Tool, ws: Path) -> None:
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=5))
    with pytest.raises(ToolTimeout):
        sh({"command": "trap '' TERM; while :; do sleep 0.05; done", "timeout_s": 0.3}, ctx)


@pytest.mark.parametrize("limit", [1.0, 3.0, 5.0, 12.0, 30.0, 120.0])
def test_the_kill_and_its_grace_fit_before_the_calls_deadline(limit: float) -> None:
    """A command timed to the call's limit is SIGTERMed, given its grace, then SIGKILLed,
    and all of it (with room to report) comes before the call's own deadline: a fixed 2 s
    grace outlasted it below ~12 s, and the call timed out with what was printed lost."""
    own = toolkit_proc.within_call(limit, limit)
    grace = toolkit_proc.kill_grace(own, limit)
    # As close to what was asked as the rest allows: 3 s before the deadline, a fifth of
    # a short call's limit.
    assert own == pytest.approx(max(limit - 3.0, 0.8 * limit))
    assert 0 < grace <= 2.0
    assert limit - (own + grace) >= min(1.0, limit / 16)  # room for the report
    # A timeout below the limit leaves more room: up to the full grace.
    assert toolkit_proc.kill_grace(limit / 4, limit) == pytest.approx(min(2.0, limit / 2))


def test_a_short_calls_timeout_keeps_the_output_of_a_command_ignoring_sigterm(
    sh: Tool, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """timeout_s = 3, a command that ignores SIGTERM: its SIGKILL came 2 s after the
    command's timeout (2.25 s), past the call's 3 s; in the sandbox the call then ended
    first and "part" was lost. Now the command's timeout and the kill's grace, as the tool
    hands them to the runner, end before 3 s with room to report, and the output is kept.

    The schedule is read from the runner's arguments, not from a clock: an earlier version
    timed the call against 2.95 s, and a loaded CI machine took 3.6 s."""
    runner = sh.__globals__["run_capped"]
    given: dict[str, float] = {}

    def spy(*args: Any, **kwargs: Any) -> Any:
        given.update(timeout=kwargs["timeout"], grace=kwargs["grace"])
        return runner(*args, **kwargs)

    monkeypatch.setitem(sh.__globals__, "run_capped", spy)
    limit = 3.0
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=limit))
    with pytest.raises(ToolTimeout) as exc:
        sh({"command": "trap '' TERM; echo part; sleep 50"}, ctx)
    assert exc.value.details["stdout"] == "part\n"
    assert 0 < given["timeout"] < limit and given["grace"] > 0
    assert limit - (given["timeout"] + given["grace"]) >= min(1.0, limit / 16)


def test_a_sigterm_to_the_runner_waits_for_the_command(sh: Tool, ws: Path) -> None:
    """In the sandbox a call ended by the broker gets SIGTERM to every process, then a
    grace. The runner died of it at once, closing its pipes: a command cleaning up on
    SIGTERM that printed was killed by SIGPIPE, its clean-up cut short. Now the runner
    holds its SIGTERM, reading, until the command has ended, then dies of it."""
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=30))
    command = (
        "trap 'sleep 0.3; echo cleaning up; echo done > cleaned; exit 0' TERM; "
        "echo $$ > group; sleep 60 & wait"
    )
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            sh({"command": command}, ctx)
        finally:
            os._exit(3)
    try:
        group = ws / "group"
        for _ in range(500):
            if group.exists() and group.read_text().strip():
                break
            time.sleep(0.01)
        # As the sandbox's pid 1 does: every process at once.
        os.killpg(int(group.read_text()), signal.SIGTERM)
        os.kill(pid, signal.SIGTERM)
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
    assert (ws / "cleaned").read_text() == "done\n"


def test_timeout_over_limit_refused(sh: Tool, ws: Path) -> None:
    """An argument out of range (the policy's limit narrows the schema's maximum):
    invalid_arguments, as DESIGN §7 types bad arguments; it was tool_error."""
    ctx = ToolContext(workspace=ws, limits=Limits(timeout_s=5))
    with pytest.raises(InvalidArguments) as exc:
        sh({"command": "true", "timeout_s": 6}, ctx)
    assert exc.value.details["reason"] == "timeout_over_limit"


def test_background_child_does_not_hold_the_call(sh: Tool, ctx: ToolContext) -> None:
    r = sh({"command": "sleep 300 & echo bg"}, ctx)
    assert r["stdout"] == "bg\n" and r["exit_code"] == 0


def test_signal_exit_is_data(sh: Tool, ctx: ToolContext) -> None:
    r = sh({"command": "kill -KILL $$"}, ctx)
    assert r["exit_code"] == 137 and r["signal"] == "SIGKILL"


def test_stdin_is_devnull(sh: Tool, ctx: ToolContext) -> None:
    assert sh({"command": "cat"}, ctx)["stdout"] == ""


def test_preexec_hook_runs_in_child(sh: Tool, ws: Path) -> None:
    marker = ws / "preexec-ran"

    def hook() -> None:
        fd = os.open(marker, os.O_CREAT | os.O_WRONLY, 0o600)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)

    ctx = ToolContext(workspace=ws, options={"preexec": hook})
    r = sh({"command": "echo $$"}, ctx)
    assert marker.read_text() == r["stdout"].strip()  # same pid: sh exec'd after the hook
    assert int(marker.read_text()) != os.getpid()


def test_nul_in_command(sh: Tool, ctx: ToolContext) -> None:
    with pytest.raises(ToolFailed):
        sh({"command": "echo a\0b"}, ctx)


BLOCKING = ["http.server", "npm run dev", "npm start", "uvicorn", "vite", "next dev"]


@pytest.mark.parametrize(
    "command",
    [
        "python3 -m http.server 8000",
        "npm start",
        "cd app && uvicorn main:app",
        "npx vite",
        "npm run dev -- --port 3000",
    ],
)
def test_blocking_services_refused_when_policy_lists_them(sh: Tool, ws: Path, command: str) -> None:
    ctx = ToolContext(workspace=ws, options={"blocked_services": BLOCKING})
    with pytest.raises(ToolFailed) as exc:
        sh({"command": command}, ctx)
    assert exc.value.details["reason"] == "blocking_service"


def test_blocking_patterns_match_whole_words(sh: Tool, ws: Path) -> None:
    ctx = ToolContext(workspace=ws, options={"blocked_services": BLOCKING})
    assert sh({"command": "echo invite npm-starter"}, ctx)["exit_code"] == 0
    allowed = ToolContext(workspace=ws, options={"blocked_services": []})
    assert sh({"command": "echo vite"}, allowed)["stdout"] == "vite\n"


@pytest.mark.parametrize(
    ("command", "limit", "sig"),
    [
        ("ulimit -S -t 1; echo spinning; exec sh -c 'while :; do :; done'", "cpu_s", "SIGXCPU"),
        ("ulimit -f 1; echo writing; exec head -c 100000 /dev/zero > f", "fsize_mb", "SIGXFSZ"),
        # Without exec, /bin/sh (dash) runs the command as its child and reports its death
        # by the signal as exit status 128 + N: success with exit code 152/153 before.
        ("ulimit -S -t 1; echo spinning; sh -c 'while :; do :; done'", "cpu_s", "SIGXCPU"),
        ("ulimit -f 1; echo writing; head -c 100000 /dev/zero > f", "fsize_mb", "SIGXFSZ"),
    ],
)
def test_command_killed_by_a_limit_is_a_resource_limit(
    sh: Tool, ctx: ToolContext, command: str, limit: str, sig: str
) -> None:
    """The kernel sends SIGXCPU / SIGXFSZ only for RLIMIT_CPU / RLIMIT_FSIZE, which the
    sandbox sets from the policy's cpu_s / fsize_mb: a command they end reached a limit
    (resource_limit, DESIGN §7), not success with exit code 152."""
    from runtime.errors import ResourceLimitExceeded

    with pytest.raises(ResourceLimitExceeded) as exc:
        sh({"command": command}, ctx)
    assert exc.value.details["limit"] == limit and exc.value.details["signal"] == sig
    assert exc.value.details["stdout"] in ("spinning\n", "writing\n")
    assert limit in exc.value.message
