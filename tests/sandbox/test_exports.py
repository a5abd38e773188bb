"""Each sandbox module has a sorted ``__all__`` whose names exist (httpx/trio style)."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "runtime.backends.sandbox",
    "runtime.backends.sandbox._channels",
    "runtime.backends.sandbox._launcher",
    "runtime.backends.sandbox._linux",
    "runtime.backends.sandbox._outcome",
    "runtime.backends.sandbox._setup",
    "runtime.backends.sandbox.backend",
    "runtime.backends.sandbox.cgroups",
    "runtime.backends.sandbox.child",
    "runtime.backends.sandbox.landlock",
    "runtime.backends.sandbox.masks",
    "runtime.backends.sandbox.newroot",
    "runtime.backends.sandbox.probe",
    "runtime.backends.sandbox.process",
    "runtime.backends.sandbox.seccomp",
    "runtime.backends.sandbox.zygote",
]


def _isort_key(name: str) -> tuple[int, str]:
    rank = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return rank, name


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    # isort-style, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
    assert exported == sorted(exported, key=_isort_key)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"


def test_public_api() -> None:
    import runtime.backends.sandbox as sandbox

    assert {"SandboxBackend", "probe_host", "HostCapabilities"} <= set(sandbox.__all__)
