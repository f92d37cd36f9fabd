"""presk-export: PyTorch export (jinja2 templates) and its conformance tests."""

__version__ = "0.1.0"
