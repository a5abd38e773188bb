"""Fixtures for the built-in tool tests: a workspace directory, a context, tool loading."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.models import Limits, ToolSpec
from runtime.toolkit import ToolContext, builtin_tools_dir, load_entry

TOOLS_DIR = builtin_tools_dir()
#: The folders this suite owns (data/ and network/ are tested with their own modules).
OWN_FOLDERS = ("files", "code", "shell", "system", "memory", "interaction")

Tool = Callable[[dict[str, Any], ToolContext], dict[str, Any]]


def manifest(name: str) -> tuple[ToolSpec, Path]:
    for folder in OWN_FOLDERS:
        path = TOOLS_DIR / folder / f"{name}.json"
        if path.is_file():
            return ToolSpec.model_validate(json.loads(path.read_text())), path
    raise LookupError(name)


def load_tool(name: str) -> Tool:
    spec, path = manifest(name)
    assert spec.entry is not None
    return load_entry(spec.entry, path.parent)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A canary directory next to the workspace: nothing may read or write it."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("TOP SECRET\n")
    return out


@pytest.fixture
def ctx(ws: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(
        workspace=ws,
        limits=Limits(timeout_s=10, output_bytes=65536),
        options={"session_env": {}, "state_dir": tmp_path / "state"},
    )


@pytest.fixture
def tool() -> Callable[[str], Tool]:
    return load_tool
