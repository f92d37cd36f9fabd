"""presk-cback: C from kernels: the native backend (cffi), the C export."""

__version__ = "0.1.0"
