"""presk-core: PSK-Core: lowering, the reference interpreter (MPFR), data files."""

__version__ = "0.1.0"
