"""presk-cli: `presk`, the umbrella command (click), and `presk-dump`."""

__version__ = "0.1.0"
