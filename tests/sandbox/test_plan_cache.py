"""The spawn plan and call options built once per profile equal what each call would build."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from runtime.backends.base import ExecRequest
from runtime.backends.sandbox import SandboxBackend, walls
from runtime.backends.sandbox.masks import MaskSpec
from runtime.models import WorkspaceAccess
from tests.sandbox.helpers import (
    PROBE_NONE,
    PROBE_RO,
    PROBE_RW,
    READ_FILE,
    SHELL,
    TOOLS,
    request,
)


def _reference_plan(backend: SandboxBackend, req: ExecRequest) -> dict[str, Any]:
    """The plan as it was built for every call before it was cached."""
    needs = req.spec.sandbox
    access = needs.workspace
    workspace = str(req.workspace.resolve()) if access != WorkspaceAccess.NONE else None
    masks = backend._masks
    return {
        "call_id": req.call_id,
        "workspace": workspace,
        "access": str(access),
        "exec": bool(needs.exec),
        "limits": req.limits.model_dump(),
        # A call that runs programs is told its memory (walls.runtime_hints); the policy's
        # environment wins.
        "env": {
            **(walls.runtime_hints(req.limits.memory_mb) if needs.exec else {}),
            **req.env,
        },
        # A call that may write also pins the directories above masked entries (_pins).
        "masks": replace(masks, pin=access == WorkspaceAccess.WRITE).as_plan() if masks else {},
        # A tool outside the built-in catalogue (the test tools') imports in its call,
        # from its folder bound read-only (``child.FolderTool``).
        **({"tool_dir": str(TOOLS)} if req.spec.source.parent == TOOLS else {}),  # type: ignore[union-attr]
    }


def _reference_options(backend: SandboxBackend, req: ExecRequest) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if req.spec.command:
        options["command"] = list(req.spec.command)
    if backend._masks.hide:
        options["path_deny"] = list(backend._masks.hide)
    read, write = backend._allow
    if read is not None:
        options["path_read"] = list(read)
    if write is not None:
        options["path_write"] = list(write)
    return options


@pytest.mark.parametrize("masks", [None, MaskSpec(hide=("**/.env",), readonly=("*.lock",))])
def test_cached_plans_equal_per_call_plans(tmp_path: Path, masks: MaskSpec | None) -> None:
    backend = SandboxBackend(masks=masks)
    other = tmp_path / "other"
    other.mkdir()
    cases = [
        request(READ_FILE, tmp_path, {"path": "a"}),
        request(PROBE_RW, tmp_path, {}),
        request(PROBE_RO, tmp_path, {}),
        request(PROBE_NONE, tmp_path, {}),
        request(SHELL, tmp_path, {"command": "true"}),
        request(READ_FILE, tmp_path, {"path": "a"}, timeout_s=3.0),
        request(READ_FILE, tmp_path, {"path": "a"}, memory_mb=128, output_bytes=4096),
        request(READ_FILE, other, {"path": "a"}),
    ]
    for _ in range(2):  # the second round is served from the cache
        for i, req in enumerate(cases):
            req.call_id = f"call_{i}"
            req.env = {"N": str(i)}
            assert backend._plan(req) == _reference_plan(backend, req)
            assert backend._call_options(req.spec) == _reference_options(backend, req)
    # read_file and probe_ro are one profile (read-only, no exec, the same limits).
    assert len(backend._plans) == len(cases) - 1


def test_narrow_allow_globs_reach_the_toolkit_options(tmp_path: Path) -> None:
    # Red team: walks and symlinks went past [paths] read/write; the toolkit needs the globs.
    req = request(READ_FILE, tmp_path, {"path": "a"})
    assert "path_read" not in SandboxBackend()._call_options(req.spec)
    backend = SandboxBackend(allow=(("out/**",), ("out/**", "tmp/**")))
    options = backend._call_options(req.spec)
    assert options["path_read"] == ["out/**"] and options["path_write"] == ["out/**", "tmp/**"]


def test_the_plan_follows_limits_changed_in_place(tmp_path: Path) -> None:
    backend = SandboxBackend()
    req = request(READ_FILE, tmp_path, {"path": "a"})
    assert backend._plan(req)["limits"]["memory_mb"] == req.limits.memory_mb
    req.limits.memory_mb = 99  # Limits is a mutable model: the key is its values
    assert backend._plan(req)["limits"]["memory_mb"] == 99


def test_a_plans_env_is_the_calls_own_copy(tmp_path: Path) -> None:
    backend = SandboxBackend()
    req = request(READ_FILE, tmp_path, {"path": "a"})
    plan = backend._plan(req)
    req.env["LATER"] = "1"
    assert "LATER" not in plan["env"]
    assert backend._plan(req)["env"]["LATER"] == "1"


def test_the_workspace_is_resolved_once_per_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = SandboxBackend()
    # The tools' folders are resolved once per tool (``_ref``), before what is counted here.
    backend._ref(READ_FILE)
    backend._ref(PROBE_RW)
    resolved: list[Path] = []
    real = Path.resolve

    def counting(self: Path, strict: bool = False) -> Path:
        resolved.append(self)
        return real(self, strict)

    monkeypatch.setattr(Path, "resolve", counting)
    for _ in range(3):
        backend._plan(request(READ_FILE, tmp_path, {"path": "a"}))
    assert resolved == [tmp_path]
    backend._plan(request(PROBE_RW, tmp_path, {}))  # another profile: its own entry
    assert resolved == [tmp_path, tmp_path]


@pytest.mark.parametrize("masks", [None, MaskSpec(hide=("**/.env",), readonly=("*.lock",))])
def test_the_brokers_profile_is_the_zygotes_key_for_the_plan(
    tmp_path: Path, masks: MaskSpec | None
) -> None:
    # The zygote keys its spares by this string; it used to make it from the plan it
    # received (after msgpack), now the broker sends it: both must agree, per call.
    from runtime.backends.sandbox.zygote import Zygote
    from runtime.frames import HEADER, decode_body, encode_frame

    backend = SandboxBackend(masks=masks)
    seen: dict[str, str] = {}
    for _ in range(2):  # the second round is served from the cache
        for i, (spec, env) in enumerate(
            [
                (READ_FILE, {}),
                (READ_FILE, {"A": "1"}),
                (READ_FILE, {"A": "2", "B": "x"}),
                (PROBE_RW, {"A": "1"}),
                (SHELL, {}),
            ]
        ):
            req = request(spec, tmp_path, {})
            req.call_id, req.env = f"call_{i}", dict(env)
            opened = backend._open(req)
            opened.channel.close()
            opened.theirs.close()
            spawn = opened.spawn
            frame = encode_frame(spawn)
            received = decode_body(frame[HEADER.size :])
            assert spawn["profile"] == Zygote._profile(received["plan"])
            seen.setdefault(spawn["profile"], f"{spec.name} {env}")
    assert len(seen) == 5  # a different environment is a different profile
