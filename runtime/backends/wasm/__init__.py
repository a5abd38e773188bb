"""The wasm backend: pure data tools as Wasmtime guests (DESIGN §4).

Public surface::

    from runtime.backends.wasm import WasmBackend, build_guests, GuestABI

The ABI guests implement is documented in :mod:`runtime.backends.wasm.abi` and
``guests/README.md``.
"""

from __future__ import annotations

from runtime.backends.wasm._build import build_guests, default_cache_dir, guests_source_dir
from runtime.backends.wasm.abi import GuestABI
from runtime.backends.wasm.backend import GuestModule, WasmBackend, load_custom_module

__all__ = [
    "GuestABI",
    "GuestModule",
    "WasmBackend",
    "build_guests",
    "default_cache_dir",
    "guests_source_dir",
    "load_custom_module",
]
