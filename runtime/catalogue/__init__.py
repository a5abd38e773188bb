"""The tool catalogue: manifests, validators, statistics and provider exports."""

from __future__ import annotations

from runtime.catalogue.export import EXPORT_FORMATS, ExportFormat, export_tool
from runtime.catalogue.loader import load_manifest, load_manifests
from runtime.catalogue.registry import Catalogue, ToolStats

__all__ = [
    "EXPORT_FORMATS",
    "Catalogue",
    "ExportFormat",
    "ToolStats",
    "export_tool",
    "load_manifest",
    "load_manifests",
]
