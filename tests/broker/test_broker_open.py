"""A Broker whose workspace cannot be a directory raises ConfigError naming it (was a raw
FileExistsError / PermissionError out of ``Path.mkdir``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.broker import Broker
from runtime.errors import ConfigError


def test_workspace_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "ws").write_text("x")
    with pytest.raises(ConfigError, match="ws") as info:
        Broker(workspace=tmp_path / "ws")
    assert info.value.details["path"] == str(tmp_path / "ws")
    assert isinstance(info.value.__cause__, OSError)


def test_workspace_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match=r"(?i)not a directory"):
        Broker(workspace=tmp_path / "f" / "ws")


@pytest.mark.parametrize("policy", [{"version": 1, "default": "allow"}, 42])
def test_a_policy_of_the_wrong_type_is_named(tmp_path: Path, policy: object) -> None:
    # Was an AttributeError ('dict' object has no attribute 'sandbox_mode') from inside.
    with pytest.raises(TypeError, match="policy must be"):
        Broker(workspace=tmp_path / "ws", policy=policy)


def test_a_file_where_the_state_directory_goes_is_named(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".runtime").write_text("x")
    with pytest.raises(ConfigError, match=r"\.runtime"):
        Broker(workspace=tmp_path / "ws")
