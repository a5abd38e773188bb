"""A wasm cache directory that cannot be created (a system user without a home, a read-only
home) is a sandbox_error naming the directory and the way out — not internal_error with a
PermissionError traceback logged for every data tool call."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.backends.wasm import build_guests
from runtime.errors import SandboxError


def test_build_into_a_directory_that_cannot_be_made(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file where the home directory should be")
    out = tmp_path / "home" / ".cache" / "runtime" / "wasm" / "guests"
    with pytest.raises(SandboxError, match="XDG_CACHE_HOME") as info:
        build_guests(out)
    assert str(out) in info.value.message
    assert info.value.details["path"] == str(out)
    assert isinstance(info.value.__cause__, OSError)
