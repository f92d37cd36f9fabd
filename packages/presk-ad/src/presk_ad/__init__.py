"""presk-ad: reverse-mode differentiation on PSK-Core."""

__version__ = "0.1.0"
__all__ = ["ADError", "differentiate"]


def __getattr__(name: str):  # `presk_ad.passes` alone (the pipeline) loads no differentiation
    if name in __all__:
        from presk_ad import vjp

        return getattr(vjp, name)
    raise AttributeError(f"module 'presk_ad' has no attribute {name!r}")
