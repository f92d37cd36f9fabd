"""Presk's PyTorch export: readable code mirroring the source, and its conformance tests."""

__version__ = "0.1.0"

from presk_export.conformance import conformance_files
from presk_export.export import export_pytorch, write_files
from presk_export.pyexpr import ExportError
from presk_export.pytorch import Export, Options, python_module

__all__ = [
    "Export",
    "ExportError",
    "Options",
    "conformance_files",
    "export_pytorch",
    "python_module",
    "write_files",
]
