"""Presk's front end: the tree-sitter grammar to the AST, spans, diagnostics, the msgpack codec."""

__version__ = "0.1.0"
