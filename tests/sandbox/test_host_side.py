"""The broker side of a sandboxed call keeps per-tool work out of the per-call path."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from runtime.backends.sandbox import SandboxBackend
from runtime.backends.sandbox import backend as backend_module
from runtime.backends.sandbox._channels import ControlChannel
from runtime.errors import SandboxUnavailable
from tests.sandbox.helpers import READ_FILE, spec


def test_a_tools_reference_is_resolved_once(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = SandboxBackend()
    calls: list[str] = []
    real = SandboxBackend._tool_ref

    def counting(tool_spec: object) -> tuple[str, str, str]:
        calls.append(str(getattr(tool_spec, "name", "")))
        return real(tool_spec)  # type: ignore[arg-type]

    monkeypatch.setattr(SandboxBackend, "_tool_ref", staticmethod(counting))
    first = backend._ref(READ_FILE)
    assert backend._ref(READ_FILE) == first
    assert calls == ["read_file"]
    other = spec("list_files", "files:list_files", "ro")
    assert backend._ref(other)[1] == "files:list_files"
    assert calls == ["read_file", "list_files"]


def test_a_relative_tool_folder_is_resolved_every_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Relative to the cwd, which may change between calls: never cached. The folders are
    # readable to the sandbox's user (tmp_path is 0700: a root broker refuses it, naming it).
    (tmp_path / "mine.py").write_text("def run(args, ctx):\n    return 1\n")
    tmp_path.chmod(0o755)
    monkeypatch.chdir(tmp_path.parent)
    tool = spec("mine", "mine:run", "ro").model_copy(
        update={"source": Path(tmp_path.name) / "mine.json"}
    )
    backend = SandboxBackend()
    assert backend._ref(tool)[2] == str(tmp_path.resolve())
    other = tmp_path / "elsewhere"
    (other / tmp_path.name).mkdir(parents=True, mode=0o755)
    (other / tmp_path.name).chmod(0o755)
    monkeypatch.chdir(other)
    assert backend._ref(tool)[2] == str((other / tmp_path.name).resolve())


@pytest.mark.anyio
async def test_the_control_channel_locks_do_not_yield_when_free() -> None:
    # Each sandboxed call takes both locks once; uncontended, taking one must not cost a
    # trip through the event loop (another task gets no turn in between).
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    channel = ControlChannel(ours)
    ran: list[str] = []

    async def other() -> None:
        ran.append("other")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            async with channel.send_lock, channel.read_lock:
                assert ran == []
            await anyio.lowlevel.checkpoint()
            assert ran == ["other"]
    finally:
        channel.close()
        theirs.close()


def _no_libseccomp() -> tuple[bytes, bytes]:
    raise OSError(2, "libseccomp is not installed")


@pytest.mark.anyio
@pytest.mark.sandbox
async def test_without_seccomp_programs_strict_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    # The broker compiles the programs now; failing to must still mean "seccomp missing".
    monkeypatch.setattr(backend_module, "_seccomp_programs", _no_libseccomp)
    backend = SandboxBackend(mode="strict", pool=0)
    with pytest.raises(SandboxUnavailable, match="seccomp"):
        await backend.start()
    await backend.aclose()


@pytest.mark.anyio
@pytest.mark.sandbox
async def test_without_seccomp_programs_best_effort_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backend_module, "_seccomp_programs", _no_libseccomp)
    backend = SandboxBackend(mode="best_effort", pool=0)
    try:
        await backend.start()
        assert "libseccomp is not installed" in backend.load_errors["seccomp"]
        assert "seccomp" in backend.fingerprint().missing
        assert "seccomp" not in backend.fingerprint().mechanisms
    finally:
        await backend.aclose()
