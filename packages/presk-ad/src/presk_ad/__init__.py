"""presk-ad: reverse-mode differentiation on PSK-Core."""

__version__ = "0.1.0"
