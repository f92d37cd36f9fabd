"""presk-cli: presk, the umbrella command."""

__version__ = "0.1.0"
