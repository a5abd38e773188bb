"""Path-aware globs for the policy: the implementation lives in :mod:`runtime._globs`.

It sits outside the ``runtime.policy`` package so that the sandbox child (which must not import
pydantic, hence not ``runtime.policy``) matches paths with exactly the same semantics as the
broker's lexical checks: one translator, no drift between the string check and the kernel masks.
"""

from __future__ import annotations

from runtime._globs import GlobSet, compile_glob

__all__ = ["GlobSet", "compile_glob"]
