"""presk-ad: reverse-mode differentiation on PSK-Core."""

from presk_ad.vjp import ADError, differentiate

__version__ = "0.1.0"
__all__ = ["ADError", "differentiate"]
